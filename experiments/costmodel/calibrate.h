// `ringside calibrate`: measures the cost model's constants (cost_model.h) on the real
// code paths of this machine, in this process, from the measurement functions of
// experiments/bench/ (no child processes, no parsing of printed tables, but for phase
// 3 through a cluster's link):
//   1. compute and backward time per step and SGD time per byte: the step bench
//      (MeasureStepBench) on the model itself, whose parameter count gives M;
//   2. gamma (summing gradients): timed in process;
//   3. on an emulated node only (node_cpus > 0): the PS's communication CPU, the
//      compute's pace lost to push-pulls running beside it on the node
//      (PushPullsBeside), over gRPC and the TCP data plane; with a cluster, through
//      the cluster's dilated link to a shard on a second emulated node (child
//      processes: `bench pushpull-beside` on this node, `bench pushpull-server` there),
//      then the PS itself through that link with 1 worker and 1 shard, and 2 and 2,
//      each on a node of the share (`ringside train` children): the BSP join;
//   then, off the node:
//   3 / 4. push-pull alpha and bandwidth over gRPC, then over the TCP data plane: a
//      push-pull sweep against a shard hosted in this process (RunPushPullSweep), fitted;
//   5 / 6. all-reduce alpha and bandwidth: a ring all-reduce sweep of 2 Gloo ranks as
//      threads (MeasureAllReduceInProcess), fitted.
// The phases run in calibration_repeats rounds (1 2 3 4 5, 1 2 3 4 5, ...), so that the
// repeats of a constant spread over the whole calibration; each constant is the median
// of its rounds, and its spread is printed and recorded (calibration_spread.h), with a
// warning line for a constant whose rounds differ by more than kUnsteadySpread, and one
// before a round when other processes keep the machine busy. A sweep whose fit fails
// (noise: times that do not grow with size) is run again, up to three sweeps per round.
// The result records the model, batch, threads and node share it was measured with.
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATE_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATE_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/costmodel/calibration_spread.h"
#include "experiments/costmodel/cost_model.h"

namespace ringside {

// Rounds of the four phases unless told (`--calibration_repeats`).
inline constexpr int kDefaultCalibrationRepeats = 3;

struct CalibrateOptions {
  std::string model = "mlp:784-256-256-10";  // Any spec Model::Create takes.
  int batch = 128;          // Per-worker batch the compute time is measured at.
  int threads = 1;          // BLAS threads for the compute measurement.
  // > 0: measure compute, SGD, gamma and the PS's communication CPU on an emulated node
  // of this many CPUs (this process joins a cgroup with that quota for those phases of
  // every round; root).
  // Recorded in the calibration; the cost model scales from it (cost_model.h
  // Scenario.node_cpus).
  double node_cpus = 0;
  // With node_cpus: the cluster (a preset or a profile file, cluster/profile.h) the
  // cells' nodes stand for. The PS CPU phase then moves its bytes through a link shaped
  // to that cluster's NIC dilated for this host (cluster/dilation.h, d from phase 1's
  // step of the first round), between this node and a second emulated node holding the
  // shard, as the cells' nodes move theirs: at the link's pace. Root (network
  // namespaces). Empty: push-pulls back to back on loopback in this process.
  std::string cluster;
  // The measurement budget (tests make it tiny):
  // Rounds of the four phases; each constant is their median (calibration_spread.h).
  int calibration_repeats = kDefaultCalibrationRepeats;
  int warmup_steps = 5;     // Untimed steps before the timed ones, every round.
  int steps = 30;           // Timed training steps per round (medians).
  int repeats = 10;         // Timed push-pulls and all-reduces per message size (a
                            // quarter from 16 MiB up: at least 3 push-pulls, 5 all-reduces).
  // Largest message of the push-pull (4 KiB, x4 ...) and all-reduce (4 KiB, x2 ...)
  // sweeps; at least 256 KiB. 0: the model's bytes rounded up to the sweep's next size,
  // at least kDefaultSweepBytes and at most kMaxSweepBytes (a model larger than that is
  // said to have its bandwidth extrapolated).
  int64_t max_message_bytes = 0;
  // One line per phase of every round (what, how long it should take, the result),
  // then every constant's median and spread and any warning, or nullptr. On a terminal
  // a phase's line is started when the phase starts and finished when it ends; on
  // anything else each line is written whole.
  FILE* progress = nullptr;
};

// The automatic sweeps' (max_message_bytes = 0) least and greatest largest message.
inline constexpr int64_t kDefaultSweepBytes = int64_t{16} << 20;
inline constexpr int64_t kMaxSweepBytes = int64_t{256} << 20;

// The largest message of a sweep min_bytes, min_bytes x factor, ... (factor >= 2):
// requested_bytes when > 0; else the first size that is >= kDefaultSweepBytes and >=
// model_bytes, but at most kMaxSweepBytes.
int64_t SweepMaxBytes(int64_t requested_bytes, int64_t min_bytes, int factor, double model_bytes);

// A calibration and how it was measured (the file records both: calibration_json.h).
struct CalibrationRun {
  Calibration calibration;
  CalibrationMeasurement measurement;
};

// Runs the measurements in this process; blocks for about 20 s with the defaults on a
// small model (the step phase scales with the model, the sweeps with its size).
// InvalidArgument for bad options or a model that does not build; otherwise a failing
// measurement's error, naming it.
absl::StatusOr<CalibrationRun> CalibrateWithSpreads(const CalibrateOptions& options);

// CalibrateWithSpreads' calibration alone.
absl::StatusOr<Calibration> Calibrate(const CalibrateOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATE_H_
