// Lab 4: DDP's bucket cap swept from 0.25 MB to 25 MB on a 3.6 MB model. Small buckets
// are many all-reduce calls (each paying the ring's 2 (N - 1) latency steps) but the
// first can start while backward still computes the earlier layers; one big bucket
// waits for the whole of backward.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/labs/lab_ddp_job.h"
#include "experiments/labs/labs.h"

namespace ringside {

absl::StatusOr<LabVerdict> CheckBucketSize(const LabContext& lab) {
  std::vector<DdpFacts> sweep;
  RINGSIDE_ASSIGN_OR_RETURN(std::string links, DdpLabLinks(lab));
  for (const char* cap : {"0.25", "1.5", "25"}) {
    RINGSIDE_ASSIGN_OR_RETURN(
        DdpFacts f, RunDdpLabJob(lab, absl::StrCat("cap", cap), links,
                                 {absl::StrCat("--bucket_cap_mb=", cap), absl::StrCat("--first_bucket_mb=", cap)}));
    sweep.push_back(f);
  }
  LabVerdict v;
  // Smaller caps: more buckets, the first launched well before backward's end (a head
  // start over the one-bucket job), and part of that head start back as a shorter step
  // (scale-free: lab_ddp_job.h).
  const double head_start = sweep[0].lead_ms - sweep[2].lead_ms;
  v.shown = sweep[0].buckets > sweep[1].buckets && sweep[1].buckets > sweep[2].buckets &&
            sweep[2].buckets == 1 && head_start >= kMinLeadOfBackward * sweep[0].backward_ms &&
            sweep[2].step_ms - sweep[0].step_ms >= kMinLeadReturned * head_start;
  v.effect = absl::StrFormat(
      "bucket cap 0.25 / 1.5 / 25 MB: %d / %d / %d buckets; the first all-reduce started %.0f / "
      "%.0f / %.0f ms before backward ended; %.0f / %.0f / %.0f ms of waiting after it; steps "
      "%.0f / %.0f / %.0f ms: the smallest cap's head start of %.0f ms (backward %.0f ms) saved %.0f ms a "
      "step, %.0f%% of it",
      sweep[0].buckets, sweep[1].buckets, sweep[2].buckets, sweep[0].lead_ms, sweep[1].lead_ms,
      sweep[2].lead_ms, sweep[0].wait_ms, sweep[1].wait_ms, sweep[2].wait_ms, sweep[0].step_ms,
      sweep[1].step_ms, sweep[2].step_ms, head_start, sweep[0].backward_ms, sweep[2].step_ms - sweep[0].step_ms,
      100 * (sweep[2].step_ms - sweep[0].step_ms) / std::max(head_start, 1e-9));
  return v;
}

}  // namespace ringside
