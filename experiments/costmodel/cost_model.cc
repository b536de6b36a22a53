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
#include "experiments/cluster/node_traffic.h"
#include "ps_server/shard.h"

namespace ringside {
namespace {

// The reducer's defaults (PyTorch's, ddp_ring/reducer.h): the buckets the model assumes DDP uses.
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

// The all-reduce algorithm `strategy` runs for a bucket of `bytes` on n ranks (kAuto:
// what the process group's auto picks for that size).
AllReduceAlgorithm AlgorithmFor(Strategy strategy, int n, double bytes) {
  switch (strategy) {
    case Strategy::kAuto:
      return ResolveAllReduceAlgorithm(AllReduceAlgorithm::kAuto, n, static_cast<int64_t>(bytes));
    case Strategy::kHalvingDoubling: return AllReduceAlgorithm::kHalvingDoubling;
    case Strategy::kRecursiveDoubling: return AllReduceAlgorithm::kRecursiveDoubling;
    default: return AllReduceAlgorithm::kRing;
  }
}

AllReduceCoefficients CoefficientsOf(AllReduceAlgorithm algorithm, int n) {
  switch (algorithm) {
    case AllReduceAlgorithm::kHalvingDoubling: return HalvingDoublingCoefficients(n);
    case AllReduceAlgorithm::kRecursiveDoubling: return RecursiveDoublingCoefficients(n);
    default: return RingCoefficients(n);
  }
}

// One step of an all-reduce schedule on ranks laid out node by node (rank r on node
// r / g), in bytes per byte of the bucket, repeated `times` times. All messages of a
// step travel at once; the step ends when the slower of its two paths is done.
struct LayoutStep {
  double nic = 0;      // Through the busiest node's link, the larger direction.
  double intra = 0;    // On the busiest rank's intra-node path, the larger direction.
  bool inter = false;  // Some message of the step crosses nodes.
  bool local = false;  // Some message stays inside a node.
  int times = 1;
};

struct Message {
  int from = 0;
  int to = 0;
  double bytes = 0;  // Per byte of the bucket.
};

// An algorithm's steps on one layout, and what its busiest node's link carries over
// all of them, each way, per byte of the bucket.
struct LayoutSchedule {
  std::vector<LayoutStep> steps;
  double nic_bytes = 0;
};

// Adds `messages`, sent `times` times, to `schedule` as one step.
void Tally(const std::vector<Message>& messages, int ranks, int per_node, int times,
           std::vector<double>* node_out_total, std::vector<double>* node_in_total,
           LayoutSchedule* schedule) {
  const int nodes = (ranks + per_node - 1) / per_node;
  std::vector<double> node_out(nodes), node_in(nodes), rank_out(ranks), rank_in(ranks);
  LayoutStep step;
  step.times = times;
  for (const Message& m : messages) {
    if (m.from / per_node == m.to / per_node) {
      rank_out[m.from] += m.bytes;
      rank_in[m.to] += m.bytes;
      step.local = true;
    } else {
      node_out[m.from / per_node] += m.bytes;
      node_in[m.to / per_node] += m.bytes;
      step.inter = true;
    }
  }
  for (int k = 0; k < nodes; ++k) {
    step.nic = std::max({step.nic, node_out[k], node_in[k]});
    (*node_out_total)[k] += times * node_out[k];
    (*node_in_total)[k] += times * node_in[k];
    schedule->nic_bytes = std::max({schedule->nic_bytes, (*node_out_total)[k], (*node_in_total)[k]});
  }
  for (int r = 0; r < ranks; ++r) step.intra = std::max({step.intra, rank_out[r], rank_in[r]});
  schedule->steps.push_back(step);
}

// The ring (ddp_ring: rank r sends to r + 1): 2(N-1) identical steps of M/N per rank.
LayoutSchedule RingSchedule(int n, int per_node) {
  LayoutSchedule schedule;
  if (n <= 1) return schedule;
  std::vector<Message> messages;
  for (int r = 0; r < n; ++r) messages.push_back({r, (r + 1) % n, 1.0 / n});
  const int nodes = (n + per_node - 1) / per_node;
  std::vector<double> out(nodes), in(nodes);
  Tally(messages, n, per_node, 2 * (n - 1), &out, &in, &schedule);
  return schedule;
}

// Halving-doubling and recursive doubling as ddp_ring runs them: ranks r >= p (p the
// largest power of two <= N) fold into r - p first and get the result back last;
// halving-doubling halves with the farthest partner first (mask p/2: half the bucket)
// and retraces; recursive doubling swaps the whole bucket with r ^ 1, r ^ 2, ...
LayoutSchedule FoldingSchedule(int n, int per_node, bool halving) {
  LayoutSchedule schedule;
  if (n <= 1) return schedule;
  const int p = 1 << FloorLog2(n);
  const int nodes = (n + per_node - 1) / per_node;
  std::vector<double> out(nodes), in(nodes);
  auto fold = [&](bool into) {
    std::vector<Message> messages;
    for (int r = p; r < n; ++r) messages.push_back(into ? Message{r, r - p, 1} : Message{r - p, r, 1});
    Tally(messages, n, per_node, 1, &out, &in, &schedule);
  };
  auto exchange = [&](int mask, double bytes) {
    std::vector<Message> messages;
    for (int r = 0; r < p; ++r) messages.push_back({r, r ^ mask, bytes});
    Tally(messages, n, per_node, 1, &out, &in, &schedule);
  };
  if (p != n) fold(/*into=*/true);
  if (halving) {
    for (int mask = p / 2; mask >= 1; mask /= 2) exchange(mask, double(mask) / p);
    for (int mask = 1; mask < p; mask *= 2) exchange(mask, double(mask) / p);
  } else {
    for (int mask = 1; mask < p; mask *= 2) exchange(mask, 1);
  }
  if (p != n) fold(/*into=*/false);
  return schedule;
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
  if (s.strategy == Strategy::kPs && s.worker_summers) {
    if (!s.ps_summation || s.colocated || s.ranks_per_node != 1 || s.busiest_shard_fraction > 0) {
      return absl::InvalidArgumentError(
          "worker_summers: summation servers (ps_summation), not colocated, one worker a node, balanced slices");
    }
    if (s.shards < 0 || s.shards >= s.workers) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker_summers with shards = ", s.shards, ": need 0 <= shards < workers = ", s.workers));
    }
  } else if (s.strategy == Strategy::kPs && s.shards < 1) {
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
  if (!IsFiniteNonNegative(s.intra_node_bytes_per_s) || !std::isfinite(s.intra_node_latency_s) ||
      (s.intra_node_latency_s < 0 && s.intra_node_latency_s != -1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "intra_node_bytes_per_s = %g, intra_node_latency_s = %g: need a rate >= 0 and a "
        "latency >= 0 (or -1: the link's)",
        s.intra_node_bytes_per_s, s.intra_node_latency_s));
  }
  if (!IsFiniteNonNegative(s.node_cpus) || s.ranks_per_node < 1 ||
      !(s.slow_node_fraction > 0 && s.slow_node_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node_cpus = %g, ranks_per_node = %d, slow_node_fraction = %g: need node_cpus >= 0, "
        "ranks_per_node >= 1 and 0 < slow_node_fraction <= 1",
        s.node_cpus, s.ranks_per_node, s.slow_node_fraction));
  }
  if (!s.lossy_buckets.empty() && s.lossy_buckets.size() != s.bucket_bytes.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("%d lossy bucket payloads for %d buckets",
                                                      s.lossy_buckets.size(), s.bucket_bytes.size()));
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

// The largest component of communication.
std::string CommBottleneck(double latency_s, double wire_s, const char* wire_name, double reduction_s) {
  if (latency_s >= wire_s && latency_s >= reduction_s) return "latency";
  if (reduction_s > wire_s) return "reduction";
  return wire_name;
}

// Sets p's comm_bottleneck, and its bottleneck: the largest of the step's parts, for
// communication its largest component.
void SetBottleneck(Prediction* p, double latency_s, double wire_s, const char* wire_name,
                   double reduction_s) {
  p->comm_bottleneck = CommBottleneck(latency_s, wire_s, wire_name, reduction_s);
  if (p->compute_s >= p->comm_s && p->compute_s >= p->update_s) {
    p->bottleneck = "compute";
  } else if (p->update_s >= p->comm_s) {
    p->bottleneck = "update";
  } else {
    p->bottleneck = p->comm_bottleneck;
  }
}

}  // namespace

