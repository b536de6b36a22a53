#include "experiments/compare_command.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/metrics.h"
#include "common/ringside.pb.h"
#include "common/status_macros.h"
#include "ddp_ring/allreduce_algorithm.h"
#include "experiments/file_util.h"
#include "experiments/network_emulator.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

extern char** environ;

namespace ringside {
namespace {

namespace fs = std::filesystem;

// SIGINT / SIGTERM seen while a matrix runs (handlers can only set a flag).
std::atomic<int> g_compare_signal{0};
void OnCompareSignal(int sig) { g_compare_signal.store(sig); }

constexpr char kResultFile[] = "result.textproto";

// Step records of one metrics file (empty if missing or unreadable).
std::vector<StepMetrics> ReadMetrics(const std::string& path) {
  std::vector<StepMetrics> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    StepMetrics m;
    if (FromJsonLine(line, &m).ok()) out.push_back(m);
  }
  return out;
}

// Records after the first 10% (warm-up).
std::vector<StepMetrics> Steady(std::vector<StepMetrics> v) {
  const size_t skip = v.size() / 10;
  v.erase(v.begin(), v.begin() + std::min(skip, v.size()));
  return v;
}

template <typename F>
double MedianOf(const std::vector<StepMetrics>& v, F f) {
  std::vector<double> x;
  for (const StepMetrics& m : v) x.push_back(f(m));
  return Median(x);
}

std::string FormatBatchFlag(const Cell& c) { return absl::StrCat("--batch=", c.batch_per_worker); }

}  // namespace

absl::Status ValidateSpec(const ExperimentSpec& spec) {
  if (spec.strategies().empty()) return absl::InvalidArgumentError("the spec lists no strategies");
  for (const StrategySpec& s : spec.strategies()) {
    if (s.kind() != "single" && s.kind() != "ps" && s.kind() != "ddp") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown strategy '", s.kind(), "' (expected single, ps or ddp)"));
    }
    if (s.ps_shards() < 0) return absl::InvalidArgumentError("ps_shards must be >= 1");
    if (!s.allreduce().empty()) {
      RINGSIDE_RETURN_IF_ERROR(ParseAllReduceAlgorithm(s.allreduce()).status());
    }
  }
  bool any_parallel = false;
  for (const StrategySpec& s : spec.strategies()) any_parallel |= s.kind() != "single";
  if (any_parallel && spec.workers().empty()) {
    return absl::InvalidArgumentError("the spec lists no worker counts (workers: 1 workers: 2 ...)");
  }
  for (int n : spec.workers()) {
    if (n < 1) return absl::InvalidArgumentError(absl::StrCat("worker count must be >= 1, got ", n));
  }
  if (spec.model().empty()) return absl::InvalidArgumentError("the spec names no model");
  if ((spec.batch_per_worker() > 0) == (spec.global_batch() > 0)) {
    return absl::InvalidArgumentError(
        "the spec needs exactly one of batch_per_worker (weak scaling) and global_batch (strong scaling)");
  }
  if (spec.batch_per_worker() < 0 || spec.global_batch() < 0) {
    return absl::InvalidArgumentError("batch sizes must be positive");
  }
  for (int n : spec.workers()) {
    if (spec.global_batch() > 0 && spec.global_batch() % n != 0) {
      return absl::InvalidArgumentError(absl::StrCat("global_batch ", spec.global_batch(),
                                                     " does not divide by ", n, " workers"));
    }
  }
  if (spec.steps() <= 0 && spec.epochs() <= 0) {
    return absl::InvalidArgumentError("the spec needs steps or epochs");
  }
  if (spec.steps() < 0 || spec.epochs() < 0 || spec.repeats() < 0) {
    return absl::InvalidArgumentError("steps, epochs and repeats must not be negative");
  }
  return absl::OkStatus();
}

