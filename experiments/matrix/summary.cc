#include "experiments/matrix/summary.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/metrics.h"
#include "common/output_files.h"
#include "common/ps_placement.h"
#include "common/run_config.h"
#include "common/wire_format.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

namespace fs = std::filesystem;

// Step records of one metrics file (empty if missing or unreadable: a failed cell's
// result says why from its log).
std::vector<StepMetrics> ReadMetrics(const std::string& path) {
  absl::StatusOr<std::vector<StepMetrics>> records = ReadMetricsFile(path);
  return records.ok() ? *std::move(records) : std::vector<StepMetrics>{};
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

// Raises r's busiest-node bytes to one process's medians if that process moved more.
void KeepBusiest(const std::vector<StepMetrics>& steady, CellResult* r) {
  const double in = MedianOf(steady, [](const StepMetrics& x) { return 1.0 * x.bytes_received(); });
  const double out = MedianOf(steady, [](const StepMetrics& x) { return 1.0 * x.bytes_sent(); });
  if (in + out > r->busiest_bytes_in() + r->busiest_bytes_out()) {
    r->set_busiest_bytes_in(in);
    r->set_busiest_bytes_out(out);
  }
}

// Why a job failed: the first error line it printed (the root cause; the launcher's
// summary of which process failed comes last), else how it ended.
std::string FailureReason(const std::string& log, const std::string& exit_reason) {
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "error:")) return std::string(line);
  }
  return exit_reason;
}

// What the job's log says besides its records: the parameter count (every strategy's
// start-up line ends "... N parameters") and the final test accuracy.
void ReadLogFacts(const std::string& log, CellResult* r) {
  if (const size_t p = log.find(" parameters"); p != std::string::npos) {
    size_t b = p;
    while (b > 0 && absl::ascii_isdigit(log[b - 1])) --b;
    int64_t n = 0;
    if (absl::SimpleAtoi(log.substr(b, p - b), &n)) r->set_num_params(n);
  }
  const size_t at = log.rfind("test accuracy: ");
  double acc = 0;
  if (at != std::string::npos &&
      absl::SimpleAtod(absl::StripAsciiWhitespace(
                           absl::string_view(log).substr(at + 15, log.find('\n', at) - at - 15)),
                       &acc)) {
    r->set_test_accuracy(acc);
  }
}

// Where the cell's processes computed and whether any shared its GPU: device from
// `first` (worker 0 / rank 0, or the single process), else the cell's requested one;
// emulated and the distinct GPUs from every worker / rank's records.
void ReadDevices(const Cell& cell, const std::vector<StepMetrics>& first,
                 const std::vector<std::vector<StepMetrics>>& others, CellResult* r) {
  std::set<std::string> gpus;
  bool emulated = false;
  const auto scan = [&](const std::vector<StepMetrics>& v) {
    for (const StepMetrics& m : v) {
      emulated |= m.emulated();
      if (absl::StartsWith(m.device(), "cuda")) gpus.insert(m.device());
    }
  };
  scan(first);
  for (const std::vector<StepMetrics>& v : others) scan(v);
  r->set_device(!first.empty() && !first[0].device().empty() ? first[0].device() : cell.device);
  r->set_emulated(emulated);
  r->set_gpus(static_cast<int>(gpus.size()));
}

// One compared step: who was last (-1: not known), each participant's wait (ms) and
// the step's length (mean over the participants).
struct StepView {
  int last = -1;
  std::map<int, double> wait;
  double step_ms = 0;
};

// The steps every one of the `n` processes recorded: wait[p] = wait(record) of process p,
// step_ms the mean of theirs; `last` unset. Keyed by step index.
template <typename F>
std::map<int64_t, StepView> CompleteSteps(const std::vector<std::vector<StepMetrics>>& records,
                                          F wait) {
  const int n = static_cast<int>(records.size());
  std::map<int64_t, std::map<int, double>> step_ms;
  std::map<int64_t, StepView> views;
  for (int p = 0; p < n; ++p) {
    for (const StepMetrics& m : records[p]) {
      views[m.step()].wait[p] = wait(m);
      step_ms[m.step()][p] = m.step_ms();
    }
  }
  for (auto it = views.begin(); it != views.end();) {
    if (static_cast<int>(it->second.wait.size()) < n) {
      it = views.erase(it);
      continue;
    }
    for (const auto& [p, ms] : step_ms[it->first]) it->second.step_ms += ms / n;
    ++it;
  }
  return views;
}

// The participant with the smallest wait (the lowest id among equals).
int LeastWaiting(const StepView& v) {
  int best = -1;
  for (const auto& [p, w] : v.wait) {
    if (best < 0 || w < v.wait.at(best)) best = p;
  }
  return best;
}

