#include "experiments/report/points.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/ps_placement.h"
#include "common/run_config.h"
#include "common/wire_format.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/matrix/cluster_emulation.h"
#include "experiments/matrix/spec.h"
#include "experiments/matrix/summary.h"
#include "experiments/netem/netem.h"
#include "experiments/sys/sys.h"
#include "google/protobuf/text_format.h"

namespace ringside {

namespace fs = std::filesystem;

absl::StatusOr<std::vector<CellResult>> ReadCellResults(const std::string& dir) {
  std::vector<CellResult> out;
  std::error_code error;
  const fs::path cells = fs::path(dir) / "cells";
  if (!fs::is_directory(cells, error)) {
    return absl::NotFoundError(absl::StrCat(dir, " has no cells/ (run `ringside compare` first)"));
  }
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(cells, error)) paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  for (const fs::path& p : paths) {
    absl::StatusOr<std::string> text = ReadFile((p / kCellResultFile).string());
    if (!text.ok()) continue;  // Unfinished cell.
    CellResult r;
    if (google::protobuf::TextFormat::ParseFromString(*text, &r)) out.push_back(r);
  }
  if (out.empty()) return absl::NotFoundError(absl::StrCat(dir, " has no finished cells"));
  return out;
}

namespace {

// The late ranks a majority of the ok repeats named (ReportPoint.late_*).
void SetLatePoint(const std::vector<const CellResult*>& cells, ReportPoint* p) {
  std::map<std::vector<int>, std::vector<const CellResult*>> named;
  int ok = 0;
  for (const CellResult* r : cells) {
    if (r->status() != "ok") continue;
    ++ok;
    if (p->ps_sync.empty()) p->ps_sync = r->ps_sync();
    if (r->late_named()) {
      named[std::vector<int>(r->late_ranks().begin(), r->late_ranks().end())].push_back(r);
    }
  }
  for (const auto& [ranks, repeats] : named) {
    if (2 * static_cast<int>(repeats.size()) <= ok) continue;
    std::vector<double> share, wait, fraction;
    for (const CellResult* r : repeats) {
      share.push_back(r->late_share());
      wait.push_back(r->late_wait_ms());
      fraction.push_back(r->late_wait_fraction());
    }
    p->late_ranks = ranks;
    p->late_share = Median(share);
    p->late_wait_ms = Median(wait);
    p->late_wait_fraction = Median(fraction);
  }
}

}  // namespace

std::string PointDevice(const ReportPoint& p) {
  if (!p.emulated) return p.device;
  return absl::StrCat(p.device, " (", EmulationNote(p.kind, p.workers, p.gpus), ")");
}

