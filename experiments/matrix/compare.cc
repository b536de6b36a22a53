#include "experiments/matrix/compare.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/device.h"
#include "common/ops_factory.h"
#include "common/status_macros.h"
#include "experiments/matrix/cluster_emulation.h"
#include "experiments/matrix/spec.h"
#include "experiments/matrix/summary.h"
#include "experiments/netem/netem.h"
#include "experiments/sys/sys.h"
#include "google/protobuf/text_format.h"

namespace ringside {
namespace {

namespace fs = std::filesystem;

// How one cell's job ended.
struct ChildOutcome {
  bool ok = false;
  bool interrupted = false;
  std::string how;  // "exited with status 1", "timed out after 1800 s", ...
};

// Runs `argv` with stdout and stderr into `log_path`; blocks until it exits, the cell
// timeout passes (SIGTERM), or the matrix is interrupted (`signals` caught a signal:
// SIGINT is forwarded; the launcher inside passes it on to the ranks).
ChildOutcome RunChild(const std::vector<std::string>& argv, const std::string& log_path,
                      absl::Duration limit, ScopedSignalCatcher* signals) {
  ChildOutcome out;
  SpawnOptions so;
  so.argv = argv;
  so.out = ChildStream::kFile;
  so.out_path = log_path;
  so.err = ChildStream::kStdout;
  so.die_with_parent = true;  // A killed compare leaves no cell running.
  absl::StatusOr<std::unique_ptr<Subprocess>> child = Subprocess::Spawn(so);
  if (!child.ok()) {
    out.how = std::string(child.status().message());
    return out;
  }
  const absl::Time deadline = absl::Now() + limit;
  bool signalled = false;
  while (!(*child)->WaitUntil(absl::Now() + absl::Milliseconds(50)).ok()) {
    if (signals->caught() != 0 && !signalled) {
      (*child)->Signal(SIGINT);
      signalled = true;
      out.interrupted = true;
    }
    if (absl::Now() > deadline && !signalled) {
      (*child)->Signal(SIGTERM);
      signalled = true;
      out.how = absl::StrCat("timed out after ", absl::FormatDuration(limit));
    }
  }
  // A signal to the whole process group (Ctrl-C, `timeout`) may end the cell before
  // this loop forwarded anything: the matrix was interrupted all the same.
  if (signals->caught() != 0) out.interrupted = true;
  if ((*child)->succeeded() && !signalled) {
    out.ok = true;
  } else if (out.how.empty()) {
    out.how = (*child)->ExitDescription();
  }
  return out;
}

std::string Bar(int done, int total) {
  const int width = 24;
  const int filled = total > 0 ? done * width / total : width;
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '-'), "]");
}

std::string Clock(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

// The matrix's progress on `out` (nullptr: silent). On a terminal one status line is
// redrawn in place (`\r`); anywhere else (a log, a pipe) each event is a line of its
// own, so the output has no carriage returns.
class CompareProgress {
 public:
  explicit CompareProgress(FILE* out) : out_(out), redraw_(IsTerminal(out)) {}

  // Cell `i` (0-based) of `total` starts; `eta` is the time the rest should take.
  void Running(size_t i, size_t total, const std::string& eta, const std::string& cell) {
    if (out_ == nullptr) return;
    if (redraw_) {
      absl::FPrintF(out_, "\r%s %d/%d cells  ETA %s  running %-28s", Bar(static_cast<int>(i), total), i,
                    total, eta, cell);
    } else {
      absl::FPrintF(out_, "compare: cell %d/%d %s (ETA %s)\n", i + 1, total, cell, eta);
    }
    fflush(out_);
  }

  void Failed(const std::string& cell, const std::string& reason) {
    if (out_ == nullptr) return;
    absl::FPrintF(out_, "%scell %s failed: %s\n", redraw_ ? "\n" : "", cell, reason);
  }

  void Done(size_t finished, size_t total, int kept, int failed) {
    if (out_ == nullptr) return;
    const std::string counts = absl::StrFormat("%d/%d cells (%d kept from an earlier run, %d failed)",
                                               finished, total, kept, failed);
    if (redraw_) {
      absl::FPrintF(out_, "\r%s %s%30s\n", Bar(static_cast<int>(finished), total), counts, "");
    } else {
      absl::FPrintF(out_, "compare: %s\n", counts);
    }
    fflush(out_);
  }

 private:
  FILE* const out_;
  const bool redraw_;
};

// Checks what must hold before any cell starts: emulated links can be made, and the
// output directory is writable (it gets a copy of the spec).
absl::Status Prepare(const CompareOptions& o, const ExperimentSpec& spec) {
  if (!spec.network().empty()) {
    absl::StatusOr<NetworkProfile> profile = ParseNetworkProfile(spec.network());
    if (!profile.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(o.spec_path, ": ", profile.status().message()));
    }
    if (profile->enabled) RINGSIDE_RETURN_IF_ERROR(CheckNetworkPrivileges());
  }
  if (!spec.node_cpus().empty()) RINGSIDE_RETURN_IF_ERROR(CheckCpuSharePrivileges());
  std::error_code error;
  fs::create_directories(fs::path(o.out_dir) / "cells", error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", o.out_dir, ": ", error.message()));
  }
  absl::Status s = WriteFileAtomically(o.out_dir + "/spec.textproto", ReadFile(o.spec_path).value_or(""));
  if (!s.ok()) {
    return absl::PermissionDeniedError(absl::StrCat("output directory ", o.out_dir, " is not writable: ", s.message()));
  }
  return absl::OkStatus();
}

