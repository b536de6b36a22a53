#include "experiments/costmodel/cost_model.h"

#include "ddp_ring/reducer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "ddp_ring/allreduce_algorithm.h"

namespace ringside {
namespace {

// The reducer's defaults (ddp_ring/reducer.h).
// The reducer's defaults (PyTorch's): the buckets the model assumes DDP uses.
constexpr double kFirstBucketBytes = kDefaultFirstBucketBytes;
constexpr double kBucketCapBytes = kDefaultBucketCapBytes;
// Relative step-time differences below this are ties for FindCrossovers.
constexpr double kTieTolerance = 1e-9;

bool IsPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

int FloorLog2(int n) {
  int lg = 0;
  while (n > 1) {
    n >>= 1;
    ++lg;
  }
  return lg;
}

bool IsFiniteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

// Weighted least squares of y = a + b x with weights w; `through_origin` forces a = 0.
// Returns {a, b}.
std::pair<double, double> WeightedLine(const std::vector<std::pair<double, double>>& xy,
                                       const std::vector<double>& w, bool through_origin) {
  if (through_origin) {
    double sxy = 0, sxx = 0;
    for (size_t i = 0; i < xy.size(); ++i) {
      sxy += w[i] * xy[i].first * xy[i].second;
      sxx += w[i] * xy[i].first * xy[i].first;
    }
    return {0.0, sxx > 0 ? sxy / sxx : 0.0};
  }
  double sw = 0, sx = 0, sy = 0;
  for (size_t i = 0; i < xy.size(); ++i) {
    sw += w[i];
    sx += w[i] * xy[i].first;
    sy += w[i] * xy[i].second;
  }
  const double mx = sx / sw, my = sy / sw;
  // Centred sums: x reaches 1e9 bytes, so raw sums of x^2 would lose the slope.
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < xy.size(); ++i) {
    const double dx = xy[i].first - mx;
    sxy += w[i] * dx * (xy[i].second - my);
    sxx += w[i] * dx * dx;
  }
  const double b = sxy / sxx;
  return {my - b * mx, b};
}

// Intercept and slope of the relative-error fit (see FitLatencyBandwidth).
absl::StatusOr<std::pair<double, double>> FitLine(
    const std::vector<std::pair<double, double>>& samples) {
  std::set<double> sizes;
  for (const auto& [bytes, seconds] : samples) {
    if (!IsFiniteNonNegative(bytes) || !std::isfinite(seconds) || seconds <= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "fit: bad sample (%g bytes, %g s): sizes must be >= 0 and times > 0", bytes,
          seconds));
    }
    sizes.insert(bytes);
  }
  if (sizes.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fit: need samples at >= 2 distinct message sizes, got ", sizes.size()));
  }
  std::vector<double> w;
  w.reserve(samples.size());
  for (const auto& s : samples) w.push_back(1.0 / (s.second * s.second));
  auto [a, b] = WeightedLine(samples, w, /*through_origin=*/false);
  if (a < 0) std::tie(a, b) = WeightedLine(samples, w, /*through_origin=*/true);
  if (!(b > 0) || !std::isfinite(b)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "fit: time does not grow with size (slope %g s/byte): no positive bandwidth", b));
  }
  return std::make_pair(a, b);
}

// The coefficients of alpha, M/B and M*gamma in one all-reduce of M bytes on n ranks.
// `bytes`: what the busiest rank sends (and receives) per byte of M.
struct AllReduceCoefficients {
  double latency = 0;
  double bandwidth = 0;
  double reduction = 0;
  double bytes = 0;
};

AllReduceCoefficients RingCoefficients(int n) {
  if (n <= 1) return {};
  return {2.0 * (n - 1), 2.0 * (n - 1) / n, double(n - 1) / n, 2.0 * (n - 1) / n};
}

// Halving-doubling; a non-power-of-two n folds the n - p extra ranks into partners first
// and hands them the result at the end (2 alpha + 2 M/B + M gamma on top of T_hd(p)).
AllReduceCoefficients HalvingDoublingCoefficients(int n) {
  if (n <= 1) return {};
  const int lg = FloorLog2(n);
  const int p = 1 << lg;
  AllReduceCoefficients c{2.0 * lg, 2.0 * (p - 1) / p, double(p - 1) / p,
                          2.0 * (p - 1) / p};
  if (p != n) {
    // Fold in (M in), hand back (M out): two sequential M-sized messages on the
    // partner's link, M more bytes each way.
    c.latency += 2;
    c.bandwidth += 2;
    c.reduction += 1;
    c.bytes += 1;
  }
  return c;
}

