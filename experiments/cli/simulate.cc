// `ringside simulate --calibration=FILE --links=...`: the cost model far past this
// machine.
#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/netem/bandwidth.h"

namespace ringside {

absl::Status RunSimulateVerb(const CommandArgs& args) {
  RINGSIDE_RETURN_IF_ERROR(ExpectPositional(args, 0));
  if (absl::GetFlag(FLAGS_calibration).empty()) {
    return absl::InvalidArgumentError("simulate needs --calibration=FILE (from `ringside calibrate`)");
  }
  SimulateOptions o;
  RINGSIDE_ASSIGN_OR_RETURN(o.calibration, ReadCalibrationFile(absl::GetFlag(FLAGS_calibration)));
  o.model_bytes = absl::GetFlag(FLAGS_model_mb) * 1e6;
  RINGSIDE_ASSIGN_OR_RETURN(o.link_bytes_per_s, ParseBandwidthList(absl::GetFlag(FLAGS_links)));
  o.workers = PowersOfTwo(absl::GetFlag(FLAGS_max_workers));
  return RunSimulate(o, stdout);
}

}  // namespace ringside
