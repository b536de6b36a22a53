// What a training job runs, checked once for every strategy: the RunConfig's
// validation, the options every job takes besides it, the SGD settings it names, and
// the "same configuration on every rank" comparison that names the differing field
// (DDP ranks compare through the store, PS shards at registration).
#ifndef RINGSIDE_COMMON_RUN_CONFIG_H_
#define RINGSIDE_COMMON_RUN_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/ops.h"
#include "common/ringside.pb.h"
#include "common/wire_format.h"

namespace ringside {

// How long a process of a distributed job waits on its peers (rendezvous, a
// collective, the slowest worker) before the job fails.
inline constexpr absl::Duration kDefaultPeerTimeout = absl::Seconds(60);
// RunConfig.ps_transport's values (--ps_transport): what carries the PS's tensors.
inline constexpr char kPsTransportGrpc[] = "grpc";
inline constexpr char kPsTransportTcp[] = "tcp";
// The PS's data plane where a job names none (RunConfig.ps_transport unset): frames over
// TCP, which moves a push-pull at the ring's cost per byte (docs/benchmarks.md). gRPC's
// streams remain for TLS (the TCP data plane is not encrypted).
inline constexpr char kPsTransportDefault[] = "tcp";
// The transport a configuration's PS moves its tensors on: ps_transport, or the default
// where it is unset. Every reader of the field goes through this.
absl::string_view PsTransportOf(const RunConfig& config);
// Stores `transport` ("" or a name) in config->ps_transport in canonical form: unset
// for the default, so that configurations built by different paths compare equal.
void SetPsTransport(absl::string_view transport, RunConfig* config);
// A --ps_transport value as the transport it names: "" is the default, "grpc" and
// "tcp" themselves; else InvalidArgument "unknown --ps_transport 'X' (expected grpc or
// tcp)". The one check of the names.
absl::StatusOr<std::string> ParsePsTransport(absl::string_view name);
// RunConfig.ps_mode's values (--ps_mode): whether the PS's servers run the optimizer
// or only sum the gradients (summation servers, as BytePS).
inline constexpr char kPsModeOptimizer[] = "optimizer";
inline constexpr char kPsModeSummation[] = "summation";
// OK for "", kPsModeOptimizer or kPsModeSummation; else InvalidArgument "unknown
// --ps_mode 'X' (expected optimizer or summation)". The one check of the names.
absl::Status CheckPsModeName(absl::string_view mode);
// A --compress value (RunConfig.compress), parsed:
//   "" / "none"        nothing;
//   "fp16" / "bf16"    every value on the wire in that 2-byte format (wire);
//   "topk:F"           each rank sends its F x n largest-magnitude gradients of a bucket
//                      of n (values and indices), 0 < F <= 1, with error feedback;
//   "powersgd:R"       PowerSGD of rank R >= 1 (Vogels et al., NeurIPS 2019): a bucket's
//                      m x n weights travel as R (m + n) floats, warm-started, with
//                      error feedback.
// ":no_ef" after topk:F or powersgd:R turns error feedback off (to show its loss).
struct Compression {
  enum class Method { kNone, kWire, kTopK, kPowerSgd };
  Method method = Method::kNone;
  WireFormat wire = WireFormat::kFp32;  // kWire: the format; fp32 otherwise.
  double topk_fraction = 0;             // kTopK: F.
  int powersgd_rank = 0;                // kPowerSgd: R.
  bool error_feedback = true;           // kTopK, kPowerSgd: residuals kept per rank.
  bool lossy() const { return method == Method::kTopK || method == Method::kPowerSgd; }
};
// InvalidArgument in one line naming the value for an unknown method ("unknown
// --compress 'X' (expected none, fp16, bf16, topk:F or powersgd:R)"), F outside (0, 1],
// R < 1 or not a number, or an unknown suffix. The one check of the names.
absl::StatusOr<Compression> ParseCompressionSpec(absl::string_view name);
// The format gradients travel in under --compress=`name` (ParseCompressionSpec's wire:
// kFp32 for none, topk and powersgd).
absl::StatusOr<WireFormat> ParseCompression(absl::string_view name);
// Where --compress=`compress` can run: a known name (ParseCompressionSpec), and, unless
// it is none, DDP (`strategy` "ddp") on `backend` gloo (fp16 / bf16: with `allreduce`
// "", auto or ring, the compressed ring), or, for fp16 / bf16, the PS (`strategy` "ps")
// on `ps_transport` "tcp" ("": the default transport; its data plane's push-pulls).
// InvalidArgument "--compress=X ..." otherwise. The one check, for the command line
// (ValidateRunConfig) and experiment specs.
absl::Status CheckCompression(absl::string_view compress, absl::string_view strategy, absl::string_view backend,
                              absl::string_view allreduce, absl::string_view ps_transport = "");
// Samples per forward pass when evaluating.
inline constexpr int kDefaultEvalBatch = 1000;

// The defaults of a training run, one set for the command line (experiments/cli/
// flags.cc) and for experiment specs (experiments/matrix/spec.cc, fields left unset).
// One BLAS thread per process, as torchrun's OMP_NUM_THREADS=1 and as `calibrate`
// measures; --threads=0 leaves the count to OpenBLAS (every core).
inline constexpr char kDefaultStrategy[] = "single";
inline constexpr char kDefaultModel[] = "mlp:784-256-256-10";
inline constexpr char kDefaultDataset[] = "fashion-mnist";
inline constexpr int kDefaultEpochs = 5;
inline constexpr int kDefaultBatch = 128;
inline constexpr double kDefaultLr = 0.02;
inline constexpr double kDefaultMomentum = 0.9;
inline constexpr double kDefaultWeightDecay = 0.0;
// RunConfig.nan_policy's values (numerical safety): stop the job at the first
// non-finite loss, gradient or update (the default; empty means it), or discard that
// step's update and go on.
inline constexpr char kNanPolicyStop[] = "stop";
inline constexpr char kNanPolicySkipStep[] = "skip_step";
inline constexpr uint64_t kDefaultSeed = 1;
inline constexpr int kDefaultThreads = 1;
inline constexpr int kDefaultGradAccum = 1;
inline constexpr bool kDefaultPrefetch = true;
inline constexpr char kDefaultDevice[] = "cpu";
inline constexpr char kDefaultPrecision[] = "fp32";
// Checkpoints a run keeps (--keep_checkpoints): the newest and the one before it, to
// fall back to when the newest is damaged (common/checkpoint.h).
inline constexpr int kDefaultKeepCheckpoints = 2;

// Most replicas (threads) of a DataParallel run (--strategy=dp --workers).
inline constexpr int kMaxDataParallelReplicas = 64;

// A RunConfig of the defaults above (strategy-independent fields only; strategies'
// own fields stay unset: each strategy sets what it uses).
RunConfig DefaultRunConfig();

// What every strategy's job takes besides its strategy-specific options.
struct RunOptions {
  RunConfig config;               // model, dataset, epochs, batch, SGD, seed, ...
  std::string out_dir;            // metrics.jsonl, trace.json, checkpoint.bin; empty: none.
  bool resume = false;            // Continue from out_dir's newest intact checkpoint.
  int64_t checkpoint_every = 0;   // Also checkpoint every N steps (0: epoch ends only).
  int keep_checkpoints = kDefaultKeepCheckpoints;  // Checkpoints kept in out_dir (>= 1).
  int eval_batch = kDefaultEvalBatch;
};

// The checks every strategy runs before anything is loaded or started. One
// InvalidArgument line naming the flag: "--batch must be >= 1, got 0". Checks batch,
// epochs, steps, lr, grad_accum and threads, that lr, momentum and weight_decay are
// finite and nan_policy (Sgd::Create checks the other SGD settings; each strategy
// checks its own fields), and for strategy "dp" (one process) its replicas (world_size in [1, kMaxDataParallelReplicas]), grad_accum 1 and the CPU.
absl::Status ValidateRunConfig(const RunConfig& config);

// SGD hyper-parameters of `config` (lr, momentum, weight_decay, nesterov).
SgdHyper SgdHyperFor(const RunConfig& config);

// Field-by-field comparison, "" when equal; otherwise one line naming every
// difference: "modified: lr: 0.02 -> 0.5; added: ...".
std::string ConfigDifference(const RunConfig& reference, const RunConfig& other);

// FailedPrecondition "<other_name> runs a different configuration than
// <reference_name>: modified: lr: 0.02 -> 0.5" when the two differ; OK otherwise.
absl::Status CheckSameConfig(const RunConfig& reference, absl::string_view reference_name,
                             const RunConfig& other, absl::string_view other_name);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_RUN_CONFIG_H_