// Recursive doubling: lg p rounds, each swapping all M bytes with one partner and adding
// them; a non-power-of-two n folds the extra ranks in and out as halving-doubling does.
AllReduceCoefficients RecursiveDoublingCoefficients(int n) {
  if (n <= 1) return {};
  const int lg = FloorLog2(n);
  AllReduceCoefficients c{double(lg), double(lg), double(lg), double(lg)};
  if ((1 << lg) != n) {
    c.latency += 2;
    c.bandwidth += 2;
    c.reduction += 1;
    c.bytes += 1;
  }
  return c;
}

// The coefficients of the algorithm `strategy` runs for a bucket of `bytes` on n ranks
// (kAuto: what the process group's auto picks for that size).
AllReduceCoefficients CoefficientsFor(Strategy strategy, int n, double bytes) {
  if (strategy == Strategy::kAuto) {
    switch (ResolveAllReduceAlgorithm(AllReduceAlgorithm::kAuto, n,
                                      static_cast<int64_t>(bytes))) {
      case AllReduceAlgorithm::kRecursiveDoubling: return RecursiveDoublingCoefficients(n);
      case AllReduceAlgorithm::kHalvingDoubling: return HalvingDoublingCoefficients(n);
      default: return RingCoefficients(n);
    }
  }
  if (strategy == Strategy::kHalvingDoubling) return HalvingDoublingCoefficients(n);
  if (strategy == Strategy::kRecursiveDoubling) return RecursiveDoublingCoefficients(n);
  return RingCoefficients(n);
}

// Network parameters a step sees on one path.
struct EffectiveLink {
  double alpha_s = 0;
  double bytes_per_s = 0;
};

// `wire_trips`: how many one-way wire latencies one message of the path waits for (1 for
// an all-reduce step, 2 for a push-pull: the request out, the reply back).
EffectiveLink Effective(const PathCalibration& path, double wire_bytes_per_s,
                        double wire_latency_s, bool path_limits, int wire_trips) {
  EffectiveLink link;
  if (wire_bytes_per_s > 0) {
    link.bytes_per_s = (path_limits && path.bytes_per_s > 0)
                           ? std::min(wire_bytes_per_s, path.bytes_per_s)
                           : wire_bytes_per_s;
  } else {
    link.bytes_per_s = path.bytes_per_s;
  }
  if (wire_latency_s < 0) {
    link.alpha_s = path.alpha_s;
  } else {
    const double wire = wire_trips * wire_latency_s;
    link.alpha_s = path_limits ? path.alpha_s + wire : wire;
  }
  return link;
}

absl::Status NeedBandwidth(const EffectiveLink& link, const char* what) {
  if (link.bytes_per_s > 0 && std::isfinite(link.bytes_per_s)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "no bandwidth for the ", what,
      " path: calibrate it or give a link speed (link_bytes_per_s)"));
}


absl::Status ValidateScenario(const Scenario& s) {
  if (s.workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("workers = ", s.workers, ", need >= 1"));
  }
  if (s.strategy == Strategy::kPs && s.shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("shards = ", s.shards, ", need >= 1"));
  }
  if (s.colocated_hosts < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("colocated_hosts = ", s.colocated_hosts, ", need >= 0"));
  }
  if (!IsFiniteNonNegative(s.model_bytes) || !IsFiniteNonNegative(s.link_bytes_per_s) ||
      !IsFiniteNonNegative(s.master_link_bytes_per_s) || !std::isfinite(s.link_latency_s)) {
    return absl::InvalidArgumentError(
        "model_bytes, link_bytes_per_s and master_link_bytes_per_s must be finite and >= 0");
  }
  if (s.link_latency_s < 0 && s.link_latency_s != -1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "link_latency_s = %g: give >= 0, or -1 for the calibrated alpha", s.link_latency_s));
  }
  if (!IsFiniteNonNegative(s.node_cpus) || s.ranks_per_node < 1 ||
      !(s.slow_node_fraction > 0 && s.slow_node_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node_cpus = %g, ranks_per_node = %d, slow_node_fraction = %g: need node_cpus >= 0, "
        "ranks_per_node >= 1 and 0 < slow_node_fraction <= 1",
        s.node_cpus, s.ranks_per_node, s.slow_node_fraction));
  }
  if (!s.bucket_bytes.empty()) {
    double sum = 0;
    for (double b : s.bucket_bytes) {
      if (!std::isfinite(b) || b <= 0) {
        return absl::InvalidArgumentError("bucket sizes must be finite and > 0");
      }
      sum += b;
    }
    if (std::abs(sum - s.model_bytes) > 1e-6 * std::max(1.0, s.model_bytes)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "bucket sizes add up to %.0f bytes, the model has %.0f", sum, s.model_bytes));
    }
  }
  return absl::OkStatus();
}

