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
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/ps_placement.h"
#include "common/run_config.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/cluster/cluster.h"
#include "experiments/costmodel/costmodel.h"
#include "experiments/netem/netem.h"

namespace ringside {
namespace {

// simulate's flags as given (read once, by RunSimulateVerb), and which were given.
struct SimulateFlags {
  const CommandArgs* args = nullptr;
  std::string cluster, calibration, model, layers_mb, workers, shards, links, node_cpus, slow_node;
  int batch = 0, max_workers = 0;
  double model_mb = 0, step_ms = 0, bucket_mb = 0;
  absl::Duration link_latency;
  bool colocated = false, wire_only = false, worker_summers = false;
  std::string ps_transport, ps_placement, ps_mode, compress;
  int ps_chunk_kb = 0;
};

SimulateFlags ReadSimulateFlags(const CommandArgs& args) {
  SimulateFlags f;
  f.args = &args;
  // The mode.
  f.cluster = absl::GetFlag(FLAGS_cluster);
  f.calibration = absl::GetFlag(FLAGS_calibration);
  // The model and its step.
  f.model = absl::GetFlag(FLAGS_simulate_model);
  f.batch = absl::GetFlag(FLAGS_simulate_batch);
  f.model_mb = absl::GetFlag(FLAGS_model_mb);
  f.layers_mb = absl::GetFlag(FLAGS_layers_mb);
  f.step_ms = absl::GetFlag(FLAGS_step_ms);
  // The sweep: workers, shards, links, buckets.
  f.workers = absl::GetFlag(FLAGS_simulate_workers);
  f.max_workers = absl::GetFlag(FLAGS_max_workers);
  f.shards = absl::GetFlag(FLAGS_simulate_shards);
  f.colocated = absl::GetFlag(FLAGS_colocated);
  f.links = absl::GetFlag(FLAGS_links);
  f.link_latency = absl::GetFlag(FLAGS_link_latency);
  f.wire_only = absl::GetFlag(FLAGS_wire_only);
  f.bucket_mb = absl::GetFlag(FLAGS_bucket_mb);
  // Emulated nodes of a calibration.
  f.node_cpus = absl::GetFlag(FLAGS_simulate_node_cpus);
  f.slow_node = absl::GetFlag(FLAGS_simulate_slow_node);
  f.ps_transport = absl::GetFlag(FLAGS_ps_transport);
  f.ps_placement = absl::GetFlag(FLAGS_ps_placement);
  f.ps_mode = absl::GetFlag(FLAGS_ps_mode);
  f.worker_summers = absl::GetFlag(FLAGS_ps_worker_summers);
  f.ps_chunk_kb = absl::GetFlag(FLAGS_ps_chunk_kb);
  f.compress = absl::GetFlag(FLAGS_compress);
  return f;
}

bool Given(const SimulateFlags& f, const char* flag) { return f.args->flags_given.count(flag) > 0; }

// --workers or --max_workers (not both).
absl::StatusOr<std::vector<int>> WorkersFromFlags(const SimulateFlags& f) {
  if (Given(f, "simulate_workers")) {
    if (Given(f, "max_workers")) return absl::InvalidArgumentError("simulate: give --workers or --max_workers, not both");
    return ParseWorkerList(f.workers);
  }
  const int max_workers = f.max_workers;
  if (max_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max_workers must be >= 1 (got ", max_workers, ")"));
  }
  return PowersOfTwo(max_workers);
}

// --link_latency in seconds; -1 when not given.
absl::StatusOr<double> LinkLatencyFromFlags(const SimulateFlags& f) {
  if (!Given(f, "link_latency")) return -1.0;
  const absl::Duration d = f.link_latency;
  if (d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--link_latency must be >= 0 and finite (got ",
                                                   absl::FormatDuration(d), ")"));
  }
  return absl::ToDoubleSeconds(d);
}

absl::StatusOr<double> BucketCapFromFlags(const SimulateFlags& f) {
  const double mb = f.bucket_mb;
  if (!(mb > 0) || !std::isfinite(mb)) {
    return absl::InvalidArgumentError(absl::StrCat("--bucket_mb must be > 0 (got ", mb, ")"));
  }
  return mb * (1 << 20);
}

// --ps_chunk_kb: the PS streams' chunk size in bytes; 0 (ringside's default) unless given.
absl::StatusOr<double> ChunkBytesFromFlags(const SimulateFlags& f) {
  if (!Given(f, "ps_chunk_kb")) return 0.0;
  if (f.ps_chunk_kb < 1 || f.ps_chunk_kb > 65536) {
    return absl::InvalidArgumentError(absl::StrCat("--ps_chunk_kb must be in [1, 65536], got ", f.ps_chunk_kb));
  }
  return f.ps_chunk_kb * 1024.0;
}

// --ps_mode: whether the PS rows are summation servers; --ps_worker_summers needs them.
absl::StatusOr<bool> SummationFromFlags(const SimulateFlags& f) {
  RINGSIDE_RETURN_IF_ERROR(CheckPsModeName(f.ps_mode));
  const bool summation = f.ps_mode == kPsModeSummation;
  if (f.worker_summers && !summation) {
    return absl::InvalidArgumentError("--ps_worker_summers needs --ps_mode=summation");
  }
  if (f.worker_summers && f.colocated) {
    return absl::InvalidArgumentError("--ps_worker_summers and --colocated place the servers two ways: pick one");
  }
  return summation;
}

// The command line of --cluster mode; every error is the command line's.
// --compress as the cost model takes it: the 2-byte formats; top-k and PowerSGD are
// not modelled yet, so they are refused rather than predicted as float32.
absl::StatusOr<WireFormat> SimulatedWireFormat(const std::string& compress) {
  RINGSIDE_ASSIGN_OR_RETURN(const Compression c, ParseCompressionSpec(compress));
  if (c.lossy()) {
    return absl::InvalidArgumentError(absl::StrCat("simulate: --compress=", compress,
                                                   " is not in the cost model yet (fp16 and bf16 are)"));
  }
  return c.wire;
}

absl::StatusOr<ClusterSimulateOptions> ClusterOptionsFromFlags(const SimulateFlags& f) {
  for (const char* flag : {"simulate_node_cpus", "simulate_slow_node"}) {
    if (Given(f, flag)) {
      return absl::InvalidArgumentError(
          "simulate: --node_cpus and --slow_node describe emulated nodes of a calibration; a "
          "cluster's devices come from its profile");
    }
  }
  if (Given(f, "ps_transport")) {
    return absl::InvalidArgumentError(
        "simulate: --ps_transport is for --calibration (a described cluster's links are its wire, whatever the "
        "transport)");
  }
  ClusterSimulateOptions o;
  RINGSIDE_ASSIGN_OR_RETURN(o.ps_placement, ParsePsPlacement(f.ps_placement));
  RINGSIDE_ASSIGN_OR_RETURN(o.ps_summation, SummationFromFlags(f));
  o.worker_summers = f.worker_summers;
  RINGSIDE_ASSIGN_OR_RETURN(o.ps_chunk_bytes, ChunkBytesFromFlags(f));
  RINGSIDE_ASSIGN_OR_RETURN(const WireFormat wire, SimulatedWireFormat(f.compress));
  o.wire_format = wire;
  RINGSIDE_ASSIGN_OR_RETURN(o.cluster, LoadClusterProfile(f.cluster));
  o.batch = f.batch;
  if (o.batch < 0) return absl::InvalidArgumentError(absl::StrCat("--batch must be >= 1 (got ", o.batch, ")"));
  std::vector<double> layers_mb;
  if (Given(f, "layers_mb")) {
    RINGSIDE_ASSIGN_OR_RETURN(layers_mb, ParseSizeList(f.layers_mb));
  }
  RINGSIDE_ASSIGN_OR_RETURN(o.model, ResolveSimulatedModel(f.model, o.batch, f.model_mb, layers_mb));
  const double step_ms = f.step_ms;
  if (Given(f, "step_ms") && (!(step_ms > 0) || !std::isfinite(step_ms))) {
    return absl::InvalidArgumentError(absl::StrCat("--step_ms must be > 0 (got ", step_ms, ")"));
  }
  o.step_s = step_ms / 1e3;
  RINGSIDE_ASSIGN_OR_RETURN(o.workers, WorkersFromFlags(f));
  RINGSIDE_ASSIGN_OR_RETURN(o.shards, ParseShardList(f.shards, /*zero_allowed=*/f.worker_summers));
  o.shards_colocated = f.colocated;
  RINGSIDE_ASSIGN_OR_RETURN(o.link_latency_s, LinkLatencyFromFlags(f));
  if (Given(f, "links")) {
    RINGSIDE_ASSIGN_OR_RETURN(o.link_bytes_per_s, ParseBandwidthList(f.links));
  }
  RINGSIDE_ASSIGN_OR_RETURN(o.bucket_cap_bytes, BucketCapFromFlags(f));
  // A missing step time (or layers a placement needs) is the user's to give: checked
  // before anything is printed.
  RINGSIDE_RETURN_IF_ERROR(ClusterStepSeconds(o).status());
  RINGSIDE_RETURN_IF_ERROR(ClusterSweep(o, 0).status());
  return o;
}

// The command line of --calibration mode (all but the calibration, read later); every
// error is the command line's.
absl::StatusOr<SimulateOptions> CalibrationOptionsFromFlags(const SimulateFlags& f) {
  for (const char* flag : {"step_ms", "layers_mb"}) {
    if (Given(f, flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("simulate: --", flag, " is for --cluster (a calibration measured its own step and model)"));
    }
  }
  SimulateOptions o;
  RINGSIDE_ASSIGN_OR_RETURN(const std::string transport, ParsePsTransport(f.ps_transport));
  o.ps_tcp = transport == kPsTransportTcp;
  RINGSIDE_ASSIGN_OR_RETURN(o.ps_placement, ParsePsPlacement(f.ps_placement));
  RINGSIDE_ASSIGN_OR_RETURN(o.ps_summation, SummationFromFlags(f));
  o.worker_summers = f.worker_summers;
  RINGSIDE_ASSIGN_OR_RETURN(o.ps_chunk_bytes, ChunkBytesFromFlags(f));
  RINGSIDE_ASSIGN_OR_RETURN(const WireFormat wire, SimulatedWireFormat(f.compress));
  o.wire_format = wire;
  if (Given(f, "simulate_model")) o.model = f.model;
  if (Given(f, "simulate_batch")) o.batch = f.batch;
  o.model_bytes = f.model_mb * 1e6;
  RINGSIDE_ASSIGN_OR_RETURN(o.link_bytes_per_s, ParseBandwidthList(f.links));
  RINGSIDE_ASSIGN_OR_RETURN(o.workers, WorkersFromFlags(f));
  RINGSIDE_ASSIGN_OR_RETURN(o.shards, ParseShardList(f.shards, /*zero_allowed=*/f.worker_summers));
  o.shards_colocated = f.colocated;
  o.colocated = false;  // --shards=N --colocated is that curve.
  RINGSIDE_ASSIGN_OR_RETURN(o.link_latency_s, LinkLatencyFromFlags(f));
  o.path_limits = !f.wire_only;
  RINGSIDE_ASSIGN_OR_RETURN(o.bucket_cap_bytes, BucketCapFromFlags(f));
  // Emulated nodes of that many CPUs (any number: the prediction goes past this
  // machine); not given: the calibration's own share, so nothing is rescaled.
  RINGSIDE_ASSIGN_OR_RETURN(double node_cpus, NodeCpusWithoutNodes("simulate", f.node_cpus));
  if (Given(f, "simulate_node_cpus")) o.node_cpus = node_cpus;
  RINGSIDE_ASSIGN_OR_RETURN(SlowNodeSpec slow, ParseSlowNode(f.slow_node));
  if (slow.enabled) {
    if (!Given(f, "simulate_node_cpus") || !(o.node_cpus > 0)) {
      return absl::InvalidArgumentError("--slow_node needs --node_cpus");
    }
    o.slow_node_fraction = slow.factor;
  }
  return o;
}

}  // namespace

absl::Status RunSimulateVerb(const CommandArgs& args) {
  const SimulateFlags f = ReadSimulateFlags(args);
  if (!f.cluster.empty()) {
    absl::StatusOr<ClusterSimulateOptions> o = ClusterOptionsFromFlags(f);
    if (!o.ok()) return AsUsageError(o.status());
    return RunClusterSimulate(*o, stdout);
  }
  absl::StatusOr<SimulateOptions> o = CalibrationOptionsFromFlags(f);
  if (!o.ok()) return AsUsageError(o.status());
  // A file that cannot be read or a calibration that does not fit: exit 1.
  RINGSIDE_ASSIGN_OR_RETURN(o->calibration, ReadCalibrationFile(f.calibration));
  // No --ps_transport: the default's path where the calibration measured it; a
  // calibration from before the TCP data plane has gRPC's only (the header says which).
  if (f.ps_transport.empty() && !(o->calibration.push_pull_tcp.bytes_per_s > 0)) o->ps_tcp = false;
  return RunSimulate(*o, stdout);
}

}  // namespace ringside