// `word` as one shell word: as is when it is plain, else in single quotes.
std::string ShellWord(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return absl::ascii_isalnum(c) || std::strchr("_./-+=:,@%", c) != nullptr;
  });
  if (plain) return word;
  return absl::StrCat("'", absl::StrReplaceAll(word, {{"'", "'\\''"}}), "'");
}

// The result an earlier run left for the cell in `dir`, if any.
bool ReadKeptResult(const std::string& dir, CellResult* r) {
  absl::StatusOr<std::string> text = ReadFile(dir + "/" + kCellResultFile);
  return text.ok() && google::protobuf::TextFormat::ParseFromString(*text, r);
}

}  // namespace

absl::Status RunCompare(const CompareOptions& o) {
  RINGSIDE_ASSIGN_OR_RETURN(ExperimentSpec spec, LoadSpec(o.spec_path));
  // GPU cells where none can run: refused before anything is created or started.
  if (SpecUsesGpu(spec)) {
    if (absl::Status s = CheckGpuCellsCanRun(spec, BuiltWithCuda(), DetectDevices()); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(o.spec_path, ": ", s.message()));
    }
  }
  std::vector<Cell> cells = ExpandCells(spec);
  // A cluster's devices per node become the cells' ranks per node (cluster_emulation.h).
  if (absl::Status s = ResolveClusterCells(spec, MachineCpus(), &cells); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(o.spec_path, ": ", s.message()));
  }
  double node_cpus = 0;  // The resolved share (0: none).
  for (const Cell& c : cells) node_cpus = std::max(node_cpus, c.node_cpus);
  // A cluster: its profile checked, then the links derived by time dilation from this
  // host's step (or the dilation this directory started with), before anything is made.
  DilationRecord dilation;
  if (!spec.cluster().empty()) {
    absl::StatusOr<DilationRecord> d = ResolveDilation(spec, node_cpus, o.out_dir, o.progress);
    if (!d.ok()) return absl::Status(d.status().code(), absl::StrCat(o.spec_path, ": ", d.status().message()));
    dilation = *d;
    spec.set_network(dilation.network());
  }
  RINGSIDE_RETURN_IF_ERROR(Prepare(o, spec));
  if (!spec.cluster().empty()) RINGSIDE_RETURN_IF_ERROR(WriteDilation(dilation, o.out_dir));
  if (const std::string emulation = DescribeEmulation(spec, node_cpus, spec.cluster().empty() ? nullptr : &dilation);
      !emulation.empty() && o.progress != nullptr) {
    absl::FPrintF(o.progress, "compare: %s\n", emulation);
  }
  const absl::Duration limit = absl::Seconds(spec.cell_timeout_s() > 0 ? spec.cell_timeout_s() : 1800);
  ScopedSignalCatcher signals;  // Ctrl-C stops after the running cell, which re-runs later.
  CompareProgress progress(o.progress);
  // Results by cell (table order), filled in run order (RunOrder: round by round).
  std::vector<std::optional<CellResult>> by_cell(cells.size());
  int kept = 0, failed = 0, ran = 0;
  double spent = 0;
  absl::Status status;
  const std::vector<size_t> order = RunOrder(cells);
  // A cluster's links follow the host round by round: each round after the first
  // measures its own dilation before its first cell runs (MeasureDilationRecord).
  DilationRecord round_dilation = dilation;
  int dilation_round = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    const Cell& cell = cells[i];
    const std::string dir = absl::StrCat(o.out_dir, "/cells/", cell.id);
    // Resume: a cell with a result is finished (ok or failed) and kept.
    if (CellResult r; ReadKeptResult(dir, &r)) {
      by_cell[i] = std::move(r);
      ++kept;
      continue;
    }
    if (!spec.cluster().empty() && cell.repeat != dilation_round) {
      if (o.progress != nullptr) absl::FPrintF(o.progress, "compare: round %d: measuring the host again\n", cell.repeat + 1);
      absl::StatusOr<DilationRecord> d = MeasureDilationRecord(spec, node_cpus, o.progress);
      if (!d.ok()) {
        status = absl::Status(d.status().code(), absl::StrCat("round ", cell.repeat + 1, ": ", d.status().message()));
        break;
      }
      round_dilation = *d;
      spec.set_network(round_dilation.network());
      dilation_round = cell.repeat;
    }
    std::error_code error;
    fs::remove_all(dir, error);  // A cell interrupted earlier starts over.
    fs::create_directories(dir, error);
    progress.Running(k, cells.size(), ran > 0 ? Clock(spent / ran * (cells.size() - k)) : "?", cell.id);
    std::vector<std::string> argv = {o.self_exe};
    for (std::string& a : CellTrainArgs(spec, cell, dir)) argv.push_back(std::move(a));
    WriteFileAtomically(dir + "/command.txt", absl::StrJoin(argv, " ") + "\n").IgnoreError();
    const absl::Time t0 = absl::Now();
    const ChildOutcome outcome = RunChild(argv, dir + "/log.txt", limit, &signals);
    const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
    if (outcome.interrupted) {
      status = absl::CancelledError(absl::StrCat(
          "interrupted during cell ", cell.id, "; run the same command again to resume (",
          kept + ran, " cells are kept)"));
      break;
    }
    spent += wall;
    ++ran;
    CellResult r = SummarizeCell(cell, dir, outcome.ok, outcome.how, wall);
    // The emulation the cell ran under, for the report's statement.
    r.set_node_cpus(cell.node_cpus);
    r.set_ranks_per_node(cell.ranks_per_node);
    r.set_nodes(cell.nodes);
    // single and dp are one process: the network and slow node do not apply.
    const bool one_process = cell.strategy.kind() == "single" || cell.strategy.kind() == "dp";
    if (!one_process) r.set_network(spec.network());
    if (!one_process && cell.workers > 1) r.set_slow_node(spec.slow_node());
    if (!spec.cluster().empty()) {
      r.set_cluster(round_dilation.cluster());
      r.set_dilation(round_dilation.factor());
    }
    if (r.status() != "ok") {
      ++failed;
      progress.Failed(cell.id, r.reason());
    }
    std::string text;
    google::protobuf::TextFormat::PrintToString(r, &text);
    status = WriteFileAtomically(dir + "/" + kCellResultFile, text);
    if (!status.ok()) break;
    by_cell[i] = std::move(r);
  }
  std::vector<CellResult> results;
  for (std::optional<CellResult>& r : by_cell) {
    if (r.has_value()) results.push_back(std::move(*r));
  }
  progress.Done(results.size(), cells.size(), kept, failed);
  RINGSIDE_RETURN_IF_ERROR(WriteSummaryCsv(results, o.out_dir + "/summary.csv"));
  if (status.ok() && o.summary != nullptr) {
    absl::FPrintF(o.summary, "%s\nsummary: %s/summary.csv\nnext: ringside report %s\n", SummaryTable(results),
                  o.out_dir, ShellWord(o.out_dir));
    fflush(o.summary);
  }
  return status;
}

}  // namespace ringside