namespace {

// The host's pace around each cell that ran on a dilation, as a dilation, by cell id:
// the median of the d measured before the previous cell, before this one and after it
// (before the next), in the order compare started them (started_unix_ms); at the ends
// the mean of the two there are. One probe alone is off by 5-10% on a shared VM (two
// consecutive ones differed by 20% in a demo run), about a speedup's whole tolerance;
// its neighbours, a cell's length away, see the same drift and not the same noise.
// Cells without a start time keep their own d.
std::map<std::string, double> HostPaceDilations(const std::vector<CellResult>& results) {
  std::vector<const CellResult*> timed;
  std::map<std::string, double> pace;
  for (const CellResult& r : results) {
    if (!(r.dilation() > 0)) continue;
    pace[r.cell()] = r.dilation();
    if (r.started_unix_ms() > 0) timed.push_back(&r);
  }
  std::sort(timed.begin(), timed.end(), [](const CellResult* a, const CellResult* b) {
    return a->started_unix_ms() < b->started_unix_ms();
  });
  for (size_t k = 0; k < timed.size(); ++k) {
    std::vector<double> around = {timed[k]->dilation()};
    if (k > 0) around.push_back(timed[k - 1]->dilation());
    if (k + 1 < timed.size()) around.push_back(timed[k + 1]->dilation());
    std::sort(around.begin(), around.end());
    pace[timed[k]->cell()] = around.size() == 3 ? around[1] : (around.front() + around.back()) / 2;
  }
  return pace;
}

// A cell's throughput in its cluster's time where it ran on a dilation (host samples/s
// x the host's pace around it, HostPaceDilations), else its own.
double PairedThroughput(const CellResult& r, const std::map<std::string, double>& pace) {
  const auto it = pace.find(r.cell());
  return r.samples_per_sec() * (it != pace.end() ? it->second : 1.0);
}

// A round's single-process cell as the other cells of its round pair with it: its
// throughput in the cluster's time by the probes around it (PairedThroughput), as
// measured, and its forward pass (0: unknown).
struct SingleRound {
  double paired_sps = 0;
  double sps = 0;
  double forward_ms = 0;
};

// The single-process cells' throughput (BuildPoints): the median over the ok ones
// (0: none), and each round's (repeat r of the single cell) where it is above 0.
struct SingleBaselines {
  double median = 0;
  std::map<int, SingleRound> by_round;
};

SingleBaselines SingleThroughput(const std::vector<CellResult>& results,
                                 const std::map<std::string, double>& pace) {
  SingleBaselines out;
  std::vector<double> single;
  for (const CellResult& r : results) {
    if (r.kind() == "single" && r.status() == "ok") single.push_back(r.samples_per_sec());
  }
  out.median = Median(single);
  // compare runs rounds one after the other, each a whole matrix, so a cell's speedup
  // pairs it with its own round's single; with a cluster both are read in the cluster's
  // time (BuildPoints), so that the host's drift between the two cancels as well.
  for (const CellResult& r : results) {
    if (r.kind() == "single" && r.status() == "ok" && r.samples_per_sec() > 0) {
      out.by_round[r.repeat()] = {PairedThroughput(r, pace), r.samples_per_sec(), r.forward_ms()};
    }
  }
  return out;
}

// The host's pace during cell `r` over its round's single's (their forward passes), where
// `r` ran on a dilation, both have a forward pass and nothing moves during `r`'s: the
// single process and DDP (whose all-reduce runs during backward); else 0. A PS worker's
// next parameters arrive during its forward (PsStrategyOptions.params_arrive_late), so
// the transfers share that pass's CPU: in a communication-bound PS cell its forward
// took twice the single's while its probes moved by a tenth (placement spec, issue 35).
double ForwardPace(const CellResult& r, const SingleRound& single) {
  if (r.kind() != "single" && r.kind() != "ddp") return 0;
  if (!(r.dilation() > 0) || !(r.forward_ms() > 0) || !(single.forward_ms > 0)) return 0;
  return r.forward_ms() / single.forward_ms;
}

// The single process's throughput in the cluster's time, the baseline of the cells
// that are not read by their forward pass (ForwardPace): the single cells' global batch
// over the profile's step (`target_step_ms`), as samples/s per unit of d, so that a cell's
// speedup is its host throughput x its own d over it. 0 (unknown: no profile step, or no
// ok single cell with its batch) leaves those cells read by the probes around them.
struct ProbeBaseline {
  double single_sps_per_d = 0;
};

ProbeBaseline SingleAtTheProfilesStep(const std::vector<CellResult>& results, double target_step_ms) {
  ProbeBaseline out;
  if (!(target_step_ms > 0)) return out;
  for (const CellResult& r : results) {
    if (r.kind() == "single" && r.status() == "ok" && r.global_batch() > 0) {
      out.single_sps_per_d = r.global_batch() * 1e3 / target_step_ms;
      break;
    }
  }
  return out;
}

// The median ok throughput of `label`'s one-worker cells (0: none), from `groups`.
double OwnBaseline(const std::map<std::pair<std::string, int>, std::vector<const CellResult*>>& groups,
                   const std::string& label) {
  double base_own = 0;
  if (auto it = groups.find({label, 1}); it != groups.end()) {
    std::vector<double> v;
    for (const CellResult* r : it->second) {
      if (r->status() == "ok") v.push_back(r->samples_per_sec());
    }
    base_own = Median(v);
  }
  return base_own;
}

// Fills `p`'s cells, device and repeat counts from `cells` (one point's repeats) and
// returns the ok repeats' measures by name ("step", "sps", ..., "paired": each repeat's
// throughput over its round's single, where `single_by_round` has it, both in the
// cluster's time when the cells ran on a dilation; "paced_step" and "paced_compute":
// those read at the single's pace, BuildPoints).
std::map<std::string, std::vector<double>> CollectRepeats(const std::vector<const CellResult*>& cells,
                                                          const std::map<int, SingleRound>& single_by_round,
                                                          const std::map<std::string, double>& pace,
                                                          const ProbeBaseline& probe, double reference_d,
                                                          ReportPoint* p) {
  std::map<std::string, std::vector<double>> v;
  for (const CellResult* r : cells) {
    p->cells.push_back(r->cell());
    if (p->device.empty()) p->device = r->device();
    p->emulated |= r->emulated();
    p->gpus = std::max(p->gpus, r->gpus());
    p->ranks_per_node = std::max(p->ranks_per_node, r->ranks_per_node());
    if (r->status() != "ok") {
      ++p->failed_repeats;
      p->failure = r->reason();
      continue;
    }
    if (p->ok_repeats == 0) {
      p->device = r->device();  // An ok repeat's, where one is.
      p->ps_placement = r->ps_placement();
      p->ps_mode = r->ps_mode();
      p->ps_transport = r->ps_transport();
      p->wire_format = r->wire_format().empty() ? "fp32" : r->wire_format();
    }
    ++p->ok_repeats;
    for (int s = 0; s < r->shard_bytes_size(); ++s) v[absl::StrCat("shard", s)].push_back(r->shard_bytes(s));
    v["step"].push_back(r->median_step_ms());
    v["sps"].push_back(r->samples_per_sec());
    v["compute"].push_back(r->compute_ms());
    v["data"].push_back(r->data_ms());
    v["comm"].push_back(r->comm_ms());
    v["wait"].push_back(r->wait_ms());
    v["update"].push_back(r->update_ms());
    v["in"].push_back(r->busiest_bytes_in());
    v["out"].push_back(r->busiest_bytes_out());
    v["acc"].push_back(r->test_accuracy());
    if (r->dilation() > 0) v["cluster_comm"].push_back((r->comm_ms() + r->wait_ms()) / r->dilation());
    // For the cost model, whose links are the reference d's: the step's link part at
    // that d, its CPU part at the single's pace (DDP, by the forward pass) or as
    // measured (the others).
    if (reference_d > 0 && r->dilation() > 0 && !r->network().empty()) {
      const double step = r->median_step_ms();
      const double cpu = std::min(step, r->data_ms() + r->compute_ms() + r->update_ms());
      double cpu_pace = 1;
      if (auto it = single_by_round.find(r->repeat()); it != single_by_round.end()) {
        if (const double forward = ForwardPace(*r, it->second); forward > 0) cpu_pace = forward;
      }
      v["model_step"].push_back((step - cpu) * reference_d / r->dilation() + cpu / cpu_pace);
    }
    v["wall"].push_back(r->wall_s());
    if (auto it = single_by_round.find(r->repeat()); it != single_by_round.end()) {
      const SingleRound& single = it->second;
      if (const double forward = ForwardPace(*r, single); forward > 0) {
        // Only the CPU's part of the step follows the host's pace: data, forward,
        // backward (with what the transfers took of it) and the update; it is divided
        // by the pace. What the step waited beyond them is the links', shaped for the
        // cluster: kept as measured, on the reading that the cell's links were shaped
        // for the pace the single ran at (probes are too noisy to convert by; the
        // guard, MeasureLinkPaceDrift, disowns a run where that reading fails).
        const double step = r->median_step_ms();
        const double cpu = std::min(step, r->data_ms() + r->compute_ms() + r->update_ms());
        const double paced_step = step - cpu + cpu / forward;
        v["paired"].push_back(paced_step > 0 ? r->samples_per_sec() * step / paced_step / single.sps : 0);
        v["paced_step"].push_back(paced_step);
        v["paced_compute"].push_back(r->compute_ms() / forward);
      } else if (probe.single_sps_per_d > 0 && r->dilation() > 0) {
        // Over the single process as the probe just before this cell measured it (the
        // probe that shaped its links): the single's throughput in the cluster's time
        // is the profile's step by definition, so in that time the cell's speedup is
        // its throughput x its own d over it.
        v["paired"].push_back(r->samples_per_sec() * r->dilation() / probe.single_sps_per_d);
      } else {
        v["paired"].push_back(PairedThroughput(*r, pace) / single.paired_sps);
      }
    }
  }
  return v;
}

// Sets `p`'s medians, ranges, speedup (against `base`, or paired with each round's single
// where every repeat has one and `base_single` > 0) and efficiency from `v`
// (CollectRepeats; entries it lacks are made, empty).
void SetPointMeasures(std::map<std::string, std::vector<double>>& v, double base, double base_single,
                      ReportPoint* p) {
  p->step_ms = Median(v["step"]);
  p->samples_per_sec = Median(v["sps"]);
  p->speedup = base > 0 ? p->samples_per_sec / base : 0;
  if (!v["step"].empty()) {
    const auto [smin, smax] = std::minmax_element(v["step"].begin(), v["step"].end());
    p->step_ms_min = *smin;
    p->step_ms_max = *smax;
    const auto [tmin, tmax] = std::minmax_element(v["sps"].begin(), v["sps"].end());
    p->speedup_min = base > 0 ? *tmin / base : 0;
    p->speedup_max = base > 0 ? *tmax / base : 0;
  }
  // Every repeat paired with its round's single: the median and range of those
  // ratios, so that a drift of the host between rounds cancels.
  if (base_single > 0 && !v["paired"].empty() && v["paired"].size() == v["sps"].size()) {
    const auto [rmin, rmax] = std::minmax_element(v["paired"].begin(), v["paired"].end());
    p->speedup = Median(v["paired"]);
    p->speedup_min = *rmin;
    p->speedup_max = *rmax;
  }
  p->efficiency = p->speedup / p->workers;
  p->compute_ms = Median(v["compute"]);
  if (!v["paced_step"].empty() && v["paced_step"].size() == v["sps"].size()) {
    p->paced_step_ms = Median(v["paced_step"]);
    p->paced_compute_ms = Median(v["paced_compute"]);
  }
  if (!v["model_step"].empty() && v["model_step"].size() == v["sps"].size()) {
    p->model_step_ms = Median(v["model_step"]);
  }
  if (!v["cluster_comm"].empty() && v["cluster_comm"].size() == v["sps"].size()) {
    p->cluster_comm_ms = Median(v["cluster_comm"]);
  }
  p->data_ms = Median(v["data"]);
  p->comm_ms = Median(v["comm"]);
  p->wait_ms = Median(v["wait"]);
  p->update_ms = Median(v["update"]);
  p->busiest_bytes_in = Median(v["in"]);
  p->busiest_bytes_out = Median(v["out"]);
  p->test_accuracy = Median(v["acc"]);
  for (int s = 0; v.count(absl::StrCat("shard", s)) > 0; ++s) {
    p->shard_bytes.push_back(Median(v[absl::StrCat("shard", s)]));
  }
  p->wall_s = Median(v["wall"]);
}

}  // namespace

