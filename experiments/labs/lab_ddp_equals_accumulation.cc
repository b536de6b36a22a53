// Lab 1: DDP on N ranks (per-rank batch b) against one process accumulating gradients
// over N micro-batches of b. Both sum the gradients of the same N x b samples before
// one optimizer step, so the parameters must agree to rounding.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "common/checkpoint.h"
#include "common/status_macros.h"
#include "common/trainer.h"
#include "experiments/labs/labs.h"

namespace ringside {
namespace {

constexpr int kRanks = 2;
constexpr int kSteps = 12;
constexpr double kTolerance = 1e-5;

}  // namespace

absl::StatusOr<LabVerdict> CheckDdpEqualsAccumulation(const LabContext& lab) {
  const std::vector<std::string> common = With(
      LabCommonFlags(), {absl::StrFormat("--steps=%d", kSteps), "--batch=16"});
  RINGSIDE_ASSIGN_OR_RETURN(
      LabJob ddp, RunLabJob(lab, "ddp", With({"train", "--strategy=ddp", absl::StrFormat("--workers=%d", kRanks)},
                                             common)));
  RINGSIDE_ASSIGN_OR_RETURN(
      LabJob acc, RunLabJob(lab, "accumulate",
                            With({"train", "--strategy=single", absl::StrFormat("--grad_accum=%d", kRanks)},
                                 common)));
  RINGSIDE_ASSIGN_OR_RETURN(Checkpoint a, ReadCheckpoint(ddp.dir + "/" + kCheckpointFile));
  RINGSIDE_ASSIGN_OR_RETURN(Checkpoint b, ReadCheckpoint(acc.dir + "/" + kCheckpointFile));
  if (a.params.size() != b.params.size() || a.params.empty()) {
    return absl::InternalError("the two runs saved models of different sizes");
  }
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < a.params.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a.params[i]) - b.params[i]));
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(b.params[i])));
  }
  const double relative = max_diff / std::max(max_abs, 1e-30);
  // The losses the two runs saw, step by step: DDP's is the mean over its ranks.
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> r0, JobMetrics(ddp, OutputOwner::kRank, 0));
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> r1, JobMetrics(ddp, OutputOwner::kRank, 1));
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> single, JobMetrics(acc, OutputOwner::kSingle));
  absl::FPrintF(lab.out, "  step   DDP loss (mean of %d ranks)   accumulation loss\n", kRanks);
  for (size_t s = 0; s < std::min({r0.size(), r1.size(), single.size()}); s += 4) {
    absl::FPrintF(lab.out, "  %4d   %.6f                     %.6f\n", s, (r0[s].loss() + r1[s].loss()) / 2,
                  single[s].loss());
  }
  LabVerdict v;
  v.shown = relative <= kTolerance && a.header.step() == b.header.step();
  v.effect = absl::StrFormat(
      "after %d steps, DDP on %d ranks (batch 16 each) and one process accumulating %d "
      "micro-batches of 16 hold the same %d parameters: max difference %.2g (relative %.2g, "
      "bar %.0e)",
      kSteps, kRanks, kRanks, a.params.size(), max_diff, relative, kTolerance);
  return v;
}

}  // namespace ringside
