// `ringside bench step`: the training-step benchmark. Times forward + backward + SGD
// update on one resident batch (untimed warm-up, then many timed steps; median and
// spread), and the GEMM floor: the step's GEMM FLOPs over the sgemm rate it measures
// itself on the same thread count, beside each round of steps (median of the 1024^3
// products just before and just after), and the peak floor from the best rate.
// MeasureStepBench returns the numbers (`ringside calibrate` uses them); RunStepBench
// prints them.
#ifndef RINGSIDE_EXPERIMENTS_BENCH_STEP_BENCH_H_
#define RINGSIDE_EXPERIMENTS_BENCH_STEP_BENCH_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/ops.h"
#include "common/ops_factory.h"

namespace ringside {

struct StepBenchOptions {
  std::string model = "mlp:784-512-512-10";
  int batch = 128;
  int threads = 1;  // OpenBLAS threads (CPU only).
  DeviceSpec device;  // cpu, or cuda (index -1: GPU 0).
  GemmPrecision precision = GemmPrecision::kFp32;
  int warmup = 20;
  int steps = 200;
  int repeats = 1;  // Rounds (floor, steps, floor), each printed; then a summary.
  // false: no sgemm rates, no floor (the round's sgemm and floor fields stay 0).
  bool measure_floor = true;
};

// One round: o.steps timed steps (milliseconds; medians unless named otherwise). Each
// timed step ends when the device is done with it (the backend's Synchronize).
struct StepRound {
  double step_ms = 0, p10_ms = 0, p90_ms = 0;
  // The round's wall time per step (its mean): the pace a CPU quota sets when a step is
  // shorter than the quota's period (most steps run unthrottled, a few wait a period).
  double mean_step_ms = 0;
  double forward_ms = 0, backward_ms = 0;
  double compute_ms = 0;  // Median of forward + backward per step.
  double update_ms = 0;   // The SGD update (the single strategy steps during backward).
  double samples_per_s = 0;
  // sgemm N^3 rates around the round (N = 1024 on the CPU, 4096 on a GPU), GFLOP/s:
  // median, lowest, highest; the floor
  // (GEMM FLOPs / median rate) and step_ms over it. 0 without measure_floor.
  double sgemm_gflops = 0, sgemm_min_gflops = 0, sgemm_max_gflops = 0;
  double floor_ms = 0, floor_ratio = 0;
};

struct StepBenchResult {
  StepBenchOptions options;
  std::string device_name;  // The backend's name: "cpu", "cuda:0", ...
  int64_t num_params = 0;
  double gemm_flops = 0;  // One step's GEMM work (Model::GemmFlops).
  std::vector<StepRound> rounds;
  // Over all rounds: the best and the median sgemm rate (0 without measure_floor).
  double peak_gflops = 0, median_gflops = 0;
};

// Builds the model on o.device's ops and times it. Blocks for (warmup + steps) x repeats
// steps (and 20 sgemm products per round with measure_floor). InvalidArgument for bad
// options or an unknown model.
absl::StatusOr<StepBenchResult> MeasureStepBench(const StepBenchOptions& options);

// The bench's report: a header line, one line per round, a summary line, and a last
// line for scripts (scripts/gpu_check.sh reads it):
//   result: impl=ringside model=M batch=B device=D precision=P step_ms=X tflops=Y
//           sgemm_tflops=Z   (one line; tflops: the step's GEMM FLOPs over its median)
void PrintStepBench(const StepBenchResult& result, FILE* out);

// MeasureStepBench, then PrintStepBench to stdout.
absl::Status RunStepBench(const StepBenchOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_BENCH_STEP_BENCH_H_
