// `ringside train`: trains one model with the chosen strategy and prints the result.
#ifndef RINGSIDE_EXPERIMENTS_TRAIN_COMMAND_H_
#define RINGSIDE_EXPERIMENTS_TRAIN_COMMAND_H_

#include "absl/status/status.h"
#include "experiments/launch/job_spec.h"

namespace ringside {

// Runs a one-process training job to completion: JobStrategy::kSingle, or kDp (replicas
// as threads of this process, data_parallel.h; then the summary adds the phases).
// `job` was checked by the command line (experiments/cli/job_flags.h). Progress to
// stderr, the summary (with a "test accuracy: 0.XXXX" line) to stdout.
absl::Status RunTrainCommand(const JobSpec& job);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_TRAIN_COMMAND_H_