std::vector<ReportPoint> BuildPoints(const std::vector<CellResult>& results, double target_step_ms) {
  std::vector<std::string> order;
  std::map<std::pair<std::string, int>, std::vector<const CellResult*>> groups;
  for (const CellResult& r : results) {
    if (std::find(order.begin(), order.end(), r.label()) == order.end()) order.push_back(r.label());
    groups[{r.label(), r.workers()}].push_back(&r);
  }
  const std::map<std::string, double> pace = HostPaceDilations(results);
  const SingleBaselines single = SingleThroughput(results, pace);
  const ProbeBaseline probe = SingleAtTheProfilesStep(results, target_step_ms);
  const double base_single = single.median;
  const double reference_d = MedianLinkDilation(results);
  std::vector<ReportPoint> points;
  for (const std::string& label : order) {
    const double base_own = OwnBaseline(groups, label);
    const double base = base_single > 0 ? base_single : base_own;
    for (auto& [key, cells] : groups) {
      if (key.first != label) continue;
      ReportPoint p;
      p.label = label;
      p.kind = cells[0]->kind();
      p.workers = key.second;
      std::map<std::string, std::vector<double>> v = CollectRepeats(cells, single.by_round, pace, probe, reference_d, &p);
      SetPointMeasures(v, base, base_single, &p);
      SetLatePoint(cells, &p);
      points.push_back(p);
    }
  }
  return points;
}

