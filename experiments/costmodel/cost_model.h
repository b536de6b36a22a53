// The cost model behind `ringside calibrate` and `ringside simulate`: closed-form step
// times for the parameter server (S shards, standalone or colocated in workers), the
// ring all-reduce, halving-doubling and recursive doubling, from a handful of calibrated
// constants.
// Formulas, derivations and sources: docs/cost_model.md.
//
// Units everywhere: seconds, bytes, bytes per second (one direction of a full-duplex
// link). Every function here is pure and thread-compatible; nothing is global.
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_COST_MODEL_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_COST_MODEL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/ps_placement.h"
#include "common/wire_format.h"
#include "ddp_ring/lossy_compressor.h"

namespace ringside {

// time(message of m bytes) = alpha_s + m / bytes_per_s, in the terms of the formula the
// path is used in (see FitAllReducePath / FitPushPullPath).
struct PathCalibration {
  double alpha_s = 0;      // Per-message latency (software + wire), seconds.
  double bytes_per_s = 0;  // Per-direction bandwidth; 0 means "not calibrated".
};

// What `ringside calibrate` measures on the real code path. Its file is JSON
// (calibration_json.h, calibration.proto).
struct Calibration {
  // Forward + backward of one step on one worker's batch (single process, no
  // communication), seconds.
  double compute_s = 0;
  // The backward part of compute_s (0 <= backward_s <= compute_s); DDP's buckets
  // overlap with it.
  double backward_s = 0;
  // The optimizer step (SGD with momentum) per parameter byte: single-process update
  // time / model bytes. Applied to M on a DDP rank and to the shard's slice on a shard.
  double update_s_per_byte = 0;
  // gamma: cost of adding one byte of gradients into an accumulator (CPU sum).
  double reduce_s_per_byte = 0;
  // The CPU a ring all-reduce costs a rank per byte it sends (its reduction and the
  // kernel's socket work included), measured at full speed. On a node whose CPU share
  // the compute already fills, the transfers that overlap backward take this CPU from
  // it (PredictAllReduce). 0: not measured (files from before it was).
  double allreduce_cpu_s_per_byte = 0;
  // The CPU one end of a PS push-pull (a worker's or a shard's) costs per byte it
  // sends or receives, measured on the emulated node beside the model's compute
  // (calibrate's PS CPU phase: the compute's pace lost to push-pulls beside it), over
  // gRPC and over the TCP data plane. On a node share the compute fills, the ends on a
  // node take it from that node's compute (PredictPs). 0: not measured (calibrated off
  // a node, or files from before it was); the TCP one 0: the gRPC one stands for it.
  double push_pull_cpu_s_per_byte = 0;
  double push_pull_tcp_cpu_s_per_byte = 0;
  // The link those two were measured through, bytes/s each way: the rate the cells'
  // links are shaped to (a shard on a second emulated node; calibrate.h ps_cpu_link),
  // where bytes arrive at the link's pace as in the cells. 0: back to back on loopback.
  double ps_cpu_link_bytes_per_s = 0;
  // The CPU to encode one float32 value into fp16 / bf16 and decode it back
  // (common/wire_format.h: EncodeWire, then DecodeWire), seconds, measured like gamma
  // (16 MiB buffers, out of cache, on the node's share): what the compressed ring adds
  // per value of a bucket (each rank encodes every value once and decodes every value
  // once; its sums decode and add, gamma's term). 0: not measured (files from before).
  double fp16_codec_s_per_value = 0;
  double bf16_codec_s_per_value = 0;
  // The lossy compressors' CPU (ddp_ring/lossy_compressor.h), measured like the codecs
  // by running the compressor itself on a group of one rank: top-k's whole encode and
  // decode (error feedback, momentum correction, selection of the largest 1%, the sparse
  // sum) per value of a bucket of 16 MiB, and PowerSGD's per flop of its GEMMs (6 m n r;
  // a 1024 x 1024 weight at rank 4, orthonormalisation and copies included). 0: not
  // measured (files from before): not modelled.
  double topk_codec_s_per_value = 0;
  double powersgd_codec_s_per_flop = 0;
  // The BSP join on emulated nodes, sigma: on a node share a worker's stream runs at a
  // pace that varies from step to step (the node's quota runs its senders and readers
  // in bursts), and under BSP a step's replies wait for the slowest of N workers' pushes.
  // Calibrate runs the PS itself through the cluster's link on node shares with one
  // worker and one shard, then with two and two (the same bytes through every link),
  // and keeps the difference of their median communication after backward per step
  // over what the slowest of two normal draws adds, per second of the wire time that
  // backward does not hide:
  //   sigma = (T_2 - T_1) / (e_2 x (M / B - backward)),
  // e_N the expected largest of N standard normal draws (ExpectedMaxOfNormals). PredictPs
  // adds sigma x e_N x a worker's exposed one-way time. 0: not measured (no cluster
  // link; backward hiding most of M / B; files from before it was): no join term.
  double ps_join_sigma = 0;
  // One worker <-> one shard combined push-pull, transfer only: time for a model of M
  // bytes = alpha + M / bytes_per_s (both directions pipelined on a full-duplex link).
  PathCalibration push_pull;
  // The same path over the PS's TCP data plane (`--ps_transport=tcp`, ps_server/README.md);
  // bytes_per_s 0: not measured (files from before it was): push_pull stands for it.
  PathCalibration push_pull_tcp;
  // Raw TCP: one loopback connection moving 16 MiB one way in 1 MiB frames (experiments/bench/
  // raw_tcp_bench.h), measured in the same run as the paths: the rate each path is set
  // beside (what its transport adds over the bare socket). No prediction uses it. 0:
  // not measured (files from before it was).
  double raw_tcp_bytes_per_s = 0;
  // Serial cost of each further push-pull call a node handles in one step (issued or
  // served), beyond the one call that push_pull.alpha_s covers: a worker of a job with S
  // shards issues S calls, a shard of N workers serves N. 0: calls to and at a node
  // overlap completely. See FitPerCallOverhead.
  double push_pull_per_call_s = 0;
  // The all-reduce backend (ring): alpha and B of the ring formula.
  PathCalibration allreduce;
  // The backend's halving-doubling, if measured separately; bytes_per_s == 0: use
  // `allreduce`.
  PathCalibration halving_doubling;
  // The model the compute times were measured on (informational; RunSimulate uses it
  // when its own model_bytes is 0).
  double model_bytes = 0;
  // What the compute times were measured with: the model spec ("mlp:784-256-256-10",
  // "cnn:lenet"), the per-worker batch and the BLAS threads. Empty / 0 in files
  // written before ringside recorded them. CheckCalibrationFits (calibration_check.h)
  // compares them with a run's.
  std::string model;
  int batch = 0;
  int threads = 0;
  // The CPU share of the emulated node the compute, SGD and gamma were measured on
  // (`ringside calibrate --node_cpus`); 0: the machine's cores, unthrottled.
  double node_cpus = 0;
};

// Least-squares fit of time = alpha + bytes / B to (message bytes, seconds) samples, the
// residuals weighted by 1 / seconds (relative error), so that a sweep from kilobytes to
// tens of megabytes fits the small sizes' latency as well as the large sizes' slope.
// A negative intercept (noise) is clamped to 0. InvalidArgument for fewer than 2
// distinct sizes, a negative or non-finite sample, a non-positive time, or a fitted
// slope <= 0 (no positive bandwidth).
// OK if every constant is finite and >= 0 and backward_s <= compute_s; otherwise
// InvalidArgument naming the field.
absl::Status ValidateCalibration(const Calibration& calibration);

// The calibration's paths set beside raw TCP measured in the same run, per byte each
// way: "raw TCP 2.10 GB/s one way on loopback; PS push-pull over gRPC 0.77 GB/s (37%),
// over TCP 1.56 GB/s (74%); ring all-reduce 0.87 GB/s (41%)" (a path not measured is
// left out). "" where raw TCP was not measured.
std::string TransportsBesideRawTcp(const Calibration& calibration);

absl::StatusOr<PathCalibration> FitLatencyBandwidth(
    const std::vector<std::pair<double, double>>& samples);

// kAuto: per bucket, what the DDP process group's `--allreduce=auto` runs for it
// (ResolveAllReduceAlgorithm in ddp_ring/allreduce_algorithm.h).
enum class Strategy { kPs, kRing, kHalvingDoubling, kRecursiveDoubling, kAuto };

// "ps", "ring", "halving-doubling", "recursive-doubling", "auto".
const char* StrategyName(Strategy strategy);

// Converts an all-reduce sweep measured with `ranks` ranks (samples: bytes reduced,
// seconds per all-reduce) into the path constants of the ring (or halving-doubling)
// formula: the fitted intercept is c_a * alpha and the slope c_b / B + c_g * gamma, with
// (c_a, c_b, c_g) = (2(N-1), 2(N-1)/N, (N-1)/N) for the ring and (2 lg N, 2(N-1)/N,
// (N-1)/N) for halving-doubling (N a power of two). `reduce_s_per_byte` is gamma.
// InvalidArgument for ranks < 2, halving-doubling at a non-power-of-two, kPs, or when
// the reduction cost alone exceeds the slope.
absl::StatusOr<PathCalibration> FitAllReducePath(
    const std::vector<std::pair<double, double>>& samples, int ranks, Strategy algorithm,
    double reduce_s_per_byte);

// Converts a one-worker, one-shard push-pull sweep (samples: model bytes, seconds per
// push-pull) into the transfer-only push_pull path. `shard_s_per_byte` is the per-byte
// work the timed call did besides the transfer (the shard's SGD: update_s_per_byte when
// the sweep ran SGD on the shard, as `ringside bench pushpull` does; 0 otherwise); it is
// subtracted from the slope. InvalidArgument when nothing positive is left.
absl::StatusOr<PathCalibration> FitPushPullPath(
    const std::vector<std::pair<double, double>>& samples, double shard_s_per_byte);

// Fits push_pull_per_call_s from (calls a node handles per step, seconds per step)
// samples of push-pulls of a tiny model (e.g. one worker against S = 1, 2, 4, 8 shards):
// the least-squares slope, clamped to 0 when the calls overlap completely.
// InvalidArgument for fewer than 2 distinct call counts or a bad sample.
absl::StatusOr<double> FitPerCallOverhead(const std::vector<std::pair<double, double>>& samples);

// One configuration to predict.
struct Scenario {
  Strategy strategy = Strategy::kRing;
  int workers = 1;      // N >= 1.
  int shards = 1;       // PS: S >= 1.
  // PS: the shards run inside workers instead of on their own server nodes.
  bool colocated = false;
  // PS colocated: how many workers host the shards. 0: min(S, N), i.e. one shard per
  // worker when S = N (the ring-like layout); 1: every shard in worker 0, which is
  // what `ringside train --strategy=ps --ps_colocated` does.
  int colocated_hosts = 0;
  double model_bytes = 0;  // M: parameters = gradients per step.
  // Wire bandwidth of every worker's link, bytes/s per direction. 0: the calibrated
  // path bandwidth.
  double link_bytes_per_s = 0;
  // One-way wire latency from node to node, seconds (with the network emulator's
  // delay=D on every link: 2 D, the sender's upload plus the receiver's download). An
  // all-reduce step waits for it once, a push-pull twice (request out, reply back).
  // -1: the calibrated alpha alone.
  double link_latency_s = -1;
  // The link of a node that hosts PS shards (standalone server, or the hosting worker
  // when colocated). 0: the same as link_bytes_per_s.
  double master_link_bytes_per_s = 0;
  // With a wire given: true keeps the calibrated software path in the picture (the
  // effective bandwidth is min(wire, calibrated path) and the wire latency is added to
  // the calibrated alpha); false uses the wire's numbers alone.
  bool path_limits = true;
  // DDP: launch buckets during backward (PyTorch DDP style); false: after backward.
  bool overlap = true;
  // PS: workers push each chunk as backward produces it (as ringside's PS worker does),
  // so the one-way transfer T overlaps backward: the step waits for max(0, T -
  // backward) plus the unpipelined reply of the last chunk (below). false: the whole
  // push-pull after backward, T (1 + unpipelined).
  bool ps_overlap = false;
  // PS: the tensors go over the TCP data plane (`--ps_transport=tcp`): the calibration's
  // push_pull_tcp path where it was measured. false: gRPC's, push_pull.
  bool ps_tcp = false;
  // PS with standalone shards: the share of M the busiest shard holds, where a placement
  // (common/ps_placement.h) deals whole tensors; its link carries N x that share each
  // way and it sums and steps that share. 0: an even cut, 1 / S.
  double busiest_shard_fraction = 0;
  // PS: summation servers (`--ps_mode=summation`, BytePS): the servers only sum (the
  // busiest one its slice of N gradients), and every worker steps SGD on all of M
  // itself. The bytes are the optimizer shards': gradients up, the mean down.
  bool ps_summation = false;
  // PS summation: every worker also hosts a summer (`--ps_worker_summers`), beside
  // `shards` = k dedicated servers (0 allowed, k < N), slices by BytePS's optimum
  // (common/ps_layout.h): each server's link carries N x 2(N-1)M/D each way, each
  // worker's M + (N-2)(N-k)M/D, D = N^2 + kN - 2k; one worker a node.
  bool worker_summers = false;
  // PS: chunk size of the tensor streams. A shard can send a chunk back only once all
  // N workers pushed it, so the last pushed chunk's reply never overlaps the push: the
  // transfer takes T (1 + min(chunk, M/S) / (M/S)) for a one-way bottleneck time T. 0:
  // perfect pipelining (T).
  double chunk_bytes = 0;
  // Emulated nodes (netem/cpu_share.h). CPU share of each node, in CPUs; 0: none. The
  // calibration's CPU-bound costs (compute, update, reduction) were measured on
  // e(calibration.node_cpus) CPUs, where e(x) = min(max(1, threads), x) and e(0) =
  // max(1, threads); a process that gets `cpus` of a node runs them e(calibrated) /
  // e(cpus) times as long.
  double node_cpus = 0;
  // Computing processes (DDP ranks, PS workers; a cluster's devices) per node g: they
  // split its CPU share (a PS shard packed beside a worker mostly waits while the
  // worker computes, and is not counted) and its link (the NIC). Ranks are laid out
  // node by node (rank r on node r / g). A ring's node carries one ring edge each way
  // through its link (2(N-1)/N x M), the other g - 1 edges on the intra-node path;
  // halving-doubling's and recursive doubling's steps whose partners sit on other
  // nodes put all g ranks' messages through the node's link; PS workers packed g to a
  // node (not colocated) push and pull g models through it; colocated shards serve
  // their node's workers over the intra-node path. docs/cost_model.md, "Simulating a
  // described cluster".
  int ranks_per_node = 1;
  // The path between two ranks of one node (NVLink, PCIe; loopback inside an emulated
  // node), bytes/s each way per rank; 0: the same as link_bytes_per_s (or the
  // calibrated path). Used with ranks_per_node > 1.
  double intra_node_bytes_per_s = 0;
  // Its one-way latency, seconds; -1: as link_latency_s.
  double intra_node_latency_s = -1;
  // One node (a DDP rank, a PS worker) gets this fraction of the others' CPU share
  // (0 < F <= 1; 1: none slower). Under BSP and DDP every step waits for its compute.
  // Ignored with one worker.
  double slow_node_fraction = 1;
  // The format gradients take on the wire (--compress): float32, or fp16 / bf16. DDP: the
  // compressed ring (half the transfers' bytes and their CPU, plus the format's encode
  // and decode, Calibration::CodecSecondsPerValue; always the ring). PS: the TCP data
  // plane's push-pulls (half their bytes, plus the workers' and shards' codec).
  WireFormat wire_format = WireFormat::kFp32;
  // DDP under --compress=topk:F|powersgd:R: each bucket's payload (LossyPayloadOf), in
  // bucket_bytes' order and count. A bucket's reduction runs its collectives on the
  // payload (top-k: a ring all-gather of every rank's 2k floats, at the ring's step
  // count; PowerSGD: two all-reduces of the algorithm's choice) and, serially with them,
  // its encode and decode (selection, or GEMMs). Empty: not lossy.
  std::vector<LossyPayload> lossy_buckets;
  // DDP bucket sizes in launch order (the first holds the last layers); must add up to
  // model_bytes. Empty: a first bucket of 1 MiB, then 25 MiB buckets (the reducer's
  // defaults, ignoring layer boundaries).
  std::vector<double> bucket_bytes;
};

// The calibrated encode-and-decode CPU of one value in `format` (0 for float32, or where
// not measured).
double CodecSecondsPerValue(const Calibration& c, WireFormat format);

// e_N: the expected largest of n independent standard normal draws (0 for n = 1;
// 0.5642 for 2, 1.0294 for 4, 3.2482 for 1024), by quadrature of
// n x phi(x) x Phi(x)^(n-1) x x. n >= 1.
double ExpectedMaxOfNormals(int n);

// A predicted step. step_s = compute_s + comm_s + update_s.
struct Prediction {
  // Forward + backward on the worker, comm_cpu_s included.
  double compute_s = 0;
  // DDP on a node share the compute fills: what the transfers overlapping backward
  // take from the node's CPU, so backward ends this much later (0 otherwise).
  double comm_cpu_s = 0;
  // Communication on the step's critical path: for DDP what backward did not hide; for
  // PS the push-pull (alpha + per-call overheads + transfer; with ps_overlap, less
  // what backward hid).
  double comm_s = 0;
  // DDP: the rank's SGD on M. PS: the busiest shard node's aggregation of N gradients
  // plus its SGD on its slice (summation servers: the aggregation plus the worker's SGD
  // on M).
  double update_s = 0;
  double step_s = 0;
  // Communication if nothing overlapped (DDP: all buckets back to back; PS: the
  // push-pull after backward).
  double comm_total_s = 0;
  // PS on emulated nodes: the part of comm_s that waits for the slowest worker's
  // stream (ps_join_sigma x e_N x a worker's one-way time less what backward hides; 0
  // where not calibrated).
  double join_s = 0;
  // Bytes through the busiest node's link (its NIC) per step, each direction.
  double busiest_node_bytes_in = 0;
  double busiest_node_bytes_out = 0;
  // What limits the step, one of: "compute", "update", "latency", "worker link" (the
  // busiest NIC of nodes that host no PS shard, or any node's for an all-reduce),
  // "master link" (the busiest PS server's NIC), "intra-node" (the path inside a node),
  // "reduction".
  std::string bottleneck;
  // The largest part of communication (latency, a link, intra-node, reduction), even
  // where compute is the larger part of the step.
  std::string comm_bottleneck;
};

// The bandwidth a prediction used on its busiest link: bytes through the busiest NIC
// over all the step's communication (comm_total_s); 0 when nothing crossed a NIC.
double UsedBytesPerSecond(const Prediction& prediction);

// How ringside's own PS worker runs a step (ps_worker/ps_strategy.h): it pushes each
// chunk as backward announces its gradients, on streams of `chunk_bytes` chunks (0:
// kDefaultPsChunkBytes, `--ps_chunk_kb`'s default). Sets scenario->ps_overlap and
// chunk_bytes to that. `report` and `simulate` both
// predict ringside's PS with it, so the two give a cell the same step time; Scenario's
// own defaults (no overlap, perfect pipelining) are the textbook's bound.
void UseRingsidePsSchedule(Scenario* scenario, double chunk_bytes = 0);
// One phrase for headers: "PS pushes overlap backward (1 MiB chunks; the last chunk's
// reply does not)".
std::string DescribeRingsidePsSchedule(double chunk_bytes = 0);

// DDP's buckets in launch order (reverse layer order, ddp_ring/reducer.h ComputeBuckets):
// `layer_bytes` in layer order (empty: layers unknown, the model cut into pieces
// regardless of layers), a first bucket capped at `first_bucket_bytes`, the others at
// `bucket_cap_bytes` (0: the reducer's defaults). A layer larger than a cap is one
// bucket of its own. The buckets add up to `model_bytes` (the layers' sum when given).
std::vector<double> DdpBucketBytes(const std::vector<double>& layer_bytes, double model_bytes,
                                   double first_bucket_bytes, double bucket_cap_bytes);

// Predicts one step of `scenario`. InvalidArgument for impossible inputs (N < 1, S < 1,
// negative sizes or costs, backward_s > compute_s, no positive bandwidth where bytes
// must move, bucket sizes that do not add up to the model).
//
// Halving-doubling at a non-power-of-two N: the N - p extra ranks (p the largest power
// of two below N) first fold their whole vector into a partner and get the result back
// at the end: T_hd(p) + 2 alpha + 2 M / B + M gamma. Recursive doubling: lg p alpha +
// lg p M / B + lg p M gamma, with the same fold-in on top; it runs on the all-reduce
// path's alpha and B (calibrated with the ring).
absl::StatusOr<Prediction> Predict(const Calibration& calibration, const Scenario& scenario);

// The push-pull path `scenario`'s PS moves its tensors on: push_pull_tcp where the
// scenario is on TCP (ps_tcp) and the calibration measured it, else push_pull.
const PathCalibration& PushPullPath(const Calibration& calibration, const Scenario& scenario);

// The calibration as seen by a process of `scenario`'s emulated nodes: the CPU-bound
// costs scaled for the node's CPU share split over its computing processes, and the
// compute divided by slow_node_fraction (see Scenario). Predict applies it.
Calibration CalibrationOnNode(const Calibration& calibration, const Scenario& scenario);

// The single-process step the speedups are relative to: compute_s + update_s_per_byte *
// model_bytes (of CalibrationOnNode's for a baseline on an emulated node).
double SingleProcessStepSeconds(const Calibration& calibration, double model_bytes);

// Weak scaling (fixed per-worker batch): N * T_single / T_step(N), the single process
// on one node of scenario.node_cpus (full speed, no slow node).
double Speedup(const Calibration& calibration, const Scenario& scenario,
               const Prediction& prediction);

// 1, 2, 4, ..., max_workers (max_workers itself only if it is a power of two).
std::vector<int> PowersOfTwo(int max_workers);

// In SweepOptions::shards: S = N, one shard per worker (standalone: one server node per
// worker). Not 0, which with worker summers is k = 0 (only the workers' summers).
inline constexpr int kShardsPerWorker = -1;

// A sweep over N of the standard strategies for one link.
struct SweepOptions {
  double model_bytes = 0;
  double link_bytes_per_s = 0;  // As in Scenario (0: calibrated paths).
  double link_latency_s = -1;
  double master_link_bytes_per_s = 0;
  bool path_limits = true;
  bool overlap = true;
  std::vector<int> workers;        // Empty: PowersOfTwo(1024).
  // PS curves, one per entry: S shards ("PS S=<s>"), kShardsPerWorker for S = N ("PS
  // S=N"); on server nodes of their own, or inside the workers with shards_colocated
  // (" colocated" appended to the label).
  std::vector<int> shards = {1};
  bool shards_colocated = false;
  bool colocated = true;           // Adds "PS S=N colocated" (one shard per worker).
  // Nodes with several devices (Scenario): ranks per node and the intra-node path.
  int ranks_per_node = 1;
  double intra_node_bytes_per_s = 0;
  double intra_node_latency_s = -1;
  // DDP buckets: the model's layers in layer order (empty: unknown) and the bucket cap
  // (0: the reducer's default); see DdpBucketBytes.
  std::vector<double> layer_bytes;
  double bucket_cap_bytes = 0;
  // DDP rows: the gradients' format on the wire (Scenario::wire_format; fp16 or bf16:
  // --compress, every DDP row on the compressed ring). PS rows: float32.
  WireFormat wire_format = WireFormat::kFp32;
  // PS placement (common/ps_placement.h) of the model's tensors (`tensor_bytes`, model
  // order): standalone PS curves take their busiest shard's share (BusiestShare) at
  // each S. Balanced, or no tensors: an even cut.
  PsPlacement ps_placement = PsPlacement::kBalanced;
  std::vector<double> tensor_bytes;
  // PS curves of summation servers (Scenario::ps_summation; " summation" appended to
  // their labels).
  bool ps_summation = false;
  // With ps_summation: a summer in each worker beside each curve's S dedicated servers
  // (Scenario::worker_summers; " + summers" in the label); at N <= S the servers alone,
  // where BytePS's optimum leaves the workers nothing.
  bool worker_summers = false;
  double ps_chunk_bytes = 0;  // The PS streams' chunk size (0: the default).
  // Emulated nodes, as in Scenario: each node's CPU share (0: none) and one node at a
  // fraction of it (1: none slower).
  double node_cpus = 0;
  double slow_node_fraction = 1;
};

// One strategy's predictions over the sweep's N.
struct Curve {
  std::string label;  // "PS S=1", "PS S=N colocated", "ring", "halving-doubling".
  std::vector<int> workers;
  std::vector<Prediction> predictions;  // predictions[i] is for workers[i].
  std::vector<double> speedups;
};

// The curves of a sweep, in the order: PS S=s for each s, PS S=N colocated, ring,
// halving-doubling. PS curves run UseRingsidePsSchedule. Fails as Predict does.
absl::StatusOr<std::vector<Curve>> PredictCurves(const Calibration& calibration,
                                                 const SweepOptions& options);

// Where one curve overtakes another: `faster_before` had the lower step time at
// workers_before (and since the last flip), `faster_after` has it from `workers` on.
struct Crossover {
  std::string faster_before;
  std::string faster_after;
  int workers_before = 0;
  int workers = 0;
  // Where the step-time difference crosses zero, interpolated linearly in log2 N.
  double workers_interpolated = 0;
};

// Every flip of the ordering between every pair of curves (which must share their
// workers), in pair order then N order. Relative differences under 1e-9 count as ties
// and never start or end an ordering.
std::vector<Crossover> FindCrossovers(const std::vector<Curve>& curves);

// PredictCurves, then FindCrossovers.
absl::StatusOr<std::vector<Crossover>> FindCrossovers(const Calibration& calibration,
                                                      const SweepOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_COST_MODEL_H_