std::vector<double> DefaultBuckets(double model_bytes) {
  std::vector<double> buckets;
  if (model_bytes <= 0) return buckets;
  double left = model_bytes;
  buckets.push_back(std::min(kFirstBucketBytes, left));
  left -= buckets.back();
  while (left > 0) {
    buckets.push_back(std::min(kBucketCapBytes, left));
    left -= buckets.back();
  }
  return buckets;
}

// Names the largest of the step's parts; for communication, its largest component.
std::string Bottleneck(const Prediction& p, double latency_s, double wire_s,
                       const char* wire_name, double reduction_s) {
  if (p.compute_s >= p.comm_s && p.compute_s >= p.update_s) return "compute";
  if (p.update_s >= p.comm_s) return "update";
  if (latency_s >= wire_s && latency_s >= reduction_s) return "latency";
  if (reduction_s > wire_s) return "reduction";
  return wire_name;
}

// DDP: buckets all-reduced in launch order on one process group (a FIFO), each launched
// when backward has produced it (gradient bytes assumed to appear at a uniform rate
// during backward); after backward the rank waits for each bucket in order and steps
// SGD on it.
absl::StatusOr<Prediction> PredictAllReduce(const Calibration& c, const Scenario& s) {
  const int n = s.workers;
  const bool hd = s.strategy == Strategy::kHalvingDoubling;
  const PathCalibration& path =
      (hd && c.halving_doubling.bytes_per_s > 0) ? c.halving_doubling : c.allreduce;
  const EffectiveLink link = Effective(path, s.link_bytes_per_s, s.link_latency_s,
                                       s.path_limits, /*wire_trips=*/1);
  const double m = s.model_bytes;
  if (n > 1 && m > 0) {
    absl::Status st = NeedBandwidth(link, hd ? "halving-doubling" : "all-reduce");
    if (!st.ok()) return st;
  }

  const std::vector<double> buckets = s.bucket_bytes.empty() ? DefaultBuckets(m)
                                                             : s.bucket_bytes;
  const double backward = c.backward_s;
  const double forward = c.compute_s - c.backward_s;
  double latency_total = 0, wire_total = 0, reduce_total = 0, busiest_bytes = 0;
  double produced = 0;
  double comm_free_at = 0;  // When the process group finishes its queue (from backward start).
  double rank_at = backward;  // The training thread, after backward.
  for (double b : buckets) {
    produced += b;
    const double ready = s.overlap ? backward * std::min(1.0, produced / m) : backward;
    const AllReduceCoefficients k = CoefficientsFor(s.strategy, n, b);
    busiest_bytes += k.bytes * b;
    const double lat = k.latency * link.alpha_s;
    const double wire = k.bandwidth > 0 ? k.bandwidth * b / link.bytes_per_s : 0;
    const double red = k.reduction * b * c.reduce_s_per_byte;
    latency_total += lat;
    wire_total += wire;
    reduce_total += red;
    comm_free_at = std::max(comm_free_at, ready) + lat + wire + red;
    rank_at = std::max(rank_at, comm_free_at) + c.update_s_per_byte * b;
  }

  Prediction p;
  p.compute_s = c.compute_s;
  p.update_s = c.update_s_per_byte * m;
  p.step_s = forward + rank_at;
  p.comm_s = std::max(0.0, p.step_s - p.compute_s - p.update_s);
  p.comm_total_s = latency_total + wire_total + reduce_total;
  p.busiest_node_bytes_in = p.busiest_node_bytes_out = busiest_bytes;
  p.bottleneck = Bottleneck(p, latency_total, wire_total, "worker link", reduce_total);
  return p;
}