HottestShard FindHottestShard(const ReportPoint& p) {
  HottestShard hot;
  double total = 0;
  for (size_t s = 0; s < p.shard_bytes.size(); ++s) {
    total += p.shard_bytes[s];
    if (hot.shard < 0 || p.shard_bytes[s] > p.shard_bytes[hot.shard]) hot.shard = static_cast<int>(s);
  }
  if (hot.shard < 0 || !(total > 0)) return HottestShard();
  hot.share = p.shard_bytes[hot.shard] / total;
  return hot;
}

double StepForModel(const ReportPoint& p) {
  if (p.model_step_ms > 0) return p.model_step_ms;
  return p.paced_step_ms > 0 ? p.paced_step_ms : p.step_ms;
}

double MedianLinkDilation(const std::vector<CellResult>& results) {
  std::vector<double> d;
  for (const CellResult& r : results) {
    if (r.dilation() > 0 && !r.network().empty()) d.push_back(r.dilation());
  }
  if (d.empty()) return 0;
  std::sort(d.begin(), d.end());
  return d[d.size() / 2];
}

double ComputeAtSinglePace(const ReportPoint& p) {
  return p.paced_compute_ms > 0 ? p.paced_compute_ms : p.compute_ms;
}

LinkPaceDrift MeasureLinkPaceDrift(const std::vector<CellResult>& results, double fraction) {
  LinkPaceDrift drift;
  // The forward pass per unit of d: the median over the single cells of their forward
  // over the d probed around them (HostPaceDilations). A median over the rounds, so
  // that one single that ran while the host was slow does not make its whole round's
  // cells look strayed.
  const std::map<std::string, double> pace = HostPaceDilations(results);
  std::vector<double> per_d;
  for (const CellResult& r : results) {
    if (r.kind() != "single" || r.status() != "ok" || !(r.forward_ms() > 0)) continue;
    const auto d = pace.find(r.cell());
    if (d != pace.end() && d->second > 0) per_d.push_back(r.forward_ms() / d->second);
  }
  const double forward_per_d = Median(per_d);
  for (const CellResult& r : results) {
    if (r.kind() != "ddp" || r.status() != "ok" || !(r.forward_ms() > 0) || !(r.dilation() > 0)) continue;
    if (!r.has_pace_off() && !(forward_per_d > 0)) continue;
    ++drift.cells;
    // The d the cell computed at, against the d its links were shaped for.
    const double off = r.has_pace_off() ? std::fabs(r.pace_off())
                                        : std::fabs(r.forward_ms() / forward_per_d / r.dilation() - 1);
    if (off > fraction) ++drift.strayed;
    if (off > drift.worst) {
      drift.worst = off;
      drift.worst_cell = r.cell();
    }
  }
  return drift;
}

