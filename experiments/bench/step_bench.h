// `ringside bench step`: the training-step benchmark. Times forward + backward + SGD
// update on one resident batch (untimed warm-up, then many timed steps; median and
// spread), and prints the GEMM floor: the step's GEMM FLOPs over the sgemm rate it
// measures itself on the same thread count, beside each round of steps (median of the
// 1024^3 products just before and just after), and the peak floor from the best rate.
#ifndef RINGSIDE_EXPERIMENTS_BENCH_STEP_BENCH_H_
#define RINGSIDE_EXPERIMENTS_BENCH_STEP_BENCH_H_

#include <string>

#include "absl/status/status.h"

namespace ringside {

struct StepBenchOptions {
  std::string model = "mlp:784-512-512-10";
  int batch = 128;
  int threads = 1;
  int warmup = 20;
  int steps = 200;
  int repeats = 1;  // Rounds (floor, steps, floor), each printed; then a summary.
};

absl::Status RunStepBench(const StepBenchOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_BENCH_STEP_BENCH_H_