// LateRankOptions' rule over `n` participants' compared steps.
LateRanks Analyze(int n, const std::vector<StepView>& steps, const LateRankOptions& o) {
  LateRanks out;
  if (n < 2) return out;
  std::vector<int> counts(n, 0);
  int compared = 0;
  for (const StepView& v : steps) {
    if (v.last < 0 || v.last >= n) continue;
    ++counts[v.last];
    ++compared;
  }
  out.steps = compared;
  if (compared == 0) return out;
  std::vector<int> order(n);
  for (int p = 0; p < n; ++p) order[p] = p;
  std::stable_sort(order.begin(), order.end(), [&counts](int a, int b) { return counts[a] > counts[b]; });
  std::vector<int> chosen = {order[0]};
  bool clear = false;
  for (int k = 1; k <= std::max(1, n / 2) && !clear; ++k) {
    int c = 0;
    for (int i = 0; i < k; ++i) c += counts[order[i]];
    const double p = static_cast<double>(k) / n;
    const double chance = compared * p + o.min_sigmas * std::sqrt(compared * p * (1 - p));
    bool ok = c >= o.min_share * compared && c >= chance;
    for (int i = 0; i < k; ++i) ok = ok && 2 * k * counts[order[i]] >= c;
    if (ok) {
      chosen.assign(order.begin(), order.begin() + k);
      clear = true;
    }
  }
  std::sort(chosen.begin(), chosen.end());
  out.ranks = chosen;
  int last = 0;
  for (int p : chosen) last += counts[p];
  out.share = static_cast<double>(last) / compared;
  // The others' wait for them: per step, the mean over the others of their wait beyond
  // the least of the chosen ones'.
  std::vector<double> excess, step_ms;
  for (const StepView& v : steps) {
    if (v.step_ms > 0) step_ms.push_back(v.step_ms);
    double late = 0;
    bool found = false;
    for (int p : chosen) {
      if (auto it = v.wait.find(p); it != v.wait.end() && (!found || it->second < late)) {
        late = it->second;
        found = true;
      }
    }
    if (!found) continue;
    double sum = 0;
    int others = 0;
    for (const auto& [p, w] : v.wait) {
      if (std::find(chosen.begin(), chosen.end(), p) != chosen.end()) continue;
      sum += w - late;
      ++others;
    }
    if (others > 0) excess.push_back(sum / others);
  }
  out.wait_ms = std::max(0.0, Median(excess));
  const double step = Median(step_ms);
  out.wait_fraction = step > 0 ? out.wait_ms / step : 0;
  out.named = clear && compared >= o.min_steps && out.wait_ms >= o.min_wait_ms &&
              out.wait_fraction >= o.min_wait_fraction;
  return out;
}

void SetLate(const LateRanks& late, CellResult* r) {
  r->clear_late_ranks();
  for (int p : late.ranks) r->add_late_ranks(p);
  r->set_late_named(late.named);
  r->set_late_share(late.share);
  r->set_late_wait_ms(late.wait_ms);
  r->set_late_wait_fraction(late.wait_fraction);
  r->set_late_steps(late.steps);
}

}  // namespace

LateRanks FindLateDdpRanks(const std::vector<std::vector<StepMetrics>>& ranks,
                           const LateRankOptions& options) {
  std::map<int64_t, StepView> views =
      CompleteSteps(ranks, [](const StepMetrics& m) { return m.allreduce_wait_ms(); });
  std::vector<StepView> steps;
  for (auto& [step, v] : views) {
    v.last = LeastWaiting(v);
    steps.push_back(std::move(v));
  }
  return Analyze(static_cast<int>(ranks.size()), steps, options);
}

LateRanks FindLatePsWorkers(const std::vector<std::vector<StepMetrics>>& workers,
                            const std::vector<std::vector<StepMetrics>>& shards,
                            const LateRankOptions& options) {
  const int n = static_cast<int>(workers.size());
  // Step -> worker -> shards that recorded it last.
  std::map<int64_t, std::map<int, int>> votes;
  for (const std::vector<StepMetrics>& shard : shards) {
    for (const StepMetrics& m : shard) {
      if (m.late_worker() >= 0 && m.late_worker() < n) ++votes[m.step()][m.late_worker()];
    }
  }
  std::map<int64_t, StepView> views =
      CompleteSteps(workers, [](const StepMetrics& m) { return m.pull_ms(); });
  std::vector<StepView> steps;
  for (auto& [step, v] : views) {
    if (shards.empty()) {
      v.last = LeastWaiting(v);
    } else if (auto it = votes.find(step - 1); it != votes.end()) {
      // The most votes; among equals, the one that waited least.
      int most = 0;
      for (const auto& [w, count] : it->second) {
        if (count > most || (count == most && v.wait.at(w) < v.wait.at(v.last))) {
          most = count;
          v.last = w;
        }
      }
    }
    steps.push_back(std::move(v));
  }
  return Analyze(n, steps, options);
}

