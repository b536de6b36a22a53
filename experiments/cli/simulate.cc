// `ringside simulate`: the cost model far past this machine, in one of two modes
// (CheckSimulate in commands.cc makes sure exactly one is given):
//   --cluster=NAME|FILE  a described cluster (experiments/cluster/ profile) and a model
//                        (--model preset or spec, or --model_mb [--layers_mb]); no
//                        calibration, the links' wire alone;
//   --calibration=FILE   this machine's calibration (`ringside calibrate`): --model /
//                        --batch, when given, must be what it was measured with;
//                        --node_cpus / --slow_node predict emulated nodes of that share
//                        (default: the calibration's own share).
// Bad input is a usage error (exit 2), one line.
#include <cmath>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/cluster/cluster.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/netem/netem.h"

namespace ringside {
namespace {

bool Given(const CommandArgs& args, const char* flag) { return args.flags_given.count(flag) > 0; }

// --workers or --max_workers (not both).
absl::StatusOr<std::vector<int>> WorkersFromFlags(const CommandArgs& args) {
  if (Given(args, "simulate_workers")) {
    if (Given(args, "max_workers")) return absl::InvalidArgumentError("simulate: give --workers or --max_workers, not both");
    return ParseWorkerList(absl::GetFlag(FLAGS_simulate_workers));
  }
  const int max_workers = absl::GetFlag(FLAGS_max_workers);
  if (max_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max_workers must be >= 1 (got ", max_workers, ")"));
  }
  return PowersOfTwo(max_workers);
}

// --link_latency in seconds; -1 when not given.
absl::StatusOr<double> LinkLatencyFromFlags(const CommandArgs& args) {
  if (!Given(args, "link_latency")) return -1.0;
  const absl::Duration d = absl::GetFlag(FLAGS_link_latency);
  if (d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--link_latency must be >= 0 and finite (got ",
                                                   absl::FormatDuration(d), ")"));
  }
  return absl::ToDoubleSeconds(d);
}

absl::StatusOr<double> BucketCapFromFlags() {
  const double mb = absl::GetFlag(FLAGS_bucket_mb);
  if (!(mb > 0) || !std::isfinite(mb)) {
    return absl::InvalidArgumentError(absl::StrCat("--bucket_mb must be > 0 (got ", mb, ")"));
  }
  return mb * (1 << 20);
}

// The command line of --cluster mode; every error is the command line's.
absl::StatusOr<ClusterSimulateOptions> ClusterOptionsFromFlags(const CommandArgs& args) {
  for (const char* flag : {"simulate_node_cpus", "simulate_slow_node"}) {
    if (Given(args, flag)) {
      return absl::InvalidArgumentError(
          "simulate: --node_cpus and --slow_node describe emulated nodes of a calibration; a "
          "cluster's devices come from its profile");
    }
  }
  ClusterSimulateOptions o;
  RINGSIDE_ASSIGN_OR_RETURN(o.cluster, LoadClusterProfile(absl::GetFlag(FLAGS_cluster)));
  o.batch = absl::GetFlag(FLAGS_simulate_batch);
  if (o.batch < 0) return absl::InvalidArgumentError(absl::StrCat("--batch must be >= 1 (got ", o.batch, ")"));
  std::vector<double> layers_mb;
  if (Given(args, "layers_mb")) {
    RINGSIDE_ASSIGN_OR_RETURN(layers_mb, ParseSizeList(absl::GetFlag(FLAGS_layers_mb)));
  }
  RINGSIDE_ASSIGN_OR_RETURN(o.model, ResolveSimulatedModel(absl::GetFlag(FLAGS_simulate_model), o.batch,
                                                           absl::GetFlag(FLAGS_model_mb), layers_mb));
  const double step_ms = absl::GetFlag(FLAGS_step_ms);
  if (Given(args, "step_ms") && (!(step_ms > 0) || !std::isfinite(step_ms))) {
    return absl::InvalidArgumentError(absl::StrCat("--step_ms must be > 0 (got ", step_ms, ")"));
  }
  o.step_s = step_ms / 1e3;
  RINGSIDE_ASSIGN_OR_RETURN(o.workers, WorkersFromFlags(args));
  RINGSIDE_ASSIGN_OR_RETURN(o.shards, ParseShardList(absl::GetFlag(FLAGS_simulate_shards)));
  o.shards_colocated = absl::GetFlag(FLAGS_colocated);
  RINGSIDE_ASSIGN_OR_RETURN(o.link_latency_s, LinkLatencyFromFlags(args));
  if (Given(args, "links")) {
    RINGSIDE_ASSIGN_OR_RETURN(o.link_bytes_per_s, ParseBandwidthList(absl::GetFlag(FLAGS_links)));
  }
  RINGSIDE_ASSIGN_OR_RETURN(o.bucket_cap_bytes, BucketCapFromFlags());
  // A missing step time is the user's to give: checked before anything is printed.
  RINGSIDE_RETURN_IF_ERROR(ClusterStepSeconds(o).status());
  return o;
}

// The command line of --calibration mode (all but the calibration, read later); every
// error is the command line's.
absl::StatusOr<SimulateOptions> CalibrationOptionsFromFlags(const CommandArgs& args) {
  for (const char* flag : {"step_ms", "layers_mb"}) {
    if (Given(args, flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("simulate: --", flag, " is for --cluster (a calibration measured its own step and model)"));
    }
  }
  SimulateOptions o;
  if (Given(args, "simulate_model")) o.model = absl::GetFlag(FLAGS_simulate_model);
  if (Given(args, "simulate_batch")) o.batch = absl::GetFlag(FLAGS_simulate_batch);
  o.model_bytes = absl::GetFlag(FLAGS_model_mb) * 1e6;
  RINGSIDE_ASSIGN_OR_RETURN(o.link_bytes_per_s, ParseBandwidthList(absl::GetFlag(FLAGS_links)));
  RINGSIDE_ASSIGN_OR_RETURN(o.workers, WorkersFromFlags(args));
  RINGSIDE_ASSIGN_OR_RETURN(o.shards, ParseShardList(absl::GetFlag(FLAGS_simulate_shards)));
  o.shards_colocated = absl::GetFlag(FLAGS_colocated);
  o.colocated = false;  // --shards=N --colocated is that curve.
  RINGSIDE_ASSIGN_OR_RETURN(o.link_latency_s, LinkLatencyFromFlags(args));
  o.path_limits = !absl::GetFlag(FLAGS_wire_only);
  RINGSIDE_ASSIGN_OR_RETURN(o.bucket_cap_bytes, BucketCapFromFlags());
  // Emulated nodes of that many CPUs (any number: the prediction goes past this
  // machine); not given: the calibration's own share, so nothing is rescaled.
  RINGSIDE_ASSIGN_OR_RETURN(NodeCpuSpec cpus, ParseNodeCpus(absl::GetFlag(FLAGS_simulate_node_cpus)));
  if (cpus.automatic) {
    return absl::InvalidArgumentError(
        "--node_cpus=auto divides the machine by a job's nodes; simulate has none: give CPUs per node (e.g. 0.4)");
  }
  if (Given(args, "simulate_node_cpus")) o.node_cpus = cpus.enabled ? cpus.cpus : 0;
  RINGSIDE_ASSIGN_OR_RETURN(SlowNodeSpec slow, ParseSlowNode(absl::GetFlag(FLAGS_simulate_slow_node)));
  if (slow.enabled) {
    if (!Given(args, "simulate_node_cpus") || !(o.node_cpus > 0)) {
      return absl::InvalidArgumentError("--slow_node needs --node_cpus");
    }
    o.slow_node_fraction = slow.factor;
  }
  return o;
}

}  // namespace

absl::Status RunSimulateVerb(const CommandArgs& args) {
  if (!absl::GetFlag(FLAGS_cluster).empty()) {
    absl::StatusOr<ClusterSimulateOptions> o = ClusterOptionsFromFlags(args);
    if (!o.ok()) return AsUsageError(o.status());
    return RunClusterSimulate(*o, stdout);
  }
  absl::StatusOr<SimulateOptions> o = CalibrationOptionsFromFlags(args);
  if (!o.ok()) return AsUsageError(o.status());
  // A file that cannot be read or a calibration that does not fit: exit 1.
  RINGSIDE_ASSIGN_OR_RETURN(o->calibration, ReadCalibrationFile(absl::GetFlag(FLAGS_calibration)));
  return RunSimulate(*o, stdout);
}

}  // namespace ringside
