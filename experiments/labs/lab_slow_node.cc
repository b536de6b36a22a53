// Lab 7: four emulated nodes of 0.4 CPU each, then node 1 at a quarter of that: DDP,
// a parameter server under BSP and under SSP:3. A collective (DDP) and a barrier (BSP)
// move at the pace of the slowest rank; the records say who it was.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "experiments/labs/labs.h"
#include "experiments/matrix/summary.h"
#include "experiments/netem/cpu_share.h"

namespace ringside {
namespace {

constexpr int kWorkers = 4;
constexpr int kSlow = 1;
constexpr int kSteps = 20;
constexpr int kWarmup = 3;
// Batch 2048: on the lab cluster's links (gige-cpu) a step must compute for longer than
// the single master's link takes to move 4 workers' 1 MB pushes and pulls (about 64 ms
// on the target) for a slow node to show; at 128 samples the links hid it. 5 steps an
// epoch, 4 epochs.
constexpr int kBatch = 2048;
constexpr int kStepsPerEpoch = 5;
constexpr double kNodeCpus = 0.4;  // The lab's own share (LabNodeCpus).

struct SlowRun {
  double step_ms = 0;   // Median over worker/rank 0's steps after warm-up.
  std::string late;     // Who the others waited for ("" when nobody clearly).
};

// `links`: LabClusterLinks's, the same for every job of the check.
absl::StatusOr<SlowRun> Run(const LabContext& lab, const std::string& name, const std::string& links,
                            const std::vector<std::string>& strategy, bool slow) {
  std::vector<std::string> args = With({"train"}, strategy);
  args = With(args, {absl::StrFormat("--workers=%d", kWorkers), absl::StrFormat("--steps=%d", kSteps),
                     absl::StrFormat("--batch=%d", kBatch), absl::StrCat("--node_cpus=", LabNodeCpus(lab, kNodeCpus)),
                     absl::StrCat("--network=", links)});
  if (slow) args.push_back(absl::StrFormat("--slow_node=%d:0.25", kSlow));
  RINGSIDE_ASSIGN_OR_RETURN(LabJob job, RunLabJob(lab, name, With(args, LabCommonFlags(kWorkers * kBatch * kStepsPerEpoch, kSteps / kStepsPerEpoch))));
  const bool ddp = strategy[0] == "--strategy=ddp";
  std::vector<std::vector<StepMetrics>> ranks, shards;
  for (int r = 0; r < kWorkers; ++r) {
    RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> m, JobMetrics(job, OutputOwner::kRank, r));
    m.erase(m.begin(), m.begin() + std::min<size_t>(kWarmup, m.size()));
    ranks.push_back(std::move(m));
  }
  if (!ddp) {
    RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> m, JobMetrics(job, OutputOwner::kShard, 0));
    m.erase(m.begin(), m.begin() + std::min<size_t>(kWarmup, m.size()));
    shards.push_back(std::move(m));
  }
  SlowRun r;
  r.step_ms = MedianAfter(ranks[0], 0, [](const StepMetrics& m) { return m.step_ms(); });
  const LateRanks late = ddp ? FindLateDdpRanks(ranks) : FindLatePsWorkers(ranks, shards);
  if (late.named) {
    r.late = absl::StrJoin(late.ranks, "+");
    absl::FPrintF(lab.out, "    median step %.0f ms; the others waited for %s %s (last in %.0f%% of the steps, %.0f ms each)\n",
                  r.step_ms, ddp ? "rank" : "worker", r.late, 100 * late.share, late.wait_ms);
  } else {
    absl::FPrintF(lab.out, "    median step %.0f ms; nobody was clearly late\n", r.step_ms);
  }
  return r;
}

}  // namespace

absl::StatusOr<LabVerdict> CheckSlowNode(const LabContext& lab) {
  if (absl::Status s = CheckCpuSharePrivileges(); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("lab 7 runs on emulated nodes, which needs root: ", s.message()));
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::string links, LabClusterLinks(lab, kLabCommonModel, kBatch, LabNodeCpus(lab, kNodeCpus)));
  const std::vector<std::string> ddp = {"--strategy=ddp"};
  const std::vector<std::string> bsp = {"--strategy=ps", "--ps_shards=1", "--ps_sync=bsp"};
  const std::vector<std::string> ssp = {"--strategy=ps", "--ps_shards=1", "--ps_sync=ssp:3"};
  RINGSIDE_ASSIGN_OR_RETURN(SlowRun ddp_even, Run(lab, "ddp-even", links, ddp, false));
  RINGSIDE_ASSIGN_OR_RETURN(SlowRun ddp_slow, Run(lab, "ddp-slow", links, ddp, true));
  RINGSIDE_ASSIGN_OR_RETURN(SlowRun bsp_even, Run(lab, "bsp-even", links, bsp, false));
  RINGSIDE_ASSIGN_OR_RETURN(SlowRun bsp_slow, Run(lab, "bsp-slow", links, bsp, true));
  RINGSIDE_ASSIGN_OR_RETURN(SlowRun ssp_slow, Run(lab, "ssp-slow", links, ssp, true));
  const double ddp_x = ddp_slow.step_ms / std::max(ddp_even.step_ms, 1e-9);
  const double bsp_x = bsp_slow.step_ms / std::max(bsp_even.step_ms, 1e-9);
  const double ssp_x = ssp_slow.step_ms / std::max(bsp_even.step_ms, 1e-9);
  const std::string slow = absl::StrCat(kSlow);
  LabVerdict v;
  v.shown = ddp_x >= 1.3 && bsp_x >= 1.3 && ddp_slow.late == slow && bsp_slow.late == slow;
  v.effect = absl::StrFormat(
      "node %d at a quarter of the CPU: DDP's step %.1fx slower (waiting for rank %s), BSP's "
      "%.1fx (waiting for worker %s); SSP:3's %.1fx (it may run 3 steps ahead, then waits too)",
      kSlow, ddp_x, ddp_slow.late.empty() ? "-" : ddp_slow.late, bsp_x,
      bsp_slow.late.empty() ? "-" : bsp_slow.late, ssp_x);
  return v;
}

}  // namespace ringside