std::string EmulationNote(const std::string& kind, int workers, int gpus) {
  if (kind == "dp") {
    return absl::StrCat("emulated: ", workers, " replica threads behind one interpreter lock");
  }
  const std::string shared = gpus > 1 ? absl::StrCat(gpus, " GPUs") : "one GPU";
  if (kind == "ddp") {
    return absl::StrCat("emulated: ", workers, " ranks share ", shared, ", NCCL over sockets");
  }
  return absl::StrCat("emulated: ", workers, workers == 1 ? " worker shares " : " workers share ", shared);
}

std::string DeviceNote(const CellResult& r) {
  if (!r.emulated()) return r.device();
  return absl::StrCat(r.device(), " (", EmulationNote(r.kind(), r.workers(), r.gpus()), ")");
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
  r.set_device(cell.device);
  const std::string log = ReadFile(dir + "/log.txt").value_or("");
  if (!exit_ok) {
    r.set_status("failed");
    r.set_reason(FailureReason(log, exit_reason));
    return r;
  }
  // Worker 0 / rank 0's records (one process: metrics.jsonl; output_files.h).
  const auto metrics_file = [&dir](OutputOwner owner, int index) {
    return absl::StrCat(dir, "/", OutputFileName(OutputFile::kMetrics, owner, index));
  };
  std::vector<StepMetrics> m = ReadMetrics(metrics_file(OutputOwner::kRank, 0));
  if (m.empty()) m = ReadMetrics(metrics_file(OutputOwner::kSingle, 0));
  if (m.empty()) {
    r.set_status("failed");
    r.set_reason("the job wrote no step records");
    return r;
  }
  r.set_status("ok");
  r.set_steps(static_cast<int64_t>(m.size()));
  const std::vector<StepMetrics> steady = Steady(m);
  r.set_median_step_ms(MedianOf(steady, [](const StepMetrics& s) { return s.step_ms(); }));
  r.set_compute_ms(MedianOf(steady, [](const StepMetrics& s) { return s.forward_ms() + s.backward_ms(); }));
  r.set_data_ms(MedianOf(steady, [](const StepMetrics& s) { return s.data_ms(); }));
  r.set_comm_ms(MedianOf(steady, [](const StepMetrics& s) { return s.comm_ms(); }));
  r.set_wait_ms(MedianOf(steady, [](const StepMetrics& s) { return s.wait_ms(); }));
  r.set_update_ms(MedianOf(steady, [](const StepMetrics& s) { return s.update_ms(); }));
  if (r.median_step_ms() > 0) r.set_samples_per_sec(cell.global_batch * 1e3 / r.median_step_ms());
  // The other workers / ranks (PS workers and DDP ranks both write kRank files).
  std::vector<std::vector<StepMetrics>> others;
  for (int rank = 1; fs::exists(metrics_file(OutputOwner::kRank, rank)); ++rank) {
    others.push_back(ReadMetrics(metrics_file(OutputOwner::kRank, rank)));
  }
  ReadDevices(cell, m, others, &r);
  // Every worker's / rank's records after warm-up, rank 0's first.
  std::vector<std::vector<StepMetrics>> all = {steady};
  for (const std::vector<StepMetrics>& v : others) all.push_back(Steady(v));
  std::vector<StepMetrics> every;
  for (const std::vector<StepMetrics>& v : all) every.insert(every.end(), v.begin(), v.end());
  r.set_forward_ms(MedianOf(every, [](const StepMetrics& s) { return s.forward_ms(); }));
  // The busiest node: the busiest shard of a PS; the busiest rank of DDP (ranks differ,
  // e.g. recursive doubling's fold-in ranks). Then who the others waited for.
  if (cell.strategy.kind() == "ps") {
    r.set_ps_sync(cell.strategy.ps_sync().empty() ? "bsp" : cell.strategy.ps_sync());
    r.set_ps_transport(ParsePsTransport(cell.strategy.ps_transport()).value_or(kPsTransportDefault));
    r.set_ps_placement(cell.strategy.ps_placement().empty() ? kPsPlacementBalanced : cell.strategy.ps_placement());
    r.set_ps_mode(cell.strategy.ps_mode().empty() ? kPsModeOptimizer : cell.strategy.ps_mode());
    std::vector<std::vector<StepMetrics>> shards;
    for (int s = 0; fs::exists(metrics_file(OutputOwner::kShard, s)); ++s) {
      shards.push_back(Steady(ReadMetrics(metrics_file(OutputOwner::kShard, s))));
      KeepBusiest(shards.back(), &r);
      r.add_shard_bytes(MedianOf(shards.back(), [](const StepMetrics& x) {
        return 1.0 * x.bytes_received() + x.bytes_sent();
      }));
    }
    SetLate(FindLatePsWorkers(all, shards), &r);
  } else if (cell.strategy.kind() == "ddp") {
    r.set_wire_format(WireFormatName(ParseCompression(cell.strategy.compress()).value_or(WireFormat::kFp32)));
    for (const std::vector<StepMetrics>& v : all) KeepBusiest(v, &r);
    SetLate(FindLateDdpRanks(all), &r);
  }
  ReadLogFacts(log, &r);
  return r;
}
std::vector<double> Speedups(const std::vector<CellResult>& results) {
  // Reference throughput: the single-process cell, else each strategy's 1-worker cell.
  std::map<std::string, std::vector<double>> one_worker;
  std::vector<double> single;
  for (const CellResult& r : results) {
    if (r.status() != "ok") continue;
    if (r.kind() == "single") single.push_back(r.samples_per_sec());
    if (r.workers() == 1) one_worker[r.label()].push_back(r.samples_per_sec());
  }
  std::vector<double> speedups;
  for (const CellResult& r : results) {
    const double base = !single.empty() ? Median(single) : Median(one_worker[r.label()]);
    speedups.push_back(base > 0 && r.status() == "ok" ? r.samples_per_sec() / base : 0);
  }
  return speedups;
}

