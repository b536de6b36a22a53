#include "experiments/matrix/compare.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
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

// What the matrix runs, resolved and checked before any cell starts (PlanCompare).
struct ComparePlan {
  ExperimentSpec spec;     // A cluster's: its network the dilated links.
  std::vector<Cell> cells;  // Table order.
  double node_cpus = 0;     // The resolved share (0: none).
  DilationRecord dilation;  // A cluster's (the first cell's); empty without one.
  bool dilation_fresh = false;  // `dilation` was measured now, not kept from DIR.
};

// Loads `o.spec_path`, expands and resolves its cells, derives a cluster's links, checks
// what must hold (Prepare), and creates the output directory with the spec and dilation
// in it; says the emulation on `o.progress`. Blocks while it measures the host (a
// cluster). Errors name the spec where it is at fault.
absl::StatusOr<ComparePlan> PlanCompare(const CompareOptions& o) {
  ComparePlan plan;
  RINGSIDE_ASSIGN_OR_RETURN(plan.spec, LoadSpec(o.spec_path));
  ExperimentSpec& spec = plan.spec;
  // GPU cells where none can run: refused before anything is created or started.
  if (SpecUsesGpu(spec)) {
    if (absl::Status s = CheckGpuCellsCanRun(spec, BuiltWithCuda(), DetectDevices()); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(o.spec_path, ": ", s.message()));
    }
  }
  plan.cells = ExpandCells(spec);
  // A cluster's devices per node become the cells' ranks per node (cluster_emulation.h).
  if (absl::Status s = ResolveClusterCells(spec, MachineCpus(), &plan.cells); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(o.spec_path, ": ", s.message()));
  }
  for (const Cell& c : plan.cells) plan.node_cpus = std::max(plan.node_cpus, c.node_cpus);
  // A cluster: its profile checked, then the links derived by time dilation from this
  // host's step (or the dilation this directory started with), before anything is made.
  if (!spec.cluster().empty()) {
    absl::StatusOr<DilationRecord> d =
        ResolveDilation(spec, plan.node_cpus, o.out_dir, o.progress, &plan.dilation_fresh);
    if (!d.ok()) return absl::Status(d.status().code(), absl::StrCat(o.spec_path, ": ", d.status().message()));
    plan.dilation = *d;
    spec.set_network(plan.dilation.network());
  }
  RINGSIDE_RETURN_IF_ERROR(Prepare(o, spec));
  if (!spec.cluster().empty()) RINGSIDE_RETURN_IF_ERROR(WriteDilation(plan.dilation, o.out_dir));
  if (const std::string emulation =
          DescribeEmulation(spec, plan.node_cpus, spec.cluster().empty() ? nullptr : &plan.dilation);
      !emulation.empty() && o.progress != nullptr) {
    absl::FPrintF(o.progress, "compare: %s\n", emulation);
  }
  return plan;
}

// The cells' counts and time so far (RunCompare).
struct CompareTally {
  int kept = 0;    // Results an earlier run left.
  int failed = 0;  // Cells run now that failed.
  int ran = 0;     // Cells run now.
  double spent = 0;  // Their wall time, seconds.
};

// The result of `cell`, run in `dir` (`wall` seconds, ended as `outcome`), with the
// emulation it ran under: `spec`'s links and slow node where it is more than one process,
// and `cell_dilation`'s cluster and factor where `spec` names a cluster.
CellResult SummarizeRun(const ExperimentSpec& spec, const Cell& cell, const std::string& dir,
                        const ChildOutcome& outcome, double wall, const DilationRecord& cell_dilation) {
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
    r.set_cluster(cell_dilation.cluster());
    r.set_dilation(cell_dilation.factor());
  }
  return r;
}

// What running one cell needs besides the cell (RunCellJob). Borrowed from RunCompare.
struct CellRunContext {
  const CompareOptions& o;
  const ExperimentSpec& spec;
  absl::Duration limit;           // The cell timeout.
  ScopedSignalCatcher* signals;   // Ctrl-C: the cell is interrupted.
  CompareProgress* progress;
  CompareTally* tally;
};

// Runs `cell`, the `k`-th of `total` in run order, in `dir` (emptied first) and writes
// its result there (kCellResultFile), with its `attempt` and pace (CellPaceOff) where it
// ran on a cluster; blocks until the job ends. Counts it in the tally (not when
// interrupted) and reports it on the progress. Cancelled when the matrix is interrupted
// (nothing written); else the result, or the error writing it.
absl::StatusOr<CellResult> RunCellJob(const CellRunContext& ctx, const Cell& cell, size_t k, size_t total,
                                      const std::string& dir, const DilationRecord& cell_dilation, int attempt) {
  CompareTally& tally = *ctx.tally;
  std::error_code error;
  fs::remove_all(dir, error);  // A cell interrupted earlier starts over.
  fs::create_directories(dir, error);
  ctx.progress->Running(k, total, tally.ran > 0 ? Clock(tally.spent / tally.ran * (total - k)) : "?", cell.id);
  std::vector<std::string> argv = {ctx.o.self_exe};
  for (std::string& a : CellTrainArgs(ctx.spec, cell, dir)) argv.push_back(std::move(a));
  WriteFileAtomically(dir + "/command.txt", absl::StrJoin(argv, " ") + "\n").IgnoreError();
  const absl::Time t0 = absl::Now();
  const ChildOutcome outcome = RunChild(argv, dir + "/log.txt", ctx.limit, ctx.signals);
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  if (outcome.interrupted) {
    return absl::CancelledError(absl::StrCat(
        "interrupted during cell ", cell.id, "; run the same command again to resume (",
        tally.kept + tally.ran, " cells are kept)"));
  }
  tally.spent += wall;
  ++tally.ran;
  CellResult r = SummarizeRun(ctx.spec, cell, dir, outcome, wall, cell_dilation);
  r.set_started_unix_ms(absl::ToUnixMillis(t0));
  if (!ctx.spec.cluster().empty()) {
    r.set_pace_attempts(attempt);
    if (const std::optional<double> off = CellPaceOff(r, cell_dilation); off.has_value()) r.set_pace_off(*off);
  }
  if (r.status() != "ok") {
    ++tally.failed;
    ctx.progress->Failed(cell.id, r.reason());
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(r, &text);
  RINGSIDE_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + kCellResultFile, text));
  return r;
}

