// `ringside calibrate --model=SPEC --batch=B --out=FILE`: the cost model's constants,
// measured here for that model and per-worker batch (which the file records).
// Progress, one line per phase, on stderr; the JSON and the file's name on stdout.
#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/netem/netem.h"

namespace ringside {

absl::Status RunCalibrateVerb(const CommandArgs& args) {
  const std::string out = absl::GetFlag(FLAGS_out).empty() ? "calibration.json" : absl::GetFlag(FLAGS_out);
  CalibrateOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.batch = absl::GetFlag(FLAGS_batch);
  o.threads = absl::GetFlag(FLAGS_threads) > 0 ? absl::GetFlag(FLAGS_threads) : 1;
  if (absl::GetFlag(FLAGS_steps) > 0) o.steps = static_cast<int>(absl::GetFlag(FLAGS_steps));
  RINGSIDE_ASSIGN_OR_RETURN(o.node_cpus, NodeCpusWithoutNodes("calibrate"));
  if (o.node_cpus > MachineCpus()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node_cpus=", o.node_cpus, ": this machine has ", MachineCpus(), " CPU(s)"));
  }
  o.progress = stderr;
  RINGSIDE_ASSIGN_OR_RETURN(Calibration c, Calibrate(o));
  RINGSIDE_RETURN_IF_ERROR(WriteCalibrationFile(c, out));
  absl::PrintF("%s\ncalibration: %s (model %s, batch %d, %d thread(s))\n", CalibrationToJson(c), out,
               c.model, c.batch, c.threads);
  return absl::OkStatus();
}

}  // namespace ringside
