// `ringside simulate --calibration=FILE --links=...`: the cost model far past this
// machine. --model / --batch, when given, must be what the calibration was measured
// with (the calibration's own otherwise).
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/netem/bandwidth.h"

namespace ringside {
namespace {

// Whether the command line names flag `name` ("--name=V", "--name V", one dash too).
bool Given(const CommandArgs& args, absl::string_view name) {
  for (absl::string_view word : args.self_args) {
    if (word == "--") break;
    if (!absl::ConsumePrefix(&word, "--")) absl::ConsumePrefix(&word, "-");
    if (word == name || absl::StartsWith(word, absl::StrCat(name, "="))) return true;
  }
  return false;
}

}  // namespace

absl::Status RunSimulateVerb(const CommandArgs& args) {
  RINGSIDE_RETURN_IF_ERROR(ExpectPositional(args, 0));
  if (absl::GetFlag(FLAGS_calibration).empty()) {
    return absl::InvalidArgumentError("simulate needs --calibration=FILE (from `ringside calibrate`)");
  }
  SimulateOptions o;
  RINGSIDE_ASSIGN_OR_RETURN(o.calibration, ReadCalibrationFile(absl::GetFlag(FLAGS_calibration)));
  if (Given(args, "model")) o.model = absl::GetFlag(FLAGS_model);
  if (Given(args, "batch")) o.batch = absl::GetFlag(FLAGS_batch);
  o.model_bytes = absl::GetFlag(FLAGS_model_mb) * 1e6;
  RINGSIDE_ASSIGN_OR_RETURN(o.link_bytes_per_s, ParseBandwidthList(absl::GetFlag(FLAGS_links)));
  o.workers = PowersOfTwo(absl::GetFlag(FLAGS_max_workers));
  return RunSimulate(o, stdout);
}

}  // namespace ringside
