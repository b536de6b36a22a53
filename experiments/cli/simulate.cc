// `ringside simulate --calibration=FILE --links=...`: the cost model far past this
// machine. --model / --batch, when given, must be what the calibration was measured
// with (the calibration's own otherwise). --node_cpus / --slow_node predict emulated
// nodes of that CPU share.
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/netem/netem.h"

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
  // Emulated nodes of that many CPUs (any number: the prediction goes past this machine).
  RINGSIDE_ASSIGN_OR_RETURN(o.node_cpus, NodeCpusWithoutNodes("simulate"));
  RINGSIDE_ASSIGN_OR_RETURN(SlowNodeSpec slow, ParseSlowNode(absl::GetFlag(FLAGS_slow_node)));
  if (slow.enabled) {
    if (o.node_cpus <= 0) return absl::InvalidArgumentError("--slow_node needs --node_cpus");
    o.slow_node_fraction = slow.factor;
  }
  return RunSimulate(o, stdout);
}

}  // namespace ringside