const PathCalibration& PushPullPath(const Calibration& c, const Scenario& s) {
  return s.ps_tcp && c.push_pull_tcp.bytes_per_s > 0 ? c.push_pull_tcp : c.push_pull;
}

namespace {

// The intra-node path of `scenario` as a step sees it (the link's where not given).
EffectiveLink IntraNodeLink(const PathCalibration& path, const Scenario& s, int wire_trips) {
  return Effective(path, s.intra_node_bytes_per_s > 0 ? s.intra_node_bytes_per_s : s.link_bytes_per_s,
                   s.intra_node_latency_s >= 0 ? s.intra_node_latency_s : s.link_latency_s,
                   s.path_limits, wire_trips);
}

// One pass of DDP's buckets against a backward (BucketPass::Run): the step's
// communication by part, summed over the buckets.
struct AllReduceSchedule {
  double latency = 0, wire = 0, intra = 0, reduce = 0, busiest_bytes = 0;
  double rank_at = 0;  // The training thread, after its last bucket's update.
  double stolen = 0;   // Wall time the transfers took from a backward of the given length.
};

// DDP's buckets all-reduced in launch order on one process group (a FIFO), each launched
// when backward has produced it (PredictAllReduce). Holds references to its arguments,
// which must outlive it; makes each algorithm's schedule once, on first use, so it is
// not thread-safe.
class BucketPass {
 public:
  // `steal_s_per_cpu_s`: the wall time a second of the transfers' CPU takes from backward.
  BucketPass(const Calibration& c, const Scenario& s, const EffectiveLink& link, const EffectiveLink& intra,
             const std::vector<double>& buckets, double steal_s_per_cpu_s)
      : c_(c), s_(s), link_(link), intra_(intra), buckets_(buckets), steal_s_per_cpu_s_(steal_s_per_cpu_s) {}

