// `ringside train`: trains one model with the chosen strategy and prints the result.
#ifndef RINGSIDE_EXPERIMENTS_TRAIN_COMMAND_H_
#define RINGSIDE_EXPERIMENTS_TRAIN_COMMAND_H_

#include "absl/status/status.h"
#include "common/run_config.h"

namespace ringside {

// Runs the single-process training job to completion, printing progress to stderr and
// the summary (ending in "test accuracy: 0.XXXX") to stdout.
absl::Status RunTrainCommand(const RunOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_TRAIN_COMMAND_H_