void SortPointsBySpec(const std::string& spec_text, std::vector<ReportPoint>* points) {
  std::vector<std::string> spec_order;
  if (ExperimentSpec parsed; google::protobuf::TextFormat::ParseFromString(spec_text, &parsed)) {
    for (const StrategySpec& s : parsed.strategies()) spec_order.push_back(StrategyLabel(parsed, s));
  }
  auto rank = [&](const std::string& label) {
    return std::find(spec_order.begin(), spec_order.end(), label) - spec_order.begin();
  };
  std::stable_sort(points->begin(), points->end(), [&](const ReportPoint& a, const ReportPoint& b) {
    return std::make_pair(rank(a.label), a.workers) < std::make_pair(rank(b.label), b.workers);
  });
}

namespace {

// The cell of `cells` that point `p` ran (its label and workers), or nullptr.
const Cell* CellOf(const std::vector<Cell>& cells, const ReportPoint& p) {
  for (const Cell& c : cells) {
    if (c.label == p.label && c.workers == p.workers) return &c;
  }
  return nullptr;
}

// `measured` with its compute scaled to the first of the matrix's own CPU single-process
// cells that finished ok (points.h), and that cell's basis in `*basis`; `measured` as is,
// `*basis` untouched, where none fits (or the spec scales strongly).
Calibration ScaleToOwnSingle(const Calibration& measured, const ExperimentSpec& spec,
                             const std::vector<Cell>& cells, const std::vector<ReportPoint>& points,
                             ComputeBasis* basis) {
  Calibration calibration = measured;
  for (const ReportPoint& p : points) {
    const Cell* cell = CellOf(cells, p);
    if (p.kind != "single" || p.ok_repeats == 0 || !(p.compute_ms > 0) || cell == nullptr ||
        IsGpuDevice(cell->device) || spec.global_batch() > 0) {
      continue;
    }
    Scenario on_single;
    on_single.node_cpus = cell->node_cpus;
    const double calibrated_s = CalibrationOnNode(measured, on_single).compute_s;
    if (!(calibrated_s > 0)) continue;
    const double ratio = p.compute_ms / 1e3 / calibrated_s;
    calibration.compute_s *= ratio;
    calibration.backward_s *= ratio;
    *basis = {calibrated_s * 1e3, p.compute_ms};
    break;
  }
  return calibration;
}

// Sets `s`'s strategy (and a PS's shards, placement and schedule, or an all-reduce's
// algorithm and overlap) for point `p` of `strategy` (kind "ps" or "ddp"), its ranks
// `ranks_per_node` to a node.
void SetStrategyScenario(const ReportPoint& p, const StrategySpec& strategy, int ranks_per_node, Scenario* s) {
  if (p.kind == "ps") {
    s->strategy = Strategy::kPs;
    s->worker_summers = strategy.ps_worker_summers();
    s->shards = strategy.ps_shard_per_worker() ? p.workers
                : s->worker_summers            ? strategy.ps_shards()
                                               : std::max(1, strategy.ps_shards());
    s->colocated = strategy.ps_colocated();
    s->ps_tcp = ParsePsTransport(strategy.ps_transport()).value_or(kPsTransportDefault) == kPsTransportTcp;
    s->ps_summation = strategy.ps_mode() == kPsModeSummation;
    // --compress: the TCP data plane's push-pulls in 2-byte values (the spec refused
    // it elsewhere).
    s->wire_format = ParseCompression(strategy.compress()).value_or(WireFormat::kFp32);
    if (s->colocated) s->colocated_hosts = 1;  // --ps_colocated: every shard in worker 0.
    if (!s->colocated && ranks_per_node > 1) {
      // Nodes filled shard 0, worker 0, shard 1, worker 1, ...: while shards and
      // workers pair up, each node holds a worker beside its shard (colocated in the
      // model's terms, one worker computing per node); past that, K workers a node.
      if (strategy.ps_shard_per_worker() && ranks_per_node == 2) {
        s->colocated = true;
      } else {
        s->ranks_per_node = ranks_per_node;
      }
    }
    // ringside's PS as it runs, the same schedule `simulate` predicts with, at the
    // spec's chunk size where it gives one.
    UseRingsidePsSchedule(s, strategy.ps_chunk_kb() * 1024.0);
  } else {
    const std::string& a = strategy.allreduce();
    s->strategy = a == "halving-doubling"     ? Strategy::kHalvingDoubling
                  : a == "recursive-doubling" ? Strategy::kRecursiveDoubling
                  : a == "ring"               ? Strategy::kRing
                                              : Strategy::kAuto;  // "auto" or unset.
    s->overlap = !strategy.no_overlap();
    // --compress: 2-byte values on the ring (the spec refused any other format).
    const absl::StatusOr<WireFormat> wire = ParseCompression(strategy.compress());
    s->wire_format = wire.ok() ? *wire : WireFormat::kFp32;
  }
}

}  // namespace

