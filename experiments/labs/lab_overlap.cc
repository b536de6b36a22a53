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
  v.shown = on.lead_ms > 5 && off.lead_ms <= 0.1 && on.wait_ms < 0.85 * off.wait_ms;
  v.effect = absl::StrFormat(
      "overlap on: the first of %d all-reduces started %.0f ms before backward ended, %.0f ms "
      "of waiting after it, step %.0f ms; off: it started %.0f ms after backward ended, %.0f ms "
      "of waiting, step %.0f ms",
      on.buckets, on.lead_ms, on.wait_ms, on.step_ms, std::max(0.0, -off.lead_ms), off.wait_ms, off.step_ms);
  return v;
}

}  // namespace ringside
