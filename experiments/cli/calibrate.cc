// `ringside calibrate --out=FILE`: the cost model's constants, measured here.
#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/sys/process_info.h"

namespace ringside {

absl::Status RunCalibrateVerb(const CommandArgs& args) {
  RINGSIDE_RETURN_IF_ERROR(ExpectPositional(args, 0));
  const std::string out = absl::GetFlag(FLAGS_out).empty() ? "calibration.json" : absl::GetFlag(FLAGS_out);
  CalibrateOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.batch = absl::GetFlag(FLAGS_batch);
  o.threads = absl::GetFlag(FLAGS_threads) > 0 ? absl::GetFlag(FLAGS_threads) : 1;
  RINGSIDE_ASSIGN_OR_RETURN(o.self_exe, SelfExePath());
  o.work_dir = out + ".runs";
  RINGSIDE_ASSIGN_OR_RETURN(Calibration c, Calibrate(o));
  RINGSIDE_RETURN_IF_ERROR(WriteCalibrationFile(c, out));
  absl::PrintF("%s\ncalibration: %s\n", CalibrationToJson(c), out);
  return absl::OkStatus();
}

}  // namespace ringside
