// `ringside simulate --calibration=FILE --links=...`: the cost model far past this
// machine. --model / --batch, when given, must be what the calibration was measured
// with (the calibration's own otherwise). --node_cpus / --slow_node predict emulated
// nodes of that CPU share.
#include "absl/flags/flag.h"
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/launch/node_plan.h"
#include "experiments/netem/bandwidth.h"

namespace ringside {

// --calibration is checked by the command table (commands.cc) before this runs.
absl::Status RunSimulateVerb(const CommandArgs& args) {
  SimulateOptions o;
  RINGSIDE_ASSIGN_OR_RETURN(o.calibration, ReadCalibrationFile(absl::GetFlag(FLAGS_calibration)));
  if (args.flags_given.count("model") > 0) o.model = absl::GetFlag(FLAGS_model);
  if (args.flags_given.count("batch") > 0) o.batch = absl::GetFlag(FLAGS_batch);
  o.model_bytes = absl::GetFlag(FLAGS_model_mb) * 1e6;
  RINGSIDE_ASSIGN_OR_RETURN(o.link_bytes_per_s, ParseBandwidthList(absl::GetFlag(FLAGS_links)));
  o.workers = PowersOfTwo(absl::GetFlag(FLAGS_max_workers));
  // Emulated nodes: a number of CPUs per node ("auto" has no machine to divide here).
  if (const std::string cpus = absl::GetFlag(FLAGS_node_cpus); !cpus.empty()) {
    if (!absl::SimpleAtod(cpus, &o.node_cpus) || !(o.node_cpus > 0) || !std::isfinite(o.node_cpus)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--node_cpus for simulate must be a number of CPUs per node > 0, got '", cpus, "'"));
    }
  }
  RINGSIDE_ASSIGN_OR_RETURN(SlowNodeSpec slow, ParseSlowNode(absl::GetFlag(FLAGS_slow_node)));
  if (slow.enabled) {
    if (o.node_cpus <= 0) return absl::InvalidArgumentError("--slow_node needs --node_cpus");
    o.slow_node_fraction = slow.factor;
  }
  return RunSimulate(o, stdout);
}

}  // namespace ringside