  // One pass of the buckets against a backward of `backward` seconds (from its start).
  AllReduceSchedule Run(double backward) {
    const int n = s_.workers;
    const double m = s_.model_bytes;
    AllReduceSchedule out;
    double produced = 0;
    double comm_free_at = 0;  // When the process group finishes its queue.
    out.rank_at = backward;
    // --compress: the wire carries `wire` bytes per float32 byte, on the ring; the sums
    // (decode and add) still touch every value (gamma), and each rank encodes and
    // decodes every value of the bucket once, on the ring's thread (serial with its
    // steps, as the sums are).
    const double wire = WireBytesPerValue(s_.wire_format) / 4.0;
    const double codec_s_per_byte = CodecSecondsPerValue(c_, s_.wire_format) / sizeof(float);
    for (size_t i = 0; i < buckets_.size(); ++i) {
      const double b = buckets_[i];
      produced += b;
      const double ready = s_.overlap ? backward * std::min(1.0, produced / m) : backward;
      double bucket_s = 0, red = 0, sent = 0;
      if (!s_.lossy_buckets.empty()) {
        Lossy(s_.lossy_buckets[i], &bucket_s, &red, &sent, &out);
      } else {
        const AllReduceAlgorithm algorithm = wire < 1 ? AllReduceAlgorithm::kRing : AlgorithmFor(s_.strategy, n, b);
        bucket_s = RunSteps(ScheduleFor(algorithm), b * wire, &out);
        const AllReduceCoefficients k = CoefficientsOf(algorithm, n);
        red = k.reduction * b * c_.reduce_s_per_byte + b * codec_s_per_byte;
        sent = k.bytes * b * wire;
      }
      out.reduce += red;
      const double start = std::max(comm_free_at, ready);
      comm_free_at = start + bucket_s + red;
      // The bucket's CPU, spread evenly over its transfer; the part before backward ends.
      const double cpu_wall = c_.allreduce_cpu_s_per_byte * sent * steal_s_per_cpu_s_;
      if (cpu_wall > 0 && comm_free_at > start) {
        const double inside_backward = std::clamp(backward - start, 0.0, comm_free_at - start);
        out.stolen += cpu_wall * inside_backward / (comm_free_at - start);
      }
      out.rank_at = std::max(out.rank_at, comm_free_at) + c_.update_s_per_byte * b;
    }
    return out;
  }

 private:
  // The schedule `a` runs on the node-by-node layout, made on first use.
  const LayoutSchedule& ScheduleFor(AllReduceAlgorithm a) {
    const int n = s_.workers;
    const int i = a == AllReduceAlgorithm::kHalvingDoubling    ? 1
                  : a == AllReduceAlgorithm::kRecursiveDoubling ? 2
                                                                : 0;
    if (!made_[i]) {
      schedules_[i] = i == 0 ? RingSchedule(n, s_.ranks_per_node)
                             : FoldingSchedule(n, s_.ranks_per_node, /*halving=*/i == 1);
      made_[i] = true;
    }
    return schedules_[i];
  }

  // A bucket under --compress=topk|powersgd: its collectives' time (`bucket_s`, added to
  // `out` as RunSteps does), its reductions and encode / decode (`red`) and the bytes a
  // rank sends (`sent`). Top-k: a ring all-gather of N blocks of 2k floats moves what the
  // ring all-reduce of N k floats does (its N - 1 steps counted as the all-reduce's
  // 2(N - 1): the latency twice); its encode and decode per value of the bucket.
  // PowerSGD: each all-reduce on the algorithm the strategy picks for its size, its
  // reduction as a plain all-reduce's, and its encode and decode per flop of its GEMMs.
  void Lossy(const LossyPayload& lp, double* bucket_s, double* red, double* sent, AllReduceSchedule* out) {
    const int n = s_.workers;
    if (lp.gather_floats > 0) {
      const double as_allreduce = n * lp.gather_floats * sizeof(float) / 2.0;
      *bucket_s = RunSteps(ScheduleFor(AllReduceAlgorithm::kRing), as_allreduce, out);
      *sent = (n - 1) * lp.gather_floats * sizeof(float);
      *red = lp.select_values * c_.topk_codec_s_per_value;
      return;
    }
    for (int64_t floats : lp.reduce_floats) {
      if (floats <= 0) continue;
      const double bytes = floats * sizeof(float);
      const AllReduceAlgorithm algorithm = AlgorithmFor(s_.strategy, n, bytes);
      *bucket_s += RunSteps(ScheduleFor(algorithm), bytes, out);
      const AllReduceCoefficients k = CoefficientsOf(algorithm, n);
      *red += k.reduction * bytes * c_.reduce_s_per_byte;
      *sent += k.bytes * bytes;
    }
    *red += lp.gemm_flops * c_.powersgd_codec_s_per_flop;
  }

  // Adds a bucket of `b` bytes running `steps` to `out`'s latency, wire, intra-node time
  // and busiest bytes; returns the bucket's transfer time. Every step costs the slower of
  // its inter-node part (alpha + the busiest link's bytes / B) and its intra-node part.
  double RunSteps(const LayoutSchedule& steps, double b, AllReduceSchedule* out) const {
    double bucket_s = 0;
    out->busiest_bytes += steps.nic_bytes * b;
    for (const LayoutStep& step : steps.steps) {
      const double across = step.inter ? link_.alpha_s + step.nic * b / link_.bytes_per_s : 0;
      const double inside = step.local ? intra_.alpha_s + step.intra * b / intra_.bytes_per_s : 0;
      if (across >= inside) {
        out->latency += step.times * link_.alpha_s;
        out->wire += step.times * (across - link_.alpha_s);
      } else {
        out->latency += step.times * intra_.alpha_s;
        out->intra += step.times * (inside - intra_.alpha_s);
      }
      bucket_s += step.times * std::max(across, inside);
    }
    return bucket_s;
  }