ComputeBasis PredictPoints(const Calibration& measured, const ExperimentSpec& spec, int cores,
                           std::vector<ReportPoint>* points) {
  absl::StatusOr<NetworkProfile> profile = ParseNetworkProfile(spec.network());
  double link = 0, master_link = 0, intra_link = 0;
  if (profile.ok() && profile->enabled) {
    // What the cells' TCP moved: the shaped rate less the headers tc counts.
    link = profile->link.bits_per_sec / 8 * kShapedTcpPayloadShare;
    master_link = LinkForRole(*profile, "master").bits_per_sec / 8 * kShapedTcpPayloadShare;
    intra_link = profile->loopback.bits_per_sec / 8;  // 0: unshaped (lo.bw absent).
  }
  // The cells as compare resolved them (a cluster's devices per node included): each
  // point's node share and processes per node come from its first repeat's cell.
  std::vector<Cell> cells = ExpandCells(spec);
  if (!ResolveClusterCells(spec, cores, &cells).ok()) cells.clear();
  double node_cpus = 0;  // The distributed cells' share (the single's may be one device's).
  for (const Cell& c : cells) node_cpus = std::max(node_cpus, c.node_cpus);
  // Compute from the matrix's own single-process cells (points.h).
  ComputeBasis basis;
  const Calibration calibration = ScaleToOwnSingle(measured, spec, cells, *points, &basis);
  const absl::StatusOr<SlowNodeSpec> slow = ParseSlowNode(spec.slow_node());
  const double slow_fraction = slow.ok() && slow->enabled ? slow->factor : 1;
  for (ReportPoint& p : *points) {
    const StrategySpec* strategy = nullptr;
    for (const StrategySpec& s : spec.strategies()) {
      if (StrategyLabel(spec, s) == p.label) strategy = &s;
    }
    if (strategy == nullptr || p.ok_repeats == 0) continue;
    if (IsGpuDevice(StrategyDevice(spec, *strategy))) continue;  // CPU calibration only.
    if (p.kind == "dp") continue;  // No DataParallel formula: "not modelled" (markdown.cc).
    Calibration c = calibration;
    // Strong scaling: the calibration was taken at the global batch (report.cc checks),
    // and each of N workers computes a batch N times smaller: GEMM work is linear in
    // the batch, so compute / N (per-call overheads make this optimistic at small batches).
    const double share = spec.global_batch() > 0 ? 1.0 / std::max(1, p.workers) : 1.0;
    // Workers compute at the same time under BSP; more of them than cores share, unless
    // each has an emulated node's CPU share of its own.
    const double crowding =
        node_cpus > 0 ? 1.0 : std::max(1.0, static_cast<double>(p.workers) / std::max(1, cores));
    c.compute_s *= share * crowding;
    c.backward_s *= share * crowding;
    const Cell* cell = CellOf(cells, p);
    Scenario s;
    s.node_cpus = cell != nullptr ? cell->node_cpus : node_cpus;
    if (p.kind == "single") {
      p.predicted_step_ms = SingleProcessStepSeconds(CalibrationOnNode(c, s), calibration.model_bytes) * 1e3;
      continue;
    }
    const int ranks_per_node = std::max(1, cell != nullptr ? cell->ranks_per_node : strategy->ranks_per_node());
    if (p.kind == "ddp") s.ranks_per_node = ranks_per_node;
    // Ranks of one node reach each other over its loopback: shaped (a cluster's intra-node
    // path / d), or the calibrated path where unshaped.
    if (ranks_per_node > 1 && intra_link > 0) s.intra_node_bytes_per_s = intra_link;
    if (p.workers > 1 && slow_fraction < 1) s.slow_node_fraction = slow_fraction;
    s.workers = p.workers;
    s.model_bytes = calibration.model_bytes;
    s.link_bytes_per_s = link;
    s.master_link_bytes_per_s = master_link != link ? master_link : 0;
    SetStrategyScenario(p, *strategy, ranks_per_node, &s);
    // A whole-tensor placement: the busiest shard holds what the placement gives it.
    if (p.kind == "ps" && !s.colocated && !strategy->ps_placement().empty() &&
        strategy->ps_placement() != kPsPlacementBalanced) {
      absl::StatusOr<double> busiest = BusiestShardFraction(spec.model(), s.shards, strategy->ps_placement());
      if (busiest.ok()) s.busiest_shard_fraction = *busiest;
    }
    // Top-k and PowerSGD: each bucket's payload from the model's tensors.
    if (p.kind == "ddp" && ParseCompressionSpec(strategy->compress()).value_or(Compression()).lossy()) {
      absl::StatusOr<LossyBuckets> lossy =
          LossyBucketsOf(spec.model(), strategy->compress(), 0, static_cast<int64_t>(strategy->bucket_cap_mb() * (1 << 20)));
      if (!lossy.ok()) continue;  // No prediction rather than float32's.
      s.bucket_bytes = lossy->bucket_bytes;
      s.lossy_buckets = lossy->payloads;
      s.model_bytes = 0;
      for (double b : s.bucket_bytes) s.model_bytes += b;
    }
    absl::StatusOr<Prediction> prediction = Predict(c, s);
    if (prediction.ok()) {
      p.predicted_step_ms = prediction->step_s * 1e3;
      p.predicted_comm_cpu_ms = prediction->comm_cpu_s * 1e3;
      p.predicted_join_ms = prediction->join_s * 1e3;
    }
  }
  return basis;
}

}  // namespace ringside
