// Lab 5: DDP with its buckets all-reduced during backward (--overlap, the default) and
// after it (--nooverlap). With overlap the last layers' bucket goes on the wire while
// backward still computes the first layers.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/labs/lab_ddp_job.h"
#include "experiments/labs/labs.h"

namespace ringside {

absl::StatusOr<LabVerdict> CheckOverlap(const LabContext& lab) {
  const std::vector<std::string> buckets = {"--bucket_cap_mb=0.25", "--first_bucket_mb=0.25"};
  RINGSIDE_ASSIGN_OR_RETURN(std::string links, DdpLabLinks(lab));
  RINGSIDE_ASSIGN_OR_RETURN(DdpFacts on, RunDdpLabJob(lab, "overlap", links, With(buckets, {"--overlap"})));
  RINGSIDE_ASSIGN_OR_RETURN(DdpFacts off,
                            RunDdpLabJob(lab, "no-overlap", links, With(buckets, {"--nooverlap"})));
  LabVerdict v;
  // Scale-free (the same on a faster, slower or busier host: every time here dilates
  // alike): the head start is half of backward or more, and at least a quarter of
  // it comes back as a shorter step. Not the wait after backward: on a busy node the
  // transfers that overlap backward take CPU from it, so backward ends later and the
  // wait shrinks less, though the step still does.
  v.shown = on.lead_ms >= kMinLeadOfBackward * on.backward_ms && off.lead_ms <= 0.1 &&
            off.step_ms - on.step_ms >= kMinLeadReturned * on.lead_ms;
  v.effect = absl::StrFormat(
      "overlap on: the first of %d all-reduces started %.0f ms before backward (%.0f ms) ended, %.0f ms "
      "of waiting after it, step %.0f ms; off: it started %.0f ms after backward ended, %.0f ms "
      "of waiting, step %.0f ms: overlap saved %.0f ms a step, %.0f%% of its head start",
      on.buckets, on.lead_ms, on.backward_ms, on.wait_ms, on.step_ms, std::max(0.0, -off.lead_ms), off.wait_ms, off.step_ms,
      off.step_ms - on.step_ms, 100 * (off.step_ms - on.step_ms) / std::max(on.lead_ms, 1e-9));
  return v;
}

}  // namespace ringside