absl::Status WriteSummaryCsv(const std::vector<CellResult>& results, const std::string& path) {
  const std::vector<double> speedups = Speedups(results);
  std::string csv =
      "cell,label,kind,workers,repeat,status,steps,median_step_ms,samples_per_sec,speedup,"
      "efficiency,compute_ms,comm_ms,wait_ms,update_ms,busiest_bytes_in,busiest_bytes_out,"
      "test_accuracy,wall_s,data_ms,device,emulated,gpus,late,late_share,late_wait_ms,"
      "late_wait_fraction,reason\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const CellResult& r = results[i];
    const double speedup = speedups[i];
    std::string reason = r.reason();
    std::replace(reason.begin(), reason.end(), '"', '\'');
    // The named late ranks, ';'-separated (empty: none clearly late), and the figures
    // for them, or for the most often last one (CellResult.late_*).
    const std::string late = r.late_named() ? absl::StrJoin(r.late_ranks(), ";") : "";
    absl::StrAppendFormat(&csv, "%s,%s,%s,%d,%d,%s,%d,%.3f,%.1f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.0f,%.0f,%.4f,%.1f,%.3f,%s,%d,%d,%s,%.3f,%.3f,%.3f,\"%s\"\n",
                          r.cell(), r.label(), r.kind(), r.workers(), r.repeat(), r.status(),
                          r.steps(), r.median_step_ms(), r.samples_per_sec(), speedup,
                          speedup / std::max(1, r.workers()), r.compute_ms(), r.comm_ms(),
                          r.wait_ms(), r.update_ms(), r.busiest_bytes_in(), r.busiest_bytes_out(),
                          r.test_accuracy(), r.wall_s(), r.data_ms(), r.device(), r.emulated() ? 1 : 0,
                          r.gpus(), late, r.late_share(), r.late_wait_ms(), r.late_wait_fraction(),
                          reason);
  }
  return WriteFileAtomically(path, csv);
}

std::string SummaryTable(const std::vector<CellResult>& results) {
  const std::vector<double> speedups = Speedups(results);
  std::string table = absl::StrFormat("%-24s %7s %6s %9s %11s %8s %10s %10s %8s %8s  %s\n", "cell", "workers",
                                      "repeat", "step ms", "samples/s", "speedup", "efficiency",
                                      "compute ms", "comm ms", "wait ms", "device");
  for (size_t i = 0; i < results.size(); ++i) {
    const CellResult& r = results[i];
    absl::StrAppendFormat(&table, "%-24s %7d %6d ", r.cell(), r.workers(), r.repeat());
    if (r.status() != "ok") {
      absl::StrAppend(&table, "failed: ", r.reason(), "\n");
      continue;
    }
    absl::StrAppendFormat(&table, "%9.2f %11.0f %8.2f %9.0f%% %10.2f %8.2f %8.2f  %s\n", r.median_step_ms(),
                          r.samples_per_sec(), speedups[i], 100 * speedups[i] / std::max(1, r.workers()),
                          r.compute_ms(), r.comm_ms(), r.wait_ms(), DeviceNote(r));
  }
  return table;
}

}  // namespace ringside
