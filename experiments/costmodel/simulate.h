// `ringside simulate`: prints the cost model's predicted step time, speedup, bound and
// used bandwidth of every strategy over N workers, and where the curves cross, either
// from a calibration of this machine (RunSimulate) or for a cluster described by a
// profile, with no calibration (RunClusterSimulate). The model itself is
// experiments/costmodel/cost_model.h; its derivation docs/cost_model.md.
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_SIMULATE_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_SIMULATE_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "experiments/cluster/profile.h"
#include "experiments/costmodel/cost_model.h"

namespace ringside {

struct SimulateOptions {
  Calibration calibration;
  // The model and per-worker batch to predict for; empty / 0: the calibration's own.
  // Either given: the calibration must have been measured with them (refused
  // otherwise, see CheckCalibrationFits).
  std::string model;
  int batch = 0;
  double model_bytes = 0;  // 0: calibration.model_bytes.
  // One table per entry, bytes/s per direction. Empty: one table on the calibrated paths.
  std::vector<double> link_bytes_per_s;
  std::vector<int> workers;          // Empty: 1, 2, 4, ..., 1024.
  // PS curves (SweepOptions::shards: kShardsPerWorker is S = N), standalone or
  // colocated, and an extra "PS S=N colocated" curve.
  std::vector<int> shards = {1, 2};
  bool shards_colocated = false;
  bool colocated = true;
  double link_latency_s = -1;        // As in Scenario (one way, node to node).
  double master_link_bytes_per_s = 0;
  bool path_limits = true;
  bool overlap = true;
  double bucket_cap_bytes = 0;       // DDP's bucket cap; 0: the reducer's default.
  // Emulated nodes (cost_model.h Scenario): every node's CPU share and the slow node's
  // fraction of it (1: none); the single baseline runs on one such node. node_cpus < 0:
  // the share the calibration was measured on (no rescaling); 0: none.
  double node_cpus = -1;
  double slow_node_fraction = 1;
  // The PS's tensors on the TCP data plane (--ps_transport=tcp): its rows on the
  // calibration's push_pull_tcp path (refused where the calibration lacks it).
  bool ps_tcp = false;
  // Where the PS rows' tensors live (--ps_placement): the calibration's model's tensors
  // (Model::TensorRanges) dealt so; the busiest standalone shard bounds each row.
  PsPlacement ps_placement = PsPlacement::kBalanced;
  // The PS rows are summation servers (--ps_mode=summation; Scenario::ps_summation),
  // with a summer in each worker too (--ps_worker_summers; SweepOptions).
  bool ps_summation = false;
  bool worker_summers = false;
  // The PS streams' chunk size (--ps_chunk_kb); 0: ringside's default.
  double ps_chunk_bytes = 0;
  // The DDP rows' gradient format on the wire (--compress; SweepOptions::wire_format).
  WireFormat wire_format = WireFormat::kFp32;
};

// Writes what the calibration was measured with, the tables and "crossover: ..." lines
// to `out` (borrowed). FailedPrecondition (CheckCalibrationFits's message) when
// options.model or options.batch is not what the calibration was measured with, or the
// calibration does not say; InvalidArgument for a model of 0 bytes or anything Predict
// rejects. Nothing is printed for a sweep that fails before its table starts.
absl::Status RunSimulate(const SimulateOptions& options, FILE* out);

// ----- A described cluster, no calibration -----

// The share of a device's step that is backward, where only the whole step is known (a
// profile's step entry, FLOPs / rate, --step_ms): backward computes two GEMMs per
// forward GEMM (the gradients of the inputs and of the weights), so 2/3 of the work.
// DDP's buckets and PS's pushes overlap it.
inline constexpr double kBackwardShareOfStep = 2.0 / 3;

// The model a cluster simulation moves and computes.
struct SimulatedModel {
  std::string name;                 // A preset, a ringside spec, or "" (given by size).
  std::string description;          // For the header.
  double bytes = 0;                 // M: fp32 parameters = gradients, bytes.
  std::vector<double> layer_bytes;  // Layer order; empty: unknown (buckets ignore layers).
  double flops_per_step = 0;        // One device's forward + backward at the batch; 0: unknown.
  std::string flops_source;
};

// The model of `simulate --model=NAME|SPEC` (a preset of model_presets.h or a ringside
// spec, weighed by calibration_check.h WeighModel: bytes, layers and GEMM FLOPs at
// `batch`; no FLOPs when batch is 0) or of `--model_mb=MB [--layers_mb=a,b,...]`
// (megabytes of 1e6 bytes; the layers, when given, must add up to the total, which may
// then be 0). InvalidArgument / NotFound, one line: both or neither given, an unknown
// preset, a spec that does not build, sizes <= 0 or that do not add up.
absl::StatusOr<SimulatedModel> ResolveSimulatedModel(const std::string& model, int batch,
                                                     double model_mb,
                                                     const std::vector<double>& layers_mb);

struct ClusterSimulateOptions {
  ClusterProfile cluster;
  SimulatedModel model;
  int batch = 0;       // Per device; 0: not given (then step_s is needed).
  double step_s = 0;   // One device's step; 0: the profile's (TargetStepSeconds).
  std::vector<int> workers;  // Empty: 1, 2, 4, ..., 1024.
  std::vector<int> shards = {1, 2, kShardsPerWorker};
  bool shards_colocated = false;  // PS shards inside the workers instead of server nodes.
  // Overrides of the profile: the NIC's one-way latency (-1: the profile's) and its
  // rate, one table per entry (empty: the profile's NIC).
  double link_latency_s = -1;
  std::vector<double> link_bytes_per_s;
  double bucket_cap_bytes = 0;  // DDP's bucket cap; 0: the reducer's default.
  bool overlap = true;          // DDP buckets during backward.
  // Where the PS rows' tensors live (--ps_placement): whole-tensor placements deal the
  // model's layers (a layer's weight and bias as one tensor: the layer list of a preset)
  // and the busiest standalone shard bounds each row; refused without layers.
  PsPlacement ps_placement = PsPlacement::kBalanced;
  bool ps_summation = false;  // As in SimulateOptions.
  bool worker_summers = false;  // As in SimulateOptions.
  double ps_chunk_bytes = 0;  // As in SimulateOptions.
  WireFormat wire_format = WireFormat::kFp32;  // As in SimulateOptions.
};

// One device's step for `options`: step_s when given, else TargetStepSeconds of the
// profile for the model at the batch. FailedPrecondition, one line naming the cluster,
// the model and what to give (--step_ms, --batch), when neither is known.
absl::StatusOr<double> ClusterStepSeconds(const ClusterSimulateOptions& options);

// The calibration that stands for a described device: compute_s = step_s, backward
// kBackwardShareOfStep of it, and nothing else (no software path: the wire alone; no
// update or summing cost: on a device they are part of the step or negligible).
Calibration DeviceCalibration(double step_s);

// The sweep over one link (bytes/s; 0: the profile's NIC) of `options`: every node of
// cluster.devices_per_node devices behind one NIC, the intra-node path between them.
absl::StatusOr<SweepOptions> ClusterSweep(const ClusterSimulateOptions& options, double link_bytes_per_s);

// The curves for one link (as ClusterSweep), from DeviceCalibration(ClusterStepSeconds).
absl::StatusOr<std::vector<Curve>> PredictClusterCurves(const ClusterSimulateOptions& options,
                                                        double link_bytes_per_s);

// Writes the cluster, the model, the step and how the links are modelled, then a table
// per link and the crossovers, to `out` (borrowed). Errors as ClusterStepSeconds and
// Predict; nothing is printed when the step is unknown.
absl::Status RunClusterSimulate(const ClusterSimulateOptions& options, FILE* out);

// ----- Command-line lists -----

// "8,32,100": worker counts >= 1, any order kept. InvalidArgument, one line, for an
// empty list, 0, a negative or a non-number.
absl::StatusOr<std::vector<int>> ParseWorkerList(absl::string_view text);
// "1,2,N": shard counts >= 1 (>= 0 with `zero_allowed`: servers beside the workers'
// summers), "N" for kShardsPerWorker. InvalidArgument as above.
absl::StatusOr<std::vector<int>> ParseShardList(absl::string_view text, bool zero_allowed = false);
// "102.8,16.8,4.1": sizes > 0 (MB). InvalidArgument as above.
absl::StatusOr<std::vector<double>> ParseSizeList(absl::string_view text);

// File helpers for the CLI: the JSON of CalibrationToJson. NotFound / Internal for I/O
// errors; CalibrationFromJson's errors for bad content.
absl::StatusOr<Calibration> ReadCalibrationFile(const std::string& path);
absl::Status WriteCalibrationFile(const Calibration& calibration, const std::string& path);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_SIMULATE_H_
