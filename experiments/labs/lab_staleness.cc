// Lab 6: a parameter server of 4 workers with worker 1 on a slow emulated node, under
// BSP, SSP with bound 4 and ASP. A worker's lead at a step is how many steps it is
// ahead of the slow worker when it starts it: how stale the parameters it computes on
// may be. A step counts as started when the worker gathers its batch, before its
// forward waits for the parameters it needs, so BSP holds the lead at 1 (the next step
// starts, then waits for the update; 0 when the slow worker starts its next step first),
// SSP:K at K, and ASP not at all.
#include <algorithm>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/labs/labs.h"
#include "experiments/netem/cpu_share.h"

namespace ringside {
namespace {

constexpr int kWorkers = 4;
constexpr int kSlowWorker = 1;
constexpr int kBound = 4;
// Batch 2048: the lead comes from the slow node computing for longer, so a step must
// compute for about as long as the master's link takes to move the 4 workers' 1 MB
// pushes and pulls (about 64 ms on gige-cpu). At 32 samples the links set every
// worker's pace, slow or not, and the lead under ASP was 2 to 11 by the host's noise.
// One epoch of 16 steps: an epoch's end (evaluation, checkpoint) lines every worker up
// again, so a lead can only build within one.
constexpr int kBatch = 2048;
constexpr int kSteps = 16;
constexpr double kNodeCpus = 0.4;  // The lab's own share (LabNodeCpus).

struct StalenessRun {
  int max_lead = 0;
  double accuracy = 0;
};

// The largest lead of any fast worker over the slow one: for each step s a fast worker
// started at time T, s minus the steps the slow worker had started by T.
int MaxLead(const std::vector<std::vector<StepMetrics>>& workers) {
  std::vector<int64_t> slow_starts;
  for (const StepMetrics& m : workers[kSlowWorker]) slow_starts.push_back(m.start_us());
  std::sort(slow_starts.begin(), slow_starts.end());
  int lead = 0;
  for (int w = 0; w < static_cast<int>(workers.size()); ++w) {
    if (w == kSlowWorker) continue;
    for (const StepMetrics& m : workers[w]) {
      const int64_t started = std::upper_bound(slow_starts.begin(), slow_starts.end(), m.start_us()) -
                              slow_starts.begin();
      lead = std::max<int>(lead, static_cast<int>(m.step() - started));
    }
  }
  return lead;
}

// `links`: LabClusterLinks's, the same for every job of the check.
absl::StatusOr<StalenessRun> RunSync(const LabContext& lab, const std::string& links, const std::string& sync) {
  RINGSIDE_ASSIGN_OR_RETURN(
      LabJob job,
      RunLabJob(lab, absl::StrCat("ps-", sync.substr(0, 3)),
                With({"train", "--strategy=ps", absl::StrFormat("--workers=%d", kWorkers), "--ps_shards=1",
                      absl::StrCat("--ps_sync=", sync), absl::StrFormat("--steps=%d", kSteps),
                      absl::StrFormat("--batch=%d", kBatch), absl::StrCat("--node_cpus=", LabNodeCpus(lab, kNodeCpus)),
                      absl::StrCat("--network=", links), absl::StrFormat("--slow_node=%d:0.25", kSlowWorker)},
                     LabCommonFlags(kWorkers * kBatch * kSteps, 1))));
  std::vector<std::vector<StepMetrics>> workers;
  for (int w = 0; w < kWorkers; ++w) {
    RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> m, JobMetrics(job, OutputOwner::kRank, w));
    workers.push_back(std::move(m));
  }
  StalenessRun r;
  r.max_lead = MaxLead(workers);
  std::smatch match;
  static const std::regex kAccuracy("test accuracy: ([0-9.]+)");
  if (!std::regex_search(job.stdout_text, match, kAccuracy) ||
      !absl::SimpleAtod(match[1].str(), &r.accuracy)) {
    return absl::InternalError(absl::StrCat("job ps-", sync, " printed no test accuracy"));
  }
  absl::FPrintF(lab.out, "    %s: fast workers ran at most %d step%s ahead of worker %d; test accuracy %.4f\n",
                sync, r.max_lead, r.max_lead == 1 ? "" : "s", kSlowWorker, r.accuracy);
  return r;
}

}  // namespace

absl::StatusOr<LabVerdict> CheckStaleness(const LabContext& lab) {
  if (absl::Status s = CheckCpuSharePrivileges(); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("lab 6 slows one worker's emulated node, which needs root: ", s.message()));
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::string links,
                            LabClusterLinks(lab, kLabCommonModel, kBatch, LabNodeCpus(lab, kNodeCpus)));
  RINGSIDE_ASSIGN_OR_RETURN(StalenessRun bsp, RunSync(lab, links, "bsp"));
  RINGSIDE_ASSIGN_OR_RETURN(StalenessRun ssp, RunSync(lab, links, absl::StrCat("ssp:", kBound)));
  RINGSIDE_ASSIGN_OR_RETURN(StalenessRun asp, RunSync(lab, links, "asp"));
  LabVerdict v;
  v.shown = bsp.max_lead <= 1 && ssp.max_lead <= kBound && ssp.max_lead >= kBound - 1 &&
            asp.max_lead > kBound;
  v.effect = absl::StrFormat(
      "largest lead over the slow worker: BSP %d, SSP:%d %d, ASP %d steps; test accuracy after "
      "%d steps: %.4f / %.4f / %.4f",
      bsp.max_lead, kBound, ssp.max_lead, asp.max_lead, kSteps, bsp.accuracy, ssp.accuracy, asp.accuracy);
  return v;
}

}  // namespace ringside