// PS under BSP with one combined, chunk-pipelined push-pull per shard per step.
absl::StatusOr<Prediction> PredictPs(const Calibration& c, const Scenario& s) {
  const int n = s.workers;
  const int shards = s.shards;
  const double m = s.model_bytes;
  const EffectiveLink worker = Effective(c.push_pull, s.link_bytes_per_s, s.link_latency_s,
                                         s.path_limits, /*wire_trips=*/2);
  const double server_wire =
      s.master_link_bytes_per_s > 0 ? s.master_link_bytes_per_s : s.link_bytes_per_s;
  const EffectiveLink server = Effective(c.push_pull, server_wire, s.link_latency_s,
                                         s.path_limits, /*wire_trips=*/2);

  double worker_bytes = 0;  // Each direction, through a worker that hosts no shard.
  double server_bytes = 0;  // Each direction, through the busiest shard-hosting node.
  double slice = 0;         // Parameter bytes that node updates.
  double calls = 1;         // Push-pull calls the busiest node issues plus serves.
  bool has_plain_workers = true;
  bool every_node_hosts = false;
  if (!s.colocated) {
    // Workers packed on a node share its link.
    worker_bytes = std::min(s.ranks_per_node, n) * m;
    server_bytes = n * m / shards;
    slice = m / shards;
    calls = std::max(shards, n);  // A worker issues S calls; a server node serves N.
  } else {
    int hosts = std::min(shards, n);
    if (s.colocated_hosts > 0) hosts = std::min(hosts, s.colocated_hosts);
    // The busiest host holds ceil(S / H) shards: a fraction f of the model. Out of it go
    // its own worker's gradients for the other hosts, (1 - f) M, and the updated slice
    // to each of the N - 1 remote workers, (N - 1) f M; the same comes in.
    const int on_busiest = (shards + hosts - 1) / hosts;
    const double f = double(on_busiest) / shards;
    server_bytes = (1 - f) * m + (n - 1) * f * m;
    has_plain_workers = n > hosts;
    every_node_hosts = !has_plain_workers;
    worker_bytes = has_plain_workers ? m : 0;
    slice = f * m;
    // The host's worker issues S calls; its shards serve every worker, itself included.
    calls = shards + double(n) * on_busiest;
  }
  if (worker_bytes > 0) {
    absl::Status st = NeedBandwidth(worker, "push-pull");
    if (!st.ok()) return st;
  }
  if (server_bytes > 0) {
    absl::Status st = NeedBandwidth(server, "push-pull (server side)");
    if (!st.ok()) return st;
  }
  const double worker_s = worker_bytes > 0 ? worker_bytes / worker.bytes_per_s : 0;
  const double server_s = server_bytes > 0 ? server_bytes / server.bytes_per_s : 0;

  const double latency_s = worker.alpha_s + (calls - 1) * c.push_pull_per_call_s;
  Prediction p;
  p.compute_s = c.compute_s;
  const double one_way_s = std::max(worker_s, server_s);
  const double slice_bytes = m / shards;
  const double unpipelined =
      s.chunk_bytes > 0 && slice_bytes > 0 ? std::min(s.chunk_bytes, slice_bytes) / slice_bytes : 0;
  p.comm_s = s.ps_overlap
                 ? latency_s + std::max(0.0, one_way_s - c.backward_s) + one_way_s * unpipelined
                 : latency_s + one_way_s * (1 + unpipelined);
  p.comm_total_s = p.comm_s;
  // Under BSP a shard sums N pushes into its accumulator (with one worker it steps on
  // the pushed gradient directly), then steps SGD once on its slice.
  const double aggregate_s = n > 1 ? c.reduce_s_per_byte * n * slice : 0;
  p.update_s = c.update_s_per_byte * slice + aggregate_s;
  p.step_s = p.compute_s + p.comm_s + p.update_s;
  p.busiest_node_bytes_in = p.busiest_node_bytes_out = std::max(worker_bytes, server_bytes);
  const char* wire_name =
      (server_s > worker_s && !every_node_hosts) ? "master link" : "worker link";
  p.bottleneck = Bottleneck(p, latency_s, std::max(worker_s, server_s), wire_name, 0);
  return p;
}

}  // namespace