  const Calibration& c_;
  const Scenario& s_;
  const EffectiveLink& link_;
  const EffectiveLink& intra_;
  const std::vector<double>& buckets_;
  const double steal_s_per_cpu_s_;
  LayoutSchedule schedules_[3];
  bool made_[3] = {false, false, false};
};

// The step DDP takes given its buckets' schedule `sched` and the wall time `stolen`
// from backward by their CPU (PredictAllReduce).
Prediction AllReducePrediction(const Calibration& c, double m, double forward, double stolen,
                               const AllReduceSchedule& sched) {
  const double latency_total = sched.latency, wire_total = sched.wire, intra_total = sched.intra,
               reduce_total = sched.reduce, busiest_bytes = sched.busiest_bytes, rank_at = sched.rank_at;
  Prediction p;
  p.comm_cpu_s = stolen;
  p.compute_s = c.compute_s + stolen;
  p.update_s = c.update_s_per_byte * m;
  p.step_s = forward + rank_at;
  p.comm_s = std::max(0.0, p.step_s - p.compute_s - p.update_s);
  p.comm_total_s = latency_total + wire_total + intra_total + reduce_total;
  p.busiest_node_bytes_in = p.busiest_node_bytes_out = busiest_bytes;
  if (intra_total > wire_total) {
    SetBottleneck(&p, latency_total, intra_total, "intra-node", reduce_total);
  } else {
    SetBottleneck(&p, latency_total, wire_total, "worker link", reduce_total);
  }
  return p;
}

// DDP: buckets all-reduced in launch order on one process group (a FIFO), each launched
// when backward has produced it (gradient bytes assumed to appear at a uniform rate
// during backward); after backward the rank waits for each bucket in order and steps
// SGD on it. Each bucket runs its algorithm's schedule on the node-by-node layout
// (RingSchedule, FoldingSchedule): every step costs the slower of its inter-node part
// (alpha + the busiest link's bytes / B) and its intra-node part.
absl::StatusOr<Prediction> PredictAllReduce(const Calibration& c, const Scenario& s) {
  const int n = s.workers;
  const bool hd = s.strategy == Strategy::kHalvingDoubling;
  const PathCalibration& path =
      (hd && c.halving_doubling.bytes_per_s > 0) ? c.halving_doubling : c.allreduce;
  const EffectiveLink link = Effective(path, s.link_bytes_per_s, s.link_latency_s,
                                       s.path_limits, /*wire_trips=*/1);
  const EffectiveLink intra = IntraNodeLink(path, s, /*wire_trips=*/1);
  const double m = s.model_bytes;
  if (n > 1 && m > 0) {
    absl::Status st = NeedBandwidth(link, hd ? "halving-doubling" : "all-reduce");
    if (st.ok() && s.ranks_per_node > 1) st = NeedBandwidth(intra, "intra-node");
    if (!st.ok()) return st;
  }

  const std::vector<double> buckets = s.bucket_bytes.empty() ? DdpBucketBytes({}, m, 0, 0)
                                                             : s.bucket_bytes;
  const double forward = c.compute_s - c.backward_s;
  // Communication's CPU: on a node share the compute already fills (a rank's share at
  // most its BLAS threads), the transfers take the CPU they cost from the same quota,
  // at wall time cpu / share. Those that overlap backward delay it.
  const double rank_cpus = s.node_cpus / s.ranks_per_node;
  const double steal_s_per_cpu_s =
      s.node_cpus > 0 && rank_cpus <= std::max(1, c.threads) ? 1.0 / rank_cpus : 0.0;
  BucketPass pass(c, s, link, intra, buckets, steal_s_per_cpu_s);
  // Backward lengthened by what its overlapping transfers take, once re-scheduled
  // (a second pass against the longer backward; the CPU taken changes little).
  AllReduceSchedule sched = pass.Run(c.backward_s);
  const double stolen = sched.stolen;
  if (stolen > 0) sched = pass.Run(c.backward_s + stolen);
  return AllReducePrediction(c, m, forward, stolen, sched);
}

// The paths a PS step's transfers take (PredictPs): a worker node's link, a shard-hosting
// node's link (the master link where one is given), and the intra-node path.
struct PsLinks {
  EffectiveLink worker, server, intra;
};

// What the busiest nodes of a PS step carry (PsTraffic): one-way transfer times of the
// busiest node of each kind, each direction, and what the busiest node does.
struct PsLoad {
  double worker_s = 0;  // A node's link, where the node hosts no shard.
  double server_s = 0;  // The link of a node that hosts shards.
  double intra_s = 0;   // The busiest rank's intra-node path.
  double busiest_bytes = 0;  // Through the busiest node's link, each direction.
  double slice = 0;          // Parameter bytes the busiest shard-hosting node updates.
  double calls = 1;          // Push-pull calls the busiest node issues plus serves.
  // Bytes the PS's ends on a node send plus receive per step (every call goes through
  // an end, a shard beside its worker too): the busiest node that computes (its
  // workers' ends and the ends of the shards it hosts), and the busiest standalone
  // server node (its shards' ends; 0: none).
  double compute_node_end_bytes = 0;
  double server_node_end_bytes = 0;
  bool every_node_hosts = false;
  bool one_node = false;
};

// Seconds `bytes` take on `link` (0 where there are none); an error naming `what` where
// the link has no bandwidth (NeedBandwidth).
absl::StatusOr<double> TimeOn(const EffectiveLink& link, double bytes, const char* what) {
  if (!(bytes > 0)) return 0.0;
  absl::Status st = NeedBandwidth(link, what);
  if (!st.ok()) return st;
  return bytes / link.bytes_per_s;
}

// Standalone shards: workers packed on a node share its link (node_traffic.h
// PsWorkerNicBytesPerStep); each server node holds one shard (PsServerNicBytesPerStep).
absl::StatusOr<PsLoad> StandalonePsLoad(const Scenario& s, const PsLinks& links) {
  const int n = s.workers;
  const int shards = s.shards;
  const double m = s.model_bytes;
  PsLoad load;
  const double worker_bytes = PsWorkerNicBytesPerStep(std::min(s.ranks_per_node, n), m);
  const double fraction = s.busiest_shard_fraction > 0 ? s.busiest_shard_fraction : 1.0 / shards;
  // The busiest server's link: every worker's push of its share, and the reply.
  const double server_bytes = s.busiest_shard_fraction > 0 ? n * fraction * m : PsServerNicBytesPerStep(n, shards, 1, m);
  absl::StatusOr<double> t = TimeOn(links.worker, worker_bytes, "push-pull");
  if (!t.ok()) return t.status();
  load.worker_s = *t;
  t = TimeOn(links.server, server_bytes, "push-pull (server side)");
  if (!t.ok()) return t.status();
  load.server_s = *t;
  load.busiest_bytes = std::max(worker_bytes, server_bytes);
  load.slice = fraction * m;
  load.calls = std::max(shards, n);  // A worker issues S calls; a server node serves N.
  // A worker's end pushes M and pulls M; a server's takes its share from every worker
  // and sends it back.
  load.compute_node_end_bytes = std::min(s.ranks_per_node, n) * 2 * m;
  load.server_node_end_bytes = 2 * n * fraction * m;
  return load;
}

// Colocated shards: they live in workers 0 .. H-1, shard j in worker j mod H. A node of
// w workers whose shards hold a fraction F of the model: its workers send (1 - F) M each
// to shards elsewhere and get as much back; its shards take F M from each of the N - w
// workers elsewhere and send as much back. Inside it, a rank sends its pushes to the
// node's other shards, (F - f) M, and its own shards' replies to the node's other
// workers, (w - 1) f M.
absl::StatusOr<PsLoad> ColocatedPsLoad(const Scenario& s, const PsLinks& links) {
  const int n = s.workers;
  const int shards = s.shards;
  const int per_node = s.ranks_per_node;
  const double m = s.model_bytes;
  PsLoad load;
  int hosts = std::min(shards, n);
  if (s.colocated_hosts > 0) hosts = std::min(hosts, s.colocated_hosts);
  auto held = [&](int rank) -> double {  // Fraction of the model worker `rank` hosts.
    if (rank >= hosts) return 0;
    return double(shards / hosts + (rank < shards % hosts ? 1 : 0)) / shards;
  };
  const int nodes = (n + per_node - 1) / per_node;
  load.one_node = nodes == 1;
  load.every_node_hosts = (nodes - 1) * per_node < hosts;
  for (int k = 0; k < nodes; ++k) {
    const int lo = k * per_node, hi = std::min(n, lo + per_node);
    const int w = hi - lo;
    double f_node = 0;
    for (int r = lo; r < hi; ++r) f_node += held(r);
    const double nic_bytes = w * (1 - f_node) * m + (n - w) * f_node * m;
    // Its workers' ends push and pull M each; its shards' ends take F M from every
    // worker and send it back.
    load.compute_node_end_bytes = std::max(load.compute_node_end_bytes, w * 2 * m + 2 * n * f_node * m);
    const bool hosting = lo < hosts;
    absl::StatusOr<double> t = TimeOn(hosting ? links.server : links.worker, nic_bytes,
                                      hosting ? "push-pull (server side)" : "push-pull");
    if (!t.ok()) return t.status();
    (hosting ? load.server_s : load.worker_s) = std::max(hosting ? load.server_s : load.worker_s, *t);
    load.busiest_bytes = std::max(load.busiest_bytes, nic_bytes);
    for (int r = lo; r < hi; ++r) {
      t = TimeOn(links.intra, (f_node - held(r)) * m + (w - 1) * held(r) * m, "intra-node");
      if (!t.ok()) return t.status();
      load.intra_s = std::max(load.intra_s, *t);
    }
  }
  // The busiest host holds ceil(S / H) shards.
  const int on_busiest = (shards + hosts - 1) / hosts;
  load.slice = double(on_busiest) / shards * m;
  // The host's worker issues S calls; its shards serve every worker, itself included.
  load.calls = shards + double(n) * on_busiest;
  return load;
}

// BytePS's summation servers with a summer in each worker (one worker a node): k
// dedicated servers hold x = 2(n-1)M/D each, each worker's summer y = (n-k)M/D, D =
// n^2 + kn - 2k (PsLayout::ShardWeights). A worker's link carries its pushes to the
// others' parts, M - y, and its summer's replies to the n - 1 others, (n-1) y: M +
// (n-2) y each way; a server's, n x each way.
absl::StatusOr<PsLoad> WorkerSummersPsLoad(const Scenario& s, const PsLinks& links) {
  const double n = s.workers, k = s.shards, m = s.model_bytes;
  const double d = n * n + k * n - 2 * k;
  const double x = 2 * (n - 1) * m / d, y = (n - k) * m / d;
  PsLoad load;
  const double worker_bytes = m + (n - 2) * y;
  absl::StatusOr<double> t = TimeOn(links.worker, worker_bytes, "push-pull");
  if (!t.ok()) return t.status();
  load.worker_s = *t;
  t = TimeOn(links.server, k > 0 ? n * x : 0, "push-pull (server side)");
  if (!t.ok()) return t.status();
  load.server_s = *t;
  load.busiest_bytes = std::max(worker_bytes, k > 0 ? n * x : 0.0);
  load.slice = k > 0 ? x : y;  // x >= y for n >= 2.
  // A worker's end pushes and pulls M; its summer's takes y from each of the n workers
  // and sends it back; a server's, x from each.
  load.compute_node_end_bytes = 2 * m + 2 * n * y;
  load.server_node_end_bytes = k > 0 ? 2 * n * x : 0;
  load.calls = k + n;          // A worker calls every shard; a server serves n.
  load.every_node_hosts = k == 0;
  load.one_node = s.workers == 1 && s.shards == 0;
  return load;
}

// The PS step given its busiest nodes' `load`: latency of the calls, the one-way time
// (its last chunk unpipelined; overlapped with backward under ps_overlap), the shards'
// aggregation and update, and the bottleneck.
Prediction PsPrediction(const Calibration& c, const Scenario& s, const PsLinks& links, const PsLoad& load) {
  const int n = s.workers;
  const int shards = s.shards;
  const int per_node = s.ranks_per_node;
  const double m = s.model_bytes;
  // A job on one node with its shards inside: every call stays on the intra-node path.
  const double alpha = (load.one_node && per_node > 1) ? links.intra.alpha_s : links.worker.alpha_s;
  const double latency_s = alpha + (load.calls - 1) * c.push_pull_per_call_s;
  // Communication's CPU on emulated nodes (a node's share at most its compute's
  // threads: the compute fills it): the ends on a computing node take what they cost
  // from its compute, wall time cpu / share; a standalone server node cannot serve its
  // bytes faster than its share does their CPU.
  const double kappa = s.ps_tcp && c.push_pull_tcp_cpu_s_per_byte > 0 ? c.push_pull_tcp_cpu_s_per_byte
                                                                       : c.push_pull_cpu_s_per_byte;
  double stolen = 0, server_cpu_s = 0;
  if (s.node_cpus > 0) {
    if (s.node_cpus / per_node <= std::max(1, c.threads)) {
      stolen = kappa * load.compute_node_end_bytes / s.node_cpus;
    }
    server_cpu_s = kappa * load.server_node_end_bytes / s.node_cpus;
  }
  const double server_s = std::max(load.server_s, server_cpu_s);
  Prediction p;
  p.comm_cpu_s = stolen;
  p.compute_s = c.compute_s + stolen;
  const double backward_s = c.backward_s + stolen;
  const double one_way_s = std::max({load.worker_s, server_s, load.intra_s});
  // The busiest part's bytes (with worker summers the parts differ; load.slice).
  const double slice_bytes = s.worker_summers ? load.slice : m / shards;
  const double unpipelined =
      s.chunk_bytes > 0 && slice_bytes > 0 ? std::min(s.chunk_bytes, slice_bytes) / slice_bytes : 0;
  p.comm_s = s.ps_overlap
                 ? latency_s + std::max(0.0, one_way_s - backward_s) + one_way_s * unpipelined
                 : latency_s + one_way_s * (1 + unpipelined);
  // --compress: the worker encodes its M / 4 gradient values and decodes as many
  // replies; the busiest shard (or summer: load.slice) decodes N slices and encodes a
  // reply for each worker; both serial with the transfers, on their nodes' CPU
  // (docs/cost_model.md).
  const double codec_s = CodecSecondsPerValue(c, s.wire_format) * (m + n * load.slice) / sizeof(float);
  // On emulated nodes the step waits for the slowest of the N workers' streams, whose
  // pace on a node share varies step to step (Calibration::ps_join_sigma).
  // The wait scales with a worker's own stream (its node's link), not with a hot
  // server's, whose link is shared by every worker's stream and paces them all; and
  // with the part of it backward does not hide (pushes during backward).
  const double stream_s = load.one_node ? load.intra_s : load.every_node_hosts ? load.server_s : load.worker_s;
  const double exposed_s = s.ps_overlap ? std::max(0.0, stream_s - backward_s) : stream_s;
  p.join_s = s.node_cpus > 0 && n > 1 ? c.ps_join_sigma * ExpectedMaxOfNormals(n) * exposed_s : 0;
  p.comm_s += codec_s + p.join_s;
  p.comm_total_s = latency_s + one_way_s * (1 + unpipelined) + codec_s + p.join_s;
  // Under BSP a shard sums N pushes into its accumulator (with one worker it steps on
  // the pushed gradient directly), then steps SGD once on its slice.
  const double aggregate_s = n > 1 ? c.reduce_s_per_byte * n * load.slice : 0;
  // Summation servers: the worker steps the whole model once its mean is back.
  p.update_s = c.update_s_per_byte * (s.ps_summation ? m : load.slice) + aggregate_s;
  p.step_s = p.compute_s + p.comm_s + p.update_s;
  p.busiest_node_bytes_in = p.busiest_node_bytes_out = load.busiest_bytes;
  const char* wire_name = load.intra_s > std::max(load.worker_s, server_s) ? "intra-node"
                          : (server_s > load.worker_s && !load.every_node_hosts) ? "master link"
                                                                                       : "worker link";
  SetBottleneck(&p, latency_s, one_way_s, wire_name, 0);
  return p;
}

// PS under BSP with one combined, chunk-pipelined push-pull per shard per step. Nodes
// hold ranks_per_node workers each (rank r on node r / g); standalone shards have
// server nodes of their own; colocated shards live in workers 0 .. H-1, shard j in
// worker j mod H.
absl::StatusOr<Prediction> PredictPs(const Calibration& c, const Scenario& s) {
  const double server_wire =
      s.master_link_bytes_per_s > 0 ? s.master_link_bytes_per_s : s.link_bytes_per_s;
  const PathCalibration& path = PushPullPath(c, s);
  const PsLinks links{
      Effective(path, s.link_bytes_per_s, s.link_latency_s, s.path_limits, /*wire_trips=*/2),
      Effective(path, server_wire, s.link_latency_s, s.path_limits, /*wire_trips=*/2),
      IntraNodeLink(path, s, /*wire_trips=*/2)};
  // --compress (the TCP data plane): push-pulls carry 2-byte values, so the loads are
  // figured on the model's wire bytes; the slice the shards sum and step stays floats.
  const double wire = WireBytesPerValue(s.wire_format) / 4.0;
  Scenario on_wire = s;
  on_wire.model_bytes = s.model_bytes * wire;
  absl::StatusOr<PsLoad> load = s.worker_summers ? WorkerSummersPsLoad(on_wire, links)
                                : s.colocated    ? ColocatedPsLoad(on_wire, links)
                                                 : StandalonePsLoad(on_wire, links);
  if (!load.ok()) return load.status();
  load->slice /= wire;
  return PsPrediction(c, s, links, *load);
}

}  // namespace

