// Lab 3: 4 workers push their gradients to and pull the parameters from a master of
// one shard, then of 4 shards. Every byte of every worker passes through the one
// master; split into S shards, each carries 1/S of it.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/labs/labs.h"

namespace ringside {
namespace {

constexpr int kWorkers = 4;
constexpr int kSteps = 8;
constexpr int kWarmup = 2;

struct ShardTraffic {
  double busiest_mb = 0;  // Median over steps of the busiest shard's bytes in + out.
  double step_ms = 0;     // Median step of worker 0.
};

absl::StatusOr<ShardTraffic> RunPs(const LabContext& lab, int shards) {
  RINGSIDE_ASSIGN_OR_RETURN(
      LabJob job,
      RunLabJob(lab, absl::StrFormat("ps-%dshard", shards),
                With({"train", "--strategy=ps", absl::StrFormat("--workers=%d", kWorkers),
                      absl::StrFormat("--ps_shards=%d", shards), absl::StrFormat("--steps=%d", kSteps),
                      "--batch=32"},
                     LabCommonFlags())));
  ShardTraffic t;
  for (int s = 0; s < shards; ++s) {
    RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> m, JobMetrics(job, OutputOwner::kShard, s));
    t.busiest_mb = std::max(t.busiest_mb, MedianAfter(m, 0, [](const StepMetrics& r) {
                              return (r.bytes_received() + r.bytes_sent()) / 1e6;
                            }));
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> w0, JobMetrics(job, OutputOwner::kRank, 0));
  t.step_ms = MedianAfter(w0, kWarmup, [](const StepMetrics& r) { return r.step_ms(); });
  absl::FPrintF(lab.out, "    %d shard%s: the busiest shard moved %.2f MB per step (in + out); worker 0's median step %.0f ms\n",
                shards, shards == 1 ? "" : "s", t.busiest_mb, t.step_ms);
  return t;
}

}  // namespace

absl::StatusOr<LabVerdict> CheckMasterBottleneck(const LabContext& lab) {
  RINGSIDE_ASSIGN_OR_RETURN(ShardTraffic one, RunPs(lab, 1));
  RINGSIDE_ASSIGN_OR_RETURN(ShardTraffic four, RunPs(lab, kWorkers));
  const double ratio = one.busiest_mb / std::max(four.busiest_mb, 1e-9);
  LabVerdict v;
  // Each shard owns a byte-balanced slice: 4 shards carry a quarter each, within the
  // framing of the chunks.
  v.shown = ratio > 3.6 && ratio < 4.4;
  v.effect = absl::StrFormat(
      "%d workers, 1 shard: master moved %.1f MB/step; %d shards: %.1f MB each (%.2fx less)", kWorkers,
      one.busiest_mb, kWorkers, four.busiest_mb, ratio);
  return v;
}

}  // namespace ringside