absl::Status ValidateCalibration(const Calibration& c) {
  const std::pair<const char*, double> fields[] = {
      {"compute_s", c.compute_s},
      {"backward_s", c.backward_s},
      {"update_s_per_byte", c.update_s_per_byte},
      {"reduce_s_per_byte", c.reduce_s_per_byte},
      {"model_bytes", c.model_bytes},
      {"node_cpus", c.node_cpus},
      {"push_pull_per_call_s", c.push_pull_per_call_s},
      {"push_pull.alpha_s", c.push_pull.alpha_s},
      {"push_pull.bytes_per_s", c.push_pull.bytes_per_s},
      {"allreduce.alpha_s", c.allreduce.alpha_s},
      {"allreduce.bytes_per_s", c.allreduce.bytes_per_s},
      {"halving_doubling.alpha_s", c.halving_doubling.alpha_s},
      {"halving_doubling.bytes_per_s", c.halving_doubling.bytes_per_s},
  };
  for (const auto& [name, value] : fields) {
    if (!IsFiniteNonNegative(value)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("calibration: %s = %g, must be finite and >= 0", name, value));
    }
  }
  if (c.backward_s > c.compute_s) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "calibration: backward_s (%g) exceeds compute_s (%g)", c.backward_s, c.compute_s));
  }
  return absl::OkStatus();
}

const char* StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kPs: return "ps";
    case Strategy::kRing: return "ring";
    case Strategy::kHalvingDoubling: return "halving-doubling";
    case Strategy::kRecursiveDoubling: return "recursive-doubling";
    case Strategy::kAuto: return "auto";
  }
  return "unknown";
}

absl::StatusOr<PathCalibration> FitLatencyBandwidth(
    const std::vector<std::pair<double, double>>& samples) {
  absl::StatusOr<std::pair<double, double>> line = FitLine(samples);
  if (!line.ok()) return line.status();
  return PathCalibration{line->first, 1.0 / line->second};
}

absl::StatusOr<PathCalibration> FitAllReducePath(
    const std::vector<std::pair<double, double>>& samples, int ranks, Strategy algorithm,
    double reduce_s_per_byte) {
  if (ranks < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("all-reduce fit: need a sweep with >= 2 ranks, got ", ranks));
  }
  if (!IsFiniteNonNegative(reduce_s_per_byte)) {
    return absl::InvalidArgumentError("all-reduce fit: reduce_s_per_byte must be >= 0");
  }
  AllReduceCoefficients k;
  switch (algorithm) {
    case Strategy::kRing:
      k = RingCoefficients(ranks);
      break;
    case Strategy::kHalvingDoubling:
      if (!IsPowerOfTwo(ranks)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "all-reduce fit: halving-doubling sweeps need a power-of-two rank count, got ",
            ranks));
      }
      k = HalvingDoublingCoefficients(ranks);
      break;
    case Strategy::kRecursiveDoubling:
      if (!IsPowerOfTwo(ranks)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "all-reduce fit: recursive-doubling sweeps need a power-of-two rank count, got ",
            ranks));
      }
      k = RecursiveDoublingCoefficients(ranks);
      break;
    case Strategy::kAuto:
      return absl::InvalidArgumentError(
          "all-reduce fit: name the algorithm the sweep ran, not auto");
    case Strategy::kPs:
      return absl::InvalidArgumentError("all-reduce fit: kPs is not an all-reduce");
  }
  absl::StatusOr<std::pair<double, double>> line = FitLine(samples);
  if (!line.ok()) return line.status();
  const double per_byte_wire = (line->second - k.reduction * reduce_s_per_byte) / k.bandwidth;
  if (!(per_byte_wire > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "all-reduce fit: the reduction cost (%g s/byte) explains the whole slope (%g "
        "s/byte): no bandwidth left",
        k.reduction * reduce_s_per_byte, line->second));
  }
  return PathCalibration{line->first / k.latency, 1.0 / per_byte_wire};
}

