// How steady a calibration is: `ringside calibrate` measures every constant in R
// repeats (CalibrateOptions::calibration_repeats), keeps the median and records how far
// apart the repeats were. A constant whose repeats differ by more than
// kUnsteadySpread of its median is called unsteady: calibrate warns, naming it and its
// values, and keeps the median.
//
// The spread is (max - min) / median over the repeats. Because the median lies between
// min and max, a constant that is not unsteady has every repeat within kUnsteadySpread
// of its median (the converse does not hold: 0.9, 1.0, 1.15 is within 15% of its median
// and still unsteady). Pure functions; no measurement here.
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATION_SPREAD_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATION_SPREAD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringside {

// Above this spread ((max - min) / median) a constant is unsteady.
inline constexpr double kUnsteadySpread = 0.20;

// One constant measured in repeats.
struct ConstantSpread {
  // The calibration's field, as in the file: "compute_s", "allreduce.alpha_s", ...
  std::string name;
  std::vector<double> values;  // One per repeat, in the order measured.
  double median = 0;           // Median() of values (the upper one): what is kept.
  double min = 0, max = 0;
  // (max - min) / median; 0 when every value is equal (one repeat too); +inf when the
  // median is 0 and max is not.
  double spread = 0;
};

// How a calibration was measured, beyond the constants the cost model reads (those are
// cost_model.h's Calibration): the repeats and their spreads, and how far the message
// sweeps reached. Zero / empty: not recorded (a file written before ringside repeated
// its phases).
struct CalibrationMeasurement {
  int repeats = 0;                       // Repeats of every phase.
  std::vector<ConstantSpread> spreads;   // One per measured constant, in the order measured.
  // The largest message of the push-pull and all-reduce sweeps, bytes. Below the
  // model's bytes, the bandwidth at the model's size is extrapolated from the fit.
  double push_pull_max_bytes = 0;
  double allreduce_max_bytes = 0;
  // The most CPUs the machine's other processes kept busy in a short probe before a
  // phase (calibrate idle meanwhile); a busy machine's constants vary.
  double busy_cpus_elsewhere = 0;
};

// `values` summarised. InvalidArgument naming `name` for no values or a value that is
// negative or not finite.
absl::StatusOr<ConstantSpread> SummarizeRepeats(const std::string& name,
                                                std::vector<double> values);

// spread > kUnsteadySpread.
bool IsUnsteady(const ConstantSpread& constant);

// The constant in its display unit: "compute_s 143.9 ms (min-max 141.2-150.3 ms, 6.3%)";
// a single repeat: "compute_s 143.9 ms (1 repeat)".
std::string DescribeSpread(const ConstantSpread& constant);

// For an unsteady constant, one line (no newline):
//   "calibrate: warning: allreduce.alpha_s varies by 207% between repeats (662.8, 215.8,
//   300.1 us): the median 300.1 us is kept"
// "" for a steady one.
std::string SpreadWarning(const ConstantSpread& constant);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATION_SPREAD_H_