// Ends the matrix: the results that exist (table order) counted on the progress and
// written to summary.csv; where `status` is ok, the table and what to run next on
// `o.summary`. Returns `status`, or the error writing summary.csv.
absl::Status FinishCompare(const CompareOptions& o, std::vector<std::optional<CellResult>>* by_cell,
                           size_t total, const CompareTally& tally, CompareProgress* progress,
                           const absl::Status& status) {
  std::vector<CellResult> results;
  for (std::optional<CellResult>& r : *by_cell) {
    if (r.has_value()) results.push_back(std::move(*r));
  }
  progress->Done(results.size(), total, tally.kept, tally.failed);
  RINGSIDE_RETURN_IF_ERROR(WriteSummaryCsv(results, o.out_dir + "/summary.csv"));
  if (status.ok() && o.summary != nullptr) {
    absl::FPrintF(o.summary, "%s\nsummary: %s/summary.csv\nnext: ringside report %s\n", SummaryTable(results),
                  o.out_dir, ShellWord(o.out_dir));
    fflush(o.summary);
  }
  return status;
}

}  // namespace

absl::Status RunCompare(const CompareOptions& o) {
  RINGSIDE_ASSIGN_OR_RETURN(ComparePlan plan, PlanCompare(o));
  ExperimentSpec& spec = plan.spec;
  const std::vector<Cell>& cells = plan.cells;
  const absl::Duration limit = absl::Seconds(spec.cell_timeout_s() > 0 ? spec.cell_timeout_s() : 1800);
  ScopedSignalCatcher signals;  // Ctrl-C stops after the running cell, which re-runs later.
  CompareProgress progress(o.progress);
  // Results by cell (table order), filled in run order (RunOrder: round by round).
  std::vector<std::optional<CellResult>> by_cell(cells.size());
  CompareTally tally;
  absl::Status status;
  const std::vector<size_t> order = RunOrder(cells);
  // A cluster's links follow the host cell by cell: every cell runs on a dilation
  // measured just before it (MeasureDilationRecord), the first one run on the plan's
  // when the plan measured it now, and its speedup is taken in the cluster's time
  // (report/points.cc, HostPaceDilations), so a drift of the host between cells cancels.
  DilationRecord cell_dilation = plan.dilation;
  bool dilation_fresh = plan.dilation_fresh;
  const CellRunContext ctx{o, spec, limit, &signals, &progress, &tally};
  // A fresh probe for `cell`: its dilation and the links shaped for it, or the probe's
  // error naming the cell.
  const auto reprobe = [&](const Cell& cell) -> absl::Status {
    absl::StatusOr<DilationRecord> d = MeasureDilationRecord(spec, plan.node_cpus, o.progress);
    if (!d.ok()) return absl::Status(d.status().code(), absl::StrCat("cell ", cell.id, ": ", d.status().message()));
    cell_dilation = *d;
    spec.set_network(cell_dilation.network());
    return absl::OkStatus();
  };
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    const Cell& cell = cells[i];
    const std::string dir = absl::StrCat(o.out_dir, "/cells/", cell.id);
    // Resume: a cell with a result is finished (ok or failed) and kept.
    if (CellResult r; ReadKeptResult(dir, &r)) {
      by_cell[i] = std::move(r);
      ++tally.kept;
      continue;
    }
    if (!spec.cluster().empty() && !dilation_fresh) {
      if (o.progress != nullptr) absl::FPrintF(o.progress, "compare: measuring the host again for cell %s\n", cell.id);
      status = reprobe(cell);
      if (!status.ok()) break;
    }
    dilation_fresh = false;
    absl::StatusOr<CellResult> r = RunCellJob(ctx, cell, k, cells.size(), dir, cell_dilation, 1);
    // A DDP cell whose forward strayed from its probe's ran on links shaped for another
    // pace than its own: run again on a fresh probe, kMaxPaceAttempts in all, the last
    // run kept (it says how many it took and how far it strayed).
    for (int attempt = 2; r.ok() && r->status() == "ok" && r->has_pace_off() &&
                          std::fabs(r->pace_off()) > kPaceDriftFraction && attempt <= kMaxPaceAttempts;
         ++attempt) {
      if (o.progress != nullptr) {
        absl::FPrintF(o.progress,
                      "compare: cell %s computed its forward pass %+.0f%% off its probe's (%.1f against %.1f ms): "
                      "its links ran %s for the cluster; running it again on a fresh probe (attempt %d of %d)\n",
                      cell.id, 100 * r->pace_off(), r->forward_ms(), cell_dilation.host_forward_ms(),
                      r->pace_off() > 0 ? "fast" : "slow", attempt, kMaxPaceAttempts);
      }
      if (absl::Status probed = reprobe(cell); !probed.ok()) {
        r = probed;
        break;
      }
      r = RunCellJob(ctx, cell, k, cells.size(), dir, cell_dilation, attempt);
    }
    if (!r.ok()) {
      status = r.status();
      break;
    }
    by_cell[i] = *std::move(r);
  }
  return FinishCompare(o, &by_cell, cells.size(), tally, &progress, status);
}

}  // namespace ringside