absl::StatusOr<PathCalibration> FitPushPullPath(
    const std::vector<std::pair<double, double>>& samples, double shard_s_per_byte) {
  if (!IsFiniteNonNegative(shard_s_per_byte)) {
    return absl::InvalidArgumentError("push-pull fit: shard_s_per_byte must be >= 0");
  }
  absl::StatusOr<std::pair<double, double>> line = FitLine(samples);
  if (!line.ok()) return line.status();
  const double per_byte_wire = line->second - shard_s_per_byte;
  if (!(per_byte_wire > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "push-pull fit: the shard's work (%g s/byte) explains the whole slope (%g s/byte)",
        shard_s_per_byte, line->second));
  }
  return PathCalibration{line->first, 1.0 / per_byte_wire};
}

absl::StatusOr<double> FitPerCallOverhead(
    const std::vector<std::pair<double, double>>& samples) {
  std::set<double> counts;
  for (const auto& [calls, seconds] : samples) {
    if (!std::isfinite(calls) || calls < 1 || !std::isfinite(seconds) || seconds <= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "per-call fit: bad sample (%g calls, %g s): need calls >= 1 and time > 0", calls,
          seconds));
    }
    counts.insert(calls);
  }
  if (counts.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "per-call fit: need samples at >= 2 distinct call counts, got ", counts.size()));
  }
  const std::vector<double> w(samples.size(), 1.0);
  return std::max(0.0, WeightedLine(samples, w, /*through_origin=*/false).second);
}

Calibration CalibrationOnNode(const Calibration& calibration, const Scenario& scenario) {
  Calibration c = calibration;
  const double threads = std::max(1, calibration.threads);
  auto usable = [threads](double cpus) { return cpus > 0 ? std::min(threads, cpus) : threads; };
  const double measured_on = usable(calibration.node_cpus);
  const double runs_on = usable(scenario.node_cpus > 0 ? scenario.node_cpus / scenario.ranks_per_node : 0);
  if (measured_on != runs_on) {
    const double slower = measured_on / runs_on;
    c.node_cpus = runs_on;
    c.compute_s *= slower;
    c.backward_s *= slower;
    c.update_s_per_byte *= slower;
    c.reduce_s_per_byte *= slower;
  }
  // The slowest node's compute is what every BSP / DDP step waits for (one worker has
  // no others to be slower than).
  if (scenario.workers > 1) {
    c.compute_s /= scenario.slow_node_fraction;
    c.backward_s /= scenario.slow_node_fraction;
  }
  return c;
}

absl::StatusOr<Prediction> Predict(const Calibration& on_loopback, const Scenario& scenario) {
  absl::Status st = ValidateCalibration(on_loopback);
  if (!st.ok()) return st;
  st = ValidateScenario(scenario);
  if (!st.ok()) return st;
  const Calibration calibration = CalibrationOnNode(on_loopback, scenario);
  switch (scenario.strategy) {
    case Strategy::kPs:
      return PredictPs(calibration, scenario);
    case Strategy::kRing:
    case Strategy::kHalvingDoubling:
    case Strategy::kRecursiveDoubling:
    case Strategy::kAuto:
      return PredictAllReduce(calibration, scenario);
  }
  return absl::InvalidArgumentError("unknown strategy");
}

double SingleProcessStepSeconds(const Calibration& calibration, double model_bytes) {
  return calibration.compute_s + calibration.update_s_per_byte * model_bytes;
}

double Speedup(const Calibration& calibration, const Scenario& scenario,
               const Prediction& prediction) {
  if (!(prediction.step_s > 0)) return 0;
  Scenario baseline;  // One process on one node of the same share, full speed.
  baseline.node_cpus = scenario.node_cpus;
  return scenario.workers *
         SingleProcessStepSeconds(CalibrationOnNode(calibration, baseline), scenario.model_bytes) /
         prediction.step_s;
}

std::vector<int> PowersOfTwo(int max_workers) {
  std::vector<int> out;
  for (int n = 1; n > 0 && n <= max_workers; n *= 2) out.push_back(n);
  return out;
}