absl::StatusOr<ExperimentSpec> LoadSpec(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
  ExperimentSpec spec;
  // Collect the parser's first complaint as one line.
  class Collector : public google::protobuf::io::ErrorCollector {
   public:
    void AddError(int line, int column, const std::string& message) override {
      if (first.empty()) first = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
    }
    std::string first;
  } errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(*text, &spec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid experiment spec: ", errors.first));
  }
  if (absl::Status s = ValidateSpec(spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return spec;
}

std::string StrategyLabel(const StrategySpec& s) {
  if (!s.label().empty()) return s.label();
  if (s.kind() == "ps") {
    std::string sync = s.ps_sync().empty() ? "bsp" : s.ps_sync();
    for (char& c : sync) {
      if (c == ':') c = '_';
    }
    return absl::StrCat("ps-s", std::max(1, s.ps_shards()), "-", sync, s.ps_colocated() ? "-coloc" : "");
  }
  if (s.kind() == "ddp") {
    std::string label = "ddp";
    if (s.allreduce() == "halving-doubling") absl::StrAppend(&label, "-hd");
    if (s.allreduce() == "recursive-doubling") absl::StrAppend(&label, "-rd");
    if (s.allreduce() == "ring") absl::StrAppend(&label, "-ring");
    if (s.no_overlap()) absl::StrAppend(&label, "-nooverlap");
    return label;
  }
  return s.kind();
}

std::vector<Cell> ExpandCells(const ExperimentSpec& spec) {
  std::vector<int> workers(spec.workers().begin(), spec.workers().end());
  std::sort(workers.begin(), workers.end());
  workers.erase(std::unique(workers.begin(), workers.end()), workers.end());
  const int repeats = std::max(1, spec.repeats());
  std::vector<Cell> cells;
  for (const StrategySpec& s : spec.strategies()) {
    const std::vector<int> counts = s.kind() == "single" ? std::vector<int>{1} : workers;
    for (int n : counts) {
      for (int r = 0; r < repeats; ++r) {
        Cell c;
        c.strategy = s;
        c.label = StrategyLabel(s);
        c.workers = n;
        c.repeat = r;
        c.global_batch = spec.global_batch() > 0 ? spec.global_batch() : spec.batch_per_worker() * n;
        c.batch_per_worker = spec.global_batch() > 0 ? spec.global_batch() / n : spec.batch_per_worker();
        // A directory name: anything but [A-Za-z0-9._-] in the label becomes '_'.
        std::string safe = c.label;
        for (char& ch : safe) {
          if (!absl::ascii_isalnum(ch) && ch != '.' && ch != '_' && ch != '-') ch = '_';
        }
        c.id = absl::StrCat(safe, "-n", n, "-r", r);
        cells.push_back(c);
      }
    }
  }
  return cells;
}

std::vector<std::string> CellTrainArgs(const ExperimentSpec& spec, const Cell& cell,
                                       const std::string& out_dir) {
  const StrategySpec& s = cell.strategy;
  std::vector<std::string> a = {"train", absl::StrCat("--strategy=", s.kind()),
                                absl::StrCat("--model=", spec.model()),
                                absl::StrCat("--dataset=", spec.dataset().empty() ? "fashion-mnist" : spec.dataset()),
                                FormatBatchFlag(cell),
                                absl::StrCat("--epochs=", std::max(1, spec.epochs())),
                                absl::StrCat("--steps=", spec.steps()),
                                absl::StrCat("--lr=", spec.lr() > 0 ? spec.lr() : 0.02f),
                                absl::StrCat("--momentum=", spec.momentum()),
                                absl::StrCat("--threads=", spec.threads() > 0 ? spec.threads() : 1),
                                absl::StrCat("--seed=", spec.seed() > 0 ? spec.seed() : 1),
                                absl::StrCat("--timeout_s=", spec.timeout_s() > 0 ? spec.timeout_s() : 60),
                                absl::StrCat("--out=", out_dir)};
  if (s.kind() != "single" && !spec.network().empty()) {
    a.push_back(absl::StrCat("--network=", spec.network()));
  }
  if (s.kind() == "ps") {
    a.push_back(absl::StrCat("--workers=", cell.workers));
    a.push_back(absl::StrCat("--ps_shards=", std::max(1, s.ps_shards())));
    a.push_back(absl::StrCat("--ps_sync=", s.ps_sync().empty() ? "bsp" : s.ps_sync()));
    if (s.ps_colocated()) a.push_back("--ps_colocated");
  } else if (s.kind() == "ddp") {
    a.push_back(absl::StrCat("--workers=", cell.workers));
    a.push_back(absl::StrCat("--backend=", s.backend().empty() ? "gloo" : s.backend()));
    if (s.bucket_cap_mb() > 0) a.push_back(absl::StrCat("--bucket_cap_mb=", s.bucket_cap_mb()));
    if (s.no_overlap()) a.push_back("--overlap=false");
    if (!s.allreduce().empty()) a.push_back(absl::StrCat("--allreduce=", s.allreduce()));
  }
  return a;
}

CellResult SummarizeCell(const Cell& cell, const std::string& dir, bool exit_ok,
                         const std::string& exit_reason, double wall_s) {
  CellResult r;
  r.set_cell(cell.id);
  r.set_label(cell.label);
  r.set_kind(cell.strategy.kind());
  r.set_workers(cell.workers);
  r.set_repeat(cell.repeat);
  r.set_wall_s(wall_s);
  r.set_global_batch(cell.global_batch);
  const std::string log = ReadFile(dir + "/log.txt").value_or("");
  if (!exit_ok) {
    // The reason: the first error line the job printed (the root cause; the launcher's
    // summary of which process failed comes last), else how it ended.
    std::string reason = exit_reason;
    for (absl::string_view line : absl::StrSplit(log, '\n')) {
      if (absl::StrContains(line, "error:")) {
        reason = std::string(line);
        break;
      }
    }
    r.set_status("failed");
    r.set_reason(reason);
    return r;
  }
  // Worker 0 / rank 0's records (one process: metrics.jsonl).
  std::vector<StepMetrics> m = ReadMetrics(dir + "/metrics.jsonl.rank0");
  if (m.empty()) m = ReadMetrics(dir + "/metrics.jsonl");
  if (m.empty()) {
    r.set_status("failed");
    r.set_reason("the job wrote no step records");
    return r;
  }
  r.set_status("ok");
  r.set_steps(static_cast<int64_t>(m.size()));
  const std::vector<StepMetrics> steady = Steady(m);
  r.set_median_step_ms(MedianOf(steady, [](const StepMetrics& s) { return s.step_ms(); }));
  r.set_compute_ms(MedianOf(steady, [](const StepMetrics& s) {
    return s.data_ms() + s.forward_ms() + s.backward_ms();
  }));
  r.set_comm_ms(MedianOf(steady, [](const StepMetrics& s) { return s.comm_ms(); }));
  r.set_wait_ms(MedianOf(steady, [](const StepMetrics& s) { return s.wait_ms(); }));
  r.set_update_ms(MedianOf(steady, [](const StepMetrics& s) { return s.update_ms(); }));
  if (r.median_step_ms() > 0) r.set_samples_per_sec(cell.global_batch * 1e3 / r.median_step_ms());
  if (cell.strategy.kind() == "ps") {
    // The busiest shard.
    for (int s = 0;; ++s) {
      const std::string path = absl::StrCat(dir, "/metrics.jsonl.shard", s);
      if (!fs::exists(path)) break;
      const std::vector<StepMetrics> shard = Steady(ReadMetrics(path));
      const double in = MedianOf(shard, [](const StepMetrics& x) { return 1.0 * x.bytes_received(); });
      const double out = MedianOf(shard, [](const StepMetrics& x) { return 1.0 * x.bytes_sent(); });
      if (in + out > r.busiest_bytes_in() + r.busiest_bytes_out()) {
        r.set_busiest_bytes_in(in);
        r.set_busiest_bytes_out(out);
      }
    }
  } else if (cell.strategy.kind() == "ddp") {
    r.set_busiest_bytes_in(MedianOf(steady, [](const StepMetrics& x) { return 1.0 * x.bytes_received(); }));
    r.set_busiest_bytes_out(MedianOf(steady, [](const StepMetrics& x) { return 1.0 * x.bytes_sent(); }));
  }
  // "... N parameters" is printed by every strategy's start-up line.
  if (const size_t p = log.find(" parameters"); p != std::string::npos) {
    size_t b = p;
    while (b > 0 && absl::ascii_isdigit(log[b - 1])) --b;
    int64_t n = 0;
    if (absl::SimpleAtoi(log.substr(b, p - b), &n)) r.set_num_params(n);
  }
  const size_t at = log.rfind("test accuracy: ");
  double acc = 0;
  if (at != std::string::npos &&
      absl::SimpleAtod(absl::StripAsciiWhitespace(
                           absl::string_view(log).substr(at + 15, log.find('\n', at) - at - 15)),
                       &acc)) {
    r.set_test_accuracy(acc);
  }
  return r;
}

absl::Status WriteSummaryCsv(const std::vector<CellResult>& results, const std::string& path) {
  // Reference throughput: the single-process cell, else each strategy's 1-worker cell.
  std::map<std::string, std::vector<double>> one_worker;
  std::vector<double> single;
  for (const CellResult& r : results) {
    if (r.status() != "ok") continue;
    if (r.kind() == "single") single.push_back(r.samples_per_sec());
    if (r.workers() == 1) one_worker[r.label()].push_back(r.samples_per_sec());
  }
  std::string csv =
      "cell,label,kind,workers,repeat,status,steps,median_step_ms,samples_per_sec,speedup,"
      "efficiency,compute_ms,comm_ms,wait_ms,update_ms,busiest_bytes_in,busiest_bytes_out,"
      "test_accuracy,wall_s,reason\n";
  for (const CellResult& r : results) {
    const double base = !single.empty() ? Median(single) : Median(one_worker[r.label()]);
    const double speedup = base > 0 && r.status() == "ok" ? r.samples_per_sec() / base : 0;
    std::string reason = r.reason();
    std::replace(reason.begin(), reason.end(), '"', '\'');
    absl::StrAppendFormat(&csv, "%s,%s,%s,%d,%d,%s,%d,%.3f,%.1f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.0f,%.0f,%.4f,%.1f,\"%s\"\n",
                          r.cell(), r.label(), r.kind(), r.workers(), r.repeat(), r.status(),
                          r.steps(), r.median_step_ms(), r.samples_per_sec(), speedup,
                          speedup / std::max(1, r.workers()), r.compute_ms(), r.comm_ms(),
                          r.wait_ms(), r.update_ms(), r.busiest_bytes_in(), r.busiest_bytes_out(),
                          r.test_accuracy(), r.wall_s(), reason);
  }
  return WriteFileAtomically(path, csv);
}

namespace {

// Runs `argv` with stdout and stderr into `log_path`; blocks until it exits, the cell
// timeout passes (killed), or the matrix is interrupted (SIGINT forwarded).
struct ChildOutcome {
  bool ok = false;
  bool interrupted = false;
  std::string how;  // "exited with status 1", "timed out after 1800 s", ...
};

ChildOutcome RunChild(const std::vector<std::string>& argv_in, const std::string& log_path,
                      absl::Duration limit) {
  ChildOutcome out;
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    out.how = absl::StrCat("cannot start ", argv[0], ": ", strerror(rc));
    return out;
  }
  const absl::Time deadline = absl::Now() + limit;
  bool signalled = false;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (g_compare_signal.load() != 0 && !signalled) {
      kill(pid, SIGINT);  // The launcher inside forwards it to the ranks.
      signalled = true;
      out.interrupted = true;
    }
    if (absl::Now() > deadline && !signalled) {
      kill(pid, SIGTERM);
      signalled = true;
      out.how = absl::StrCat("timed out after ", absl::FormatDuration(limit));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  // A signal to the whole process group (Ctrl-C, `timeout`) may end the cell before
  // this loop forwarded anything: the matrix was interrupted all the same.
  if (g_compare_signal.load() != 0) out.interrupted = true;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !signalled) {
    out.ok = true;
  } else if (out.how.empty()) {
    out.how = WIFEXITED(status) ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                                : absl::StrCat("killed by signal ", WTERMSIG(status));
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

}  // namespace

absl::Status RunCompare(const CompareOptions& o) {
  absl::StatusOr<ExperimentSpec> spec = LoadSpec(o.spec_path);
  if (!spec.ok()) return spec.status();
  // Emulated links: the profile must parse and this process must be allowed to create
  // namespaces, before any cell starts.
  if (!spec->network().empty()) {
    absl::StatusOr<NetworkProfile> profile = ParseNetworkProfile(spec->network());
    if (!profile.ok()) return absl::InvalidArgumentError(absl::StrCat(o.spec_path, ": ", profile.status().message()));
    if (profile->enabled) RINGSIDE_RETURN_IF_ERROR(CheckNetworkPrivileges());
  }
  // The output directory must be writable before anything starts.
  std::error_code error;
  fs::create_directories(fs::path(o.out_dir) / "cells", error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", o.out_dir, ": ", error.message()));
  }
  if (absl::Status s = WriteFileAtomically(o.out_dir + "/spec.textproto", ReadFile(o.spec_path).value_or(""));
      !s.ok()) {
    return absl::PermissionDeniedError(absl::StrCat("output directory ", o.out_dir, " is not writable: ", s.message()));
  }
  const std::vector<Cell> cells = ExpandCells(*spec);

  struct sigaction action {}, old_int {}, old_term {};
  action.sa_handler = OnCompareSignal;
  sigemptyset(&action.sa_mask);
  g_compare_signal.store(0);
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);

  std::vector<CellResult> results;
  int kept = 0, failed = 0;
  double spent = 0;
  int ran = 0;
  absl::Status status;
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& cell = cells[i];
    const std::string dir = absl::StrCat(o.out_dir, "/cells/", cell.id);
    // Resume: a cell with a result is finished (ok or failed) and kept.
    if (absl::StatusOr<std::string> text = ReadFile(dir + "/" + kResultFile); text.ok()) {
      CellResult r;
      if (google::protobuf::TextFormat::ParseFromString(*text, &r)) {
        results.push_back(r);
        ++kept;
        continue;
      }
    }
    fs::remove_all(dir, error);  // A cell interrupted earlier starts over.
    fs::create_directories(dir, error);
    const int remaining = static_cast<int>(cells.size() - i);
    if (o.progress != nullptr) {
      const std::string eta = ran > 0 ? Clock(spent / ran * remaining) : "?";
      absl::FPrintF(o.progress, "\r%s %d/%d cells  ETA %s  running %-28s", Bar(static_cast<int>(i), cells.size()),
                    i, cells.size(), eta, cell.id);
      fflush(o.progress);
    }
    std::vector<std::string> argv = {o.self_exe};
    for (std::string& a : CellTrainArgs(*spec, cell, dir)) argv.push_back(std::move(a));
    WriteFileAtomically(dir + "/command.txt", absl::StrJoin(argv, " ") + "\n").IgnoreError();
    const absl::Time t0 = absl::Now();
    const ChildOutcome outcome = RunChild(
        argv, dir + "/log.txt",
        absl::Seconds(spec->cell_timeout_s() > 0 ? spec->cell_timeout_s() : 1800));
    const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
    if (outcome.interrupted) {
      status = absl::CancelledError(absl::StrCat(
          "interrupted during cell ", cell.id, "; run the same command again to resume (",
          results.size(), " cells are kept)"));
      break;
    }
    spent += wall;
    ++ran;
    CellResult r = SummarizeCell(cell, dir, outcome.ok, outcome.how, wall);
    if (r.status() != "ok") {
      ++failed;
      if (o.progress != nullptr) {
        absl::FPrintF(o.progress, "\ncell %s failed: %s\n", cell.id, r.reason());
      }
    }
    std::string text;
    google::protobuf::TextFormat::PrintToString(r, &text);
    if (absl::Status s = WriteFileAtomically(dir + "/" + kResultFile, text); !s.ok()) {
      status = s;
      break;
    }
    results.push_back(r);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (o.progress != nullptr) {
    absl::FPrintF(o.progress, "\r%s %d/%d cells (%d kept from an earlier run, %d failed)%30s\n",
                  Bar(static_cast<int>(results.size()), cells.size()), results.size(),
                  cells.size(), kept, failed, "");
  }
  RINGSIDE_RETURN_IF_ERROR(WriteSummaryCsv(results, o.out_dir + "/summary.csv"));
  return status;
}

}  // namespace ringside
