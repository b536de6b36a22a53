// `ringside train`: trains one model with the chosen strategy and prints the result.
#ifndef RINGSIDE_EXPERIMENTS_TRAIN_COMMAND_H_
#define RINGSIDE_EXPERIMENTS_TRAIN_COMMAND_H_

#include <string>

#include "absl/status/status.h"
#include "common/ringside.pb.h"

namespace ringside {

struct TrainCommandOptions {
  RunConfig config;
  std::string out_dir;
  bool resume = false;
  int64_t checkpoint_every = 0;
  int eval_batch = 1000;
};

// Runs the training job to completion, printing progress to stderr and the summary
// (ending in "test accuracy: 0.XXXX") to stdout.
absl::Status RunTrainCommand(const TrainCommandOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_TRAIN_COMMAND_H_