absl::StatusOr<std::vector<Curve>> PredictCurves(const Calibration& calibration,
                                                 const SweepOptions& options) {
  const std::vector<int> workers =
      options.workers.empty() ? PowersOfTwo(1024) : options.workers;
  Scenario base;
  base.model_bytes = options.model_bytes;
  base.link_bytes_per_s = options.link_bytes_per_s;
  base.link_latency_s = options.link_latency_s;
  base.master_link_bytes_per_s = options.master_link_bytes_per_s;
  base.path_limits = options.path_limits;
  base.overlap = options.overlap;
  base.node_cpus = options.node_cpus;
  base.slow_node_fraction = options.slow_node_fraction;

  // Each curve: a label and how to make its scenario for N workers.
  std::vector<std::pair<std::string, std::function<Scenario(int)>>> specs;
  for (int shards : options.shards) {
    if (shards < 1) return absl::InvalidArgumentError(absl::StrCat("shards = ", shards));
    specs.emplace_back(absl::StrCat("PS S=", shards), [base, shards](int n) {
      Scenario s = base;
      s.strategy = Strategy::kPs;
      s.workers = n;
      s.shards = shards;
      return s;
    });
  }
  if (options.colocated) {
    specs.emplace_back("PS S=N colocated", [base](int n) {
      Scenario s = base;
      s.strategy = Strategy::kPs;
      s.workers = n;
      s.shards = n;
      s.colocated = true;
      return s;
    });
  }
  for (Strategy strategy : {Strategy::kRing, Strategy::kHalvingDoubling}) {
    specs.emplace_back(StrategyName(strategy), [base, strategy](int n) {
      Scenario s = base;
      s.strategy = strategy;
      s.workers = n;
      return s;
    });
  }

  std::vector<Curve> curves;
  for (const auto& [label, make] : specs) {
    Curve curve;
    curve.label = label;
    for (int n : workers) {
      const Scenario s = make(n);
      absl::StatusOr<Prediction> p = Predict(calibration, s);
      if (!p.ok()) {
        return absl::Status(p.status().code(),
                            absl::StrCat(label, " at N=", n, ": ", p.status().message()));
      }
      curve.workers.push_back(n);
      curve.speedups.push_back(Speedup(calibration, s, *p));
      curve.predictions.push_back(*std::move(p));
    }
    curves.push_back(std::move(curve));
  }
  return curves;
}

std::vector<Crossover> FindCrossovers(const std::vector<Curve>& curves) {
  std::vector<Crossover> out;
  for (size_t i = 0; i < curves.size(); ++i) {
    for (size_t j = i + 1; j < curves.size(); ++j) {
      const Curve& a = curves[i];
      const Curve& b = curves[j];
      if (a.workers != b.workers || a.predictions.size() != a.workers.size() ||
          b.predictions.size() != b.workers.size()) {
        continue;
      }
      int last_sign = 0;  // -1: a faster, +1: b faster.
      size_t last_k = 0;
      for (size_t k = 0; k < a.workers.size(); ++k) {
        const double ta = a.predictions[k].step_s;
        const double tb = b.predictions[k].step_s;
        const double scale = std::max(std::abs(ta), std::abs(tb));
        int sign = 0;
        if (std::abs(ta - tb) > kTieTolerance * scale) sign = ta < tb ? -1 : 1;
        if (sign == 0) continue;
        if (last_sign != 0 && sign != last_sign) {
          Crossover x;
          x.faster_before = last_sign < 0 ? a.label : b.label;
          x.faster_after = last_sign < 0 ? b.label : a.label;
          x.workers_before = a.workers[last_k];
          x.workers = a.workers[k];
          const double d1 = a.predictions[last_k].step_s - b.predictions[last_k].step_s;
          const double d2 = ta - tb;
          const double x1 = std::log2(double(x.workers_before));
          const double x2 = std::log2(double(x.workers));
          x.workers_interpolated = std::exp2(x1 + d1 / (d1 - d2) * (x2 - x1));
          out.push_back(std::move(x));
        }
        last_sign = sign;
        last_k = k;
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<Crossover>> FindCrossovers(const Calibration& calibration,
                                                      const SweepOptions& options) {
  absl::StatusOr<std::vector<Curve>> curves = PredictCurves(calibration, options);
  if (!curves.ok()) return curves.status();
  return FindCrossovers(*curves);
}

}  // namespace ringside