double ExpectedMaxOfNormals(int n) {
  if (n <= 1) return 0;
  // Simpson's rule over [-10, 10]; the integrand is smooth and negligible outside.
  constexpr int kIntervals = 4000;
  constexpr double kLo = -10, kHi = 10, kH = (kHi - kLo) / kIntervals;
  double sum = 0;
  for (int i = 0; i <= kIntervals; ++i) {
    const double x = kLo + i * kH;
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double f = x * n * pdf * std::pow(cdf, n - 1);
    sum += f * (i == 0 || i == kIntervals ? 1 : (i % 2 == 1 ? 4 : 2));
  }
  return sum * kH / 3;
}

absl::Status ValidateCalibration(const Calibration& c) {
  const std::pair<const char*, double> fields[] = {
      {"compute_s", c.compute_s},
      {"backward_s", c.backward_s},
      {"update_s_per_byte", c.update_s_per_byte},
      {"reduce_s_per_byte", c.reduce_s_per_byte},
      {"allreduce_cpu_s_per_byte", c.allreduce_cpu_s_per_byte},
      {"push_pull_cpu_s_per_byte", c.push_pull_cpu_s_per_byte},
      {"push_pull_tcp_cpu_s_per_byte", c.push_pull_tcp_cpu_s_per_byte},
      {"fp16_codec_s_per_value", c.fp16_codec_s_per_value},
      {"bf16_codec_s_per_value", c.bf16_codec_s_per_value},
      {"topk_codec_s_per_value", c.topk_codec_s_per_value},
      {"powersgd_codec_s_per_flop", c.powersgd_codec_s_per_flop},
      {"ps_join_sigma", c.ps_join_sigma},
      {"raw_tcp_bytes_per_s", c.raw_tcp_bytes_per_s},
      {"model_bytes", c.model_bytes},
      {"node_cpus", c.node_cpus},
      {"push_pull_per_call_s", c.push_pull_per_call_s},
      {"push_pull.alpha_s", c.push_pull.alpha_s},
      {"push_pull.bytes_per_s", c.push_pull.bytes_per_s},
      {"push_pull_tcp.alpha_s", c.push_pull_tcp.alpha_s},
      {"push_pull_tcp.bytes_per_s", c.push_pull_tcp.bytes_per_s},
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

std::string TransportsBesideRawTcp(const Calibration& c) {
  const double raw = c.raw_tcp_bytes_per_s;
  if (!(raw > 0)) return "";
  const auto rate = [raw](double bytes_per_s) {
    return absl::StrFormat("%.2f GB/s (%.0f%%)", bytes_per_s / 1e9, 100 * bytes_per_s / raw);
  };
  std::string out = absl::StrFormat("raw TCP %.2f GB/s one way on loopback", raw / 1e9);
  if (c.push_pull.bytes_per_s > 0) absl::StrAppend(&out, "; PS push-pull over gRPC ", rate(c.push_pull.bytes_per_s));
  if (c.push_pull_tcp.bytes_per_s > 0) {
    absl::StrAppend(&out, c.push_pull.bytes_per_s > 0 ? ", over TCP " : "; PS push-pull over TCP ",
                    rate(c.push_pull_tcp.bytes_per_s));
  }
  if (c.allreduce.bytes_per_s > 0) absl::StrAppend(&out, "; ring all-reduce ", rate(c.allreduce.bytes_per_s));
  return out;
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
    // The codecs and lossy compressors: CPU-bound, measured in gamma's phase on the node.
    c.fp16_codec_s_per_value *= slower;
    c.bf16_codec_s_per_value *= slower;
    c.topk_codec_s_per_value *= slower;
    c.powersgd_codec_s_per_flop *= slower;
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

double CodecSecondsPerValue(const Calibration& c, WireFormat format) {
  switch (format) {
    case WireFormat::kFp16:
      return c.fp16_codec_s_per_value;
    case WireFormat::kBf16:
      return c.bf16_codec_s_per_value;
    case WireFormat::kFp32:
      break;
  }
  return 0;
}

double UsedBytesPerSecond(const Prediction& prediction) {
  if (!(prediction.comm_total_s > 0)) return 0;
  return std::max(prediction.busiest_node_bytes_in, prediction.busiest_node_bytes_out) /
         prediction.comm_total_s;
}

void UseRingsidePsSchedule(Scenario* scenario, double chunk_bytes) {
  scenario->ps_overlap = true;  // ps_strategy pushes chunks from backward's hooks.
  scenario->chunk_bytes = chunk_bytes > 0 ? chunk_bytes : kDefaultPsChunkBytes;
}

std::string DescribeRingsidePsSchedule(double chunk_bytes) {
  return absl::StrFormat(
      "PS pushes overlap backward (as ringside's PS worker does; %.0f KiB chunks, the last "
      "chunk's reply after every push)",
      (chunk_bytes > 0 ? chunk_bytes : kDefaultPsChunkBytes) / 1024.0);
}

std::vector<double> DdpBucketBytes(const std::vector<double>& layer_bytes, double model_bytes,
                                   double first_bucket_bytes, double bucket_cap_bytes) {
  const double first = first_bucket_bytes > 0 ? first_bucket_bytes : kFirstBucketBytes;
  const double cap = bucket_cap_bytes > 0 ? bucket_cap_bytes : kBucketCapBytes;
  std::vector<double> buckets;
  if (layer_bytes.empty()) {
    double left = model_bytes;
    while (left > 0) {
      buckets.push_back(std::min(buckets.empty() ? first : cap, left));
      left -= buckets.back();
    }
    return buckets;
  }
  // The reducer's own grouping (floats, rounded up), then each bucket's exact bytes.
  std::vector<ParamRange> ranges;
  std::vector<int64_t> starts;
  int64_t offset = 0;
  for (double b : layer_bytes) {
    const int64_t floats = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(b / sizeof(float))));
    ranges.push_back({offset, floats});
    starts.push_back(offset);
    offset += floats;
  }
  for (const Bucket& bucket : ComputeBuckets(ranges, static_cast<int64_t>(first),
                                             static_cast<int64_t>(cap))) {
    double bytes = 0;
    for (size_t i = 0; i < layer_bytes.size(); ++i) {
      if (starts[i] >= bucket.offset && starts[i] < bucket.offset + bucket.size) bytes += layer_bytes[i];
    }
    buckets.push_back(bytes);
  }
  return buckets;
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

namespace {

// One curve of a sweep: its label and how to make its scenario for N workers.
using CurveSpec = std::pair<std::string, std::function<Scenario(int)>>;

// The scenario every curve of a sweep starts from: the options' model, links, overlap,
// node shares and ranks per node, and DDP's buckets where the options give layer sizes
// or a bucket cap. Strategy and workers are left for the curves to set.
Scenario SweepBaseScenario(const SweepOptions& options) {
  Scenario base;
  base.model_bytes = options.model_bytes;
  base.link_bytes_per_s = options.link_bytes_per_s;
  base.link_latency_s = options.link_latency_s;
  base.master_link_bytes_per_s = options.master_link_bytes_per_s;
  base.path_limits = options.path_limits;
  base.overlap = options.overlap;
  base.wire_format = options.wire_format;
  base.node_cpus = options.node_cpus;
  base.slow_node_fraction = options.slow_node_fraction;
  base.ranks_per_node = options.ranks_per_node;
  base.intra_node_bytes_per_s = options.intra_node_bytes_per_s;
  base.intra_node_latency_s = options.intra_node_latency_s;
  if (!options.layer_bytes.empty() || options.bucket_cap_bytes > 0) {
    base.bucket_bytes = DdpBucketBytes(options.layer_bytes, options.model_bytes,
                                       /*first_bucket_bytes=*/0, options.bucket_cap_bytes);
  }
  return base;
}

// The sweep's curves in report order: one PS curve per options.shards entry (on
// ringside's PS schedule), "PS S=N colocated" if options.colocated, then ring and
// halving-doubling, each built from `base`. The PS curves' functions refer to
// `options`, which must outlive them. InvalidArgument for worker summers without
// standalone summation servers, or a shard count below 0 other than kShardsPerWorker.
absl::StatusOr<std::vector<CurveSpec>> CurveSpecs(const SweepOptions& options,
                                                  const Scenario& base) {
  Scenario ps = base;
  ps.strategy = Strategy::kPs;
  ps.wire_format = WireFormat::kFp32;  // simulate --compress: the DDP rows only (its help says so).
  ps.ps_summation = options.ps_summation;
  if (options.worker_summers && (!options.ps_summation || options.shards_colocated)) {
    return absl::InvalidArgumentError("worker summers are summation servers (--ps_mode=summation), not colocated");
  }
  UseRingsidePsSchedule(&ps, options.ps_chunk_bytes);
  const char* mode = options.ps_summation ? " summation" : "";

  std::vector<CurveSpec> specs;
  for (int shards : options.shards) {
    if (shards < 0 && shards != kShardsPerWorker) return absl::InvalidArgumentError(absl::StrCat("shards = ", shards));
    const bool colocated = options.shards_colocated;
    const bool summers = options.worker_summers;
    specs.emplace_back(absl::StrCat("PS S=", shards == kShardsPerWorker ? "N" : absl::StrCat(shards),
                                    colocated ? " colocated" : "", summers ? " + summers" : "", mode),
                       [ps, shards, colocated, summers, &options](int n) {
                         Scenario s = ps;
                         s.workers = n;
                         s.shards = shards == kShardsPerWorker ? n : shards;
                         s.colocated = colocated;
                         s.worker_summers = summers && s.shards < n;
                         if (!colocated && options.ps_placement != PsPlacement::kBalanced) {
                           s.busiest_shard_fraction =
                               BusiestShare(options.tensor_bytes, s.shards, options.ps_placement);
                         }
                         return s;
                       });
  }
  if (options.colocated) {
    specs.emplace_back(absl::StrCat("PS S=N colocated", mode), [ps](int n) {
      Scenario s = ps;
      s.workers = n;
      s.shards = n;
      s.colocated = true;
      return s;
    });
  }
  for (Strategy strategy : {Strategy::kRing, Strategy::kHalvingDoubling}) {
    // Compressed gradients run on the ring only (ddp_ring: CompressedRingAllReduce).
    if (base.wire_format != WireFormat::kFp32 && strategy != Strategy::kRing) continue;
    specs.emplace_back(StrategyName(strategy), [base, strategy](int n) {
      Scenario s = base;
      s.strategy = strategy;
      s.workers = n;
      return s;
    });
  }
  return specs;
}

// One curve: `label`, and the prediction and speedup of make(n) for each n of
// `workers`, in order. The first failing prediction's error, prefixed with
// "<label> at N=<n>: ".
absl::StatusOr<Curve> PredictCurve(const Calibration& calibration, const std::string& label,
                                   const std::function<Scenario(int)>& make,
                                   const std::vector<int>& workers) {
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
  return curve;
}

}  // namespace

absl::StatusOr<std::vector<Curve>> PredictCurves(const Calibration& calibration,
                                                 const SweepOptions& options) {
  const std::vector<int> workers =
      options.workers.empty() ? PowersOfTwo(1024) : options.workers;
  absl::StatusOr<std::vector<CurveSpec>> specs = CurveSpecs(options, SweepBaseScenario(options));
  if (!specs.ok()) return specs.status();

  std::vector<Curve> curves;
  for (const auto& [label, make] : *specs) {
    absl::StatusOr<Curve> curve = PredictCurve(calibration, label, make, workers);
    if (!curve.ok()) return curve.status();
    curves.push_back(*std::move(curve));
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
