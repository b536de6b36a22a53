// `ringside calibrate --model=SPEC --batch=B --out=FILE`: the cost model's constants,
// measured here for that model and per-worker batch (which the file records), each
// phase --calibration_repeats times (each constant the median; the spreads printed and
// recorded). Progress, one line per phase with its constants' spreads under it, on
// stderr; the JSON and the file's name on stdout.
#include <algorithm>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/netem/netem.h"
#include "experiments/sys/files.h"

namespace ringside {

absl::Status RunCalibrateVerb(const CommandArgs& args) {
  const std::string out = absl::GetFlag(FLAGS_out).empty() ? "calibration.json" : absl::GetFlag(FLAGS_out);
  CalibrateOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.batch = absl::GetFlag(FLAGS_batch);
  o.threads = absl::GetFlag(FLAGS_threads) > 0 ? absl::GetFlag(FLAGS_threads) : 1;
  if (absl::GetFlag(FLAGS_steps) > 0) o.steps = static_cast<int>(absl::GetFlag(FLAGS_steps));
  o.calibration_repeats = absl::GetFlag(FLAGS_calibration_repeats);
  if (o.calibration_repeats < 1) {
    return UsageError(absl::StrCat("--calibration_repeats must be >= 1, got ", o.calibration_repeats));
  }
  RINGSIDE_ASSIGN_OR_RETURN(o.node_cpus, NodeCpusWithoutNodes("calibrate", absl::GetFlag(FLAGS_node_cpus)));
  if (o.node_cpus > MachineCpus()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node_cpus=", o.node_cpus, ": this machine has ", MachineCpus(), " CPU(s)"));
  }
  o.cluster = absl::GetFlag(FLAGS_cluster);
  if (!o.cluster.empty() && !(o.node_cpus > 0)) {
    return UsageError(absl::StrCat("--cluster=", o.cluster,
                                   " needs --node_cpus: the PS CPU phase runs on an emulated node"));
  }
  o.progress = stderr;
  RINGSIDE_ASSIGN_OR_RETURN(CalibrationRun run, CalibrateWithSpreads(o));
  const std::string json = CalibrationToJson(run.calibration, run.measurement);
  RINGSIDE_RETURN_IF_ERROR(WriteFileAtomically(out, json));
  const Calibration& c = run.calibration;
  // Where compute was measured, as the file records it (node_cpus): simulate scales
  // from that share, and says so.
  const std::string where =
      c.node_cpus > 0 ? absl::StrFormat("compute on a node of %g CPU", c.node_cpus)
                      : absl::StrFormat("compute on this machine's %d CPU(s), no node share", MachineCpus());
  const int unsteady = static_cast<int>(std::count_if(run.measurement.spreads.begin(), run.measurement.spreads.end(),
                                                      [](const ConstantSpread& s) { return IsUnsteady(s); }));
  absl::PrintF("%s\ncalibration: %s (model %s, batch %d, %d thread(s), %s; medians of %d repeat(s)%s)\n", json,
               out, c.model, c.batch, c.threads, where, run.measurement.repeats,
               unsteady > 0 ? absl::StrFormat(", %d constant(s) unsteady: see the warnings", unsteady) : "");
  return absl::OkStatus();
}

}  // namespace ringside
