// experiments/labs/: the labs of docs/labs/, each a question about data parallelism
// that a small run answers, and its check (`ringside lab check N`). Start here.
//   labs.h       the table of labs and RunLabCheck (this file)
//   lab_job.h    one job a check runs (this binary again) and what it wrote
//   lab_*.cc     one lab's check each, named after its question
#ifndef RINGSIDE_EXPERIMENTS_LABS_LABS_H_
#define RINGSIDE_EXPERIMENTS_LABS_LABS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "experiments/labs/lab_job.h"

namespace ringside {

// What a check found: whether the lab's expected effect showed up, in one line with
// the measured numbers ("4 workers, 1 shard: the master moved 8.5 MB/step; 4 shards:
// 2.1 MB").
struct LabVerdict {
  bool shown = false;
  std::string effect;
  // Non-empty: this host could not hold the setting the lab's effect needs (why, one
  // clause); the effect is then not judged, and `lab check` says so instead of
  // concluding (exit 1, "effect not judged: ..."; the doc checks count it as skipped).
  std::string not_judged;
};

struct Lab {
  int number;
  const char* slug;      // docs/labs/<NN>-<slug>.md
  const char* title;
  const char* question;  // What the student finds out.
  const char* expected;  // The effect the check looks for, in words.
  // Runs the lab small (a minute or two on 2 cores), narrating to lab.out. An error
  // when a job could not run (not when the effect is missing: that is the verdict).
  absl::StatusOr<LabVerdict> (*check)(const LabContext& lab);
};

// Every lab, by number (1, 2, ...).
absl::Span<const Lab> Labs();
// Lab `number`, or null.
const Lab* FindLab(int number);

// The checks, one file each (lab_<slug>.cc).
absl::StatusOr<LabVerdict> CheckDdpEqualsAccumulation(const LabContext& lab);
absl::StatusOr<LabVerdict> CheckDpVsDdp(const LabContext& lab);
absl::StatusOr<LabVerdict> CheckMasterBottleneck(const LabContext& lab);
absl::StatusOr<LabVerdict> CheckBucketSize(const LabContext& lab);
absl::StatusOr<LabVerdict> CheckOverlap(const LabContext& lab);
absl::StatusOr<LabVerdict> CheckStaleness(const LabContext& lab);
absl::StatusOr<LabVerdict> CheckSlowNode(const LabContext& lab);
absl::StatusOr<LabVerdict> CheckPsDesigns(const LabContext& lab);
absl::StatusOr<LabVerdict> CheckCompression(const LabContext& lab);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LABS_LABS_H_
