// `ringside calibrate`: measures the cost model's constants (cost_model.h) on the
// real code paths of this machine and writes them as JSON:
//   - compute and backward time per step and SGD time per byte: a single-process run;
//   - gamma (summing gradients): timed in process;
//   - gRPC push-pull alpha and bandwidth: `ringside bench pushpull` sweep, fitted;
//   - all-reduce alpha and bandwidth: `ringside bench allreduce` with 2 ranks, fitted.
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATE_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATE_H_

#include <string>

#include "absl/status/statusor.h"
#include "experiments/costmodel/cost_model.h"

namespace ringside {

struct CalibrateOptions {
  std::string model = "mlp:784-256-256-10";
  std::string dataset = "synthetic:train=16384,test=256";
  int batch = 128;          // Per-worker batch the compute time is measured at.
  int threads = 1;
  int steps = 80;
  std::string self_exe;     // The ringside binary (runs the measurements).
  std::string work_dir;     // Scratch directory for the runs' outputs.
};

// Runs the measurements (child processes of `self_exe`); blocks for about half a
// minute. Every step's failure comes back naming the measurement.
absl::StatusOr<Calibration> Calibrate(const CalibrateOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATE_H_
