#include "common/run_config.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/bugs.h"
#include "common/ops_factory.h"
#include "common/ps_placement.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"

namespace ringside {

RunConfig DefaultRunConfig() {
  RunConfig c;
  c.set_strategy(kDefaultStrategy);
  c.set_model(kDefaultModel);
  c.set_dataset(kDefaultDataset);
  c.set_epochs(kDefaultEpochs);
  c.set_batch(kDefaultBatch);
  c.set_lr(static_cast<float>(kDefaultLr));
  c.set_momentum(static_cast<float>(kDefaultMomentum));
  c.set_weight_decay(static_cast<float>(kDefaultWeightDecay));
  c.set_seed(kDefaultSeed);
  c.set_threads(kDefaultThreads);
  c.set_grad_accum(kDefaultGradAccum);
  c.set_prefetch(kDefaultPrefetch);
  c.set_device(kDefaultDevice);
  c.set_precision(kDefaultPrecision);
  return c;
}

namespace {

// RunConfig.bugs: every name known, and the DDP-only ones only under DDP.
absl::Status ValidateBugs(const RunConfig& c) {
  if (c.bugs().empty()) return absl::OkStatus();
  for (absl::string_view name : absl::StrSplit(c.bugs(), ',')) {
    const BugSwitch* known = nullptr;
    std::vector<std::string> names;
    for (const BugSwitch& b : kBugSwitches) {
      if (name == b.name) known = &b;
      names.push_back(b.name);
    }
    if (known == nullptr) {
      const std::string last = names.back();
      names.pop_back();
      return absl::InvalidArgumentError(absl::StrCat("unknown --bug '", name, "' (expected ",
                                                     absl::StrJoin(names, ", "), " or ", last, ")"));
    }
    if (known->ddp_only && c.strategy() != "ddp") {
      return absl::InvalidArgumentError(absl::StrCat("--bug=", name, " needs --strategy=ddp, got --strategy=",
                                                     c.strategy()));
    }
  }
  return absl::OkStatus();
}

// The training loop's and SGD's settings: batch, epochs, steps, lr, finite SGD
// settings, nan_policy (and where skip_step is exact), grad_accum, threads.
absl::Status ValidateLoopAndSgd(const RunConfig& c) {
  if (c.batch() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--batch must be >= 1, got ", c.batch()));
  }
  if (c.epochs() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--epochs must be >= 1, got ", c.epochs()));
  }
  if (c.max_steps() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--steps must be >= 0, got ", c.max_steps()));
  }
  if (!(c.lr() >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--lr must be >= 0, got ", c.lr()));
  }
  // Numerical safety: a non-finite SGD setting makes every update non-finite. Checked
  // after the flags' conversion to float, so --lr=1e39 (inf as a float) is refused too.
  for (const auto& [flag, value] : {std::pair<const char*, float>{"lr", c.lr()},
                                    {"momentum", c.momentum()},
                                    {"weight_decay", c.weight_decay()}}) {
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " must be finite, got ", value, " (training cannot stay finite)"));
    }
  }
  if (!c.nan_policy().empty() && c.nan_policy() != kNanPolicyStop &&
      c.nan_policy() != kNanPolicySkipStep) {
    return absl::InvalidArgumentError(absl::StrCat("--nan_policy must be ", kNanPolicyStop,
                                                   " or ", kNanPolicySkipStep, ", got '",
                                                   c.nan_policy(), "'"));
  }
  // skip_step discards a step exactly only where the momentum is not carried in the
  // gradients across micro-batches (docs/training.md, "Non-finite values").
  if (c.nan_policy() == kNanPolicySkipStep) {
    if (c.strategy() == "dp") {
      return absl::InvalidArgumentError(
          "--nan_policy=skip_step is not supported with --strategy=dp (use stop)");
    }
    if (c.grad_accum() > 1 && c.strategy() != "ddp") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nan_policy=skip_step needs --grad_accum=1 with --strategy=", c.strategy(),
          ", got ", c.grad_accum()));
    }
  }
  if (c.grad_accum() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grad_accum must be >= 1, got ", c.grad_accum()));
  }
  if (c.threads() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--threads must be >= 0, got ", c.threads()));
  }
  return absl::OkStatus();
}

// Device, precision and backend against the strategy: DDP's backend reduces the memory
// the model computes in; DataParallel's replicas are CPU threads; fp32 on the CPU.
absl::Status ValidateDevice(const RunConfig& c, const DeviceSpec& device,
                            GemmPrecision precision) {
  // DDP: the process group reduces the memory the model computes in.
  if (c.strategy() == "ddp" && device.kind == DeviceKind::kCuda && c.backend() != "nccl") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device=", c.device(), " with --strategy=ddp needs --backend=nccl (--backend=",
        c.backend(), " reduces host memory)"));
  }
  if (c.strategy() == "ddp" && device.kind == DeviceKind::kCpu && c.backend() == "nccl") {
    return absl::InvalidArgumentError(
        "--backend=nccl reduces GPU memory: add --device=cuda (or use --backend=gloo on the CPU)");
  }
  // DataParallel: replicas are threads of this process, each with a CPU backend, and
  // every step scatters one global batch.
  if (c.strategy() == "dp") {
    if (c.world_size() < 1 || c.world_size() > kMaxDataParallelReplicas) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--workers must be in [1, ", kMaxDataParallelReplicas,
          "] with --strategy=dp (replicas: threads of one process), got ", c.world_size()));
    }
    if (c.grad_accum() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--grad_accum=", c.grad_accum(),
          " is not supported with --strategy=dp (each step scatters one global batch)"));
    }
    if (device.kind != DeviceKind::kCpu) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--device=", c.device(),
          " is not supported with --strategy=dp, whose replicas train on the CPU (use "
          "--strategy=ddp on GPUs)"));
    }
  }
  if (device.kind == DeviceKind::kCpu && precision != GemmPrecision::kFp32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--precision=", c.precision(), " needs --device=cuda (the CPU backend computes fp32)"));
  }
  return absl::OkStatus();
}

// Elastic PS (issue 23): a BSP shard goes on while at least ps_min_workers are live.
absl::Status ValidateElastic(const RunConfig& c) {
  if (c.ps_min_workers() != 0) {
    if (c.strategy() != "ps") {
      return absl::InvalidArgumentError("--ps_min_workers needs --strategy=ps");
    }
    if (c.ps_min_workers() < 1 || c.ps_min_workers() > c.world_size()) {
      return absl::InvalidArgumentError(absl::StrCat("--ps_min_workers must be in [1, --workers=",
                                                     c.world_size(), "], got ",
                                                     c.ps_min_workers()));
    }
    if (!c.ps_sync().empty() && c.ps_sync() != "bsp") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--ps_min_workers needs --ps_sync=bsp, got ", c.ps_sync(),
          " (SSP and ASP shards require every worker)"));
    }
  }
  return absl::OkStatus();
}

// The PS's data plane: gRPC's streams or frames over TCP.
absl::Status ValidatePsTransport(const RunConfig& c) {
  const std::string& t = c.ps_transport();
  RINGSIDE_RETURN_IF_ERROR(ParsePsTransport(t).status());
  if (!t.empty() && c.strategy() != "ps") {
    return absl::InvalidArgumentError("--ps_transport needs --strategy=ps");
  }
  return absl::OkStatus();
}

// Gradient compression (CheckCompression).
absl::Status ValidateCompression(const RunConfig& c) {
  return CheckCompression(c.compress(), c.strategy(), c.backend(), c.allreduce(), c.ps_transport());
}

// Where the PS's tensors live (common/ps_placement.h).
absl::Status ValidatePsPlacement(const RunConfig& c) {
  RINGSIDE_RETURN_IF_ERROR(ParsePsPlacement(c.ps_placement()).status());
  if (!c.ps_placement().empty() && c.ps_placement() != kPsPlacementBalanced && c.strategy() != "ps") {
    return absl::InvalidArgumentError("--ps_placement needs --strategy=ps");
  }
  return absl::OkStatus();
}

// A summation server beside each worker (BytePS's colocated summation service): in
// summation mode, beside k < n dedicated servers, with byte slices by BytePS's optimum.
absl::Status ValidateWorkerSummers(const RunConfig& c) {
  if (!c.ps_worker_summers()) return absl::OkStatus();
  if (c.ps_mode() != kPsModeSummation) {
    return absl::InvalidArgumentError("--ps_worker_summers needs --ps_mode=summation");
  }
  if (c.ps_colocated()) {
    return absl::InvalidArgumentError(
        "--ps_worker_summers and --ps_colocated place the servers two ways: pick one");
  }
  if (c.ps_shards() < 0 || c.ps_shards() >= c.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ps_worker_summers takes --ps_shards from 0 to --workers - 1 = ", c.world_size() - 1, ", got ",
        c.ps_shards(), " (from k = n dedicated servers on, BytePS's optimum leaves the workers' summers nothing)"));
  }
  if (!c.ps_placement().empty() && c.ps_placement() != kPsPlacementBalanced) {
    return absl::InvalidArgumentError(absl::StrCat("--ps_worker_summers cuts byte slices by BytePS's optimum: it takes "
                                                   "--ps_placement=balanced, got ", c.ps_placement()));
  }
  return absl::OkStatus();
}

// What the PS's servers do: run the optimizer, or only sum (BSP, every worker kept).
absl::Status ValidatePsMode(const RunConfig& c) {
  const std::string& m = c.ps_mode();
  RINGSIDE_RETURN_IF_ERROR(CheckPsModeName(m));
  if (m != kPsModeSummation) return ValidateWorkerSummers(c);
  if (c.strategy() != "ps") return absl::InvalidArgumentError("--ps_mode needs --strategy=ps");
  if (!c.ps_sync().empty() && c.ps_sync() != "bsp") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ps_mode=summation needs --ps_sync=bsp, got ", c.ps_sync(),
        " (every worker applies the same summed gradient each step)"));
  }
  if (c.ps_min_workers() != 0) {
    return absl::InvalidArgumentError(
        "--ps_mode=summation does not take --ps_min_workers (summation servers hold no "
        "parameters a rejoining worker could pull)");
  }
  return ValidateWorkerSummers(c);
}

}  // namespace

// The checks run in this order (the first failure is the one reported).
absl::Status ValidateRunConfig(const RunConfig& c) {
  RINGSIDE_RETURN_IF_ERROR(ValidateLoopAndSgd(c));
  // Before the device: --compress with --backend=nccl is refused for what it asks.
  RINGSIDE_RETURN_IF_ERROR(ValidateCompression(c));
  absl::StatusOr<DeviceSpec> device = ParseDevice(c.device());
  if (!device.ok()) return device.status();
  absl::StatusOr<GemmPrecision> precision = ParseGemmPrecision(c.precision());
  if (!precision.ok()) return precision.status();
  RINGSIDE_RETURN_IF_ERROR(ValidateDevice(c, *device, *precision));
  RINGSIDE_RETURN_IF_ERROR(ValidateBugs(c));
  RINGSIDE_RETURN_IF_ERROR(ValidatePsTransport(c));
  RINGSIDE_RETURN_IF_ERROR(ValidatePsPlacement(c));
  RINGSIDE_RETURN_IF_ERROR(ValidatePsMode(c));
  return ValidateElastic(c);
}

absl::string_view PsTransportOf(const RunConfig& config) {
  return config.ps_transport().empty() ? absl::string_view(kPsTransportDefault)
                                       : absl::string_view(config.ps_transport());
}

absl::StatusOr<std::string> ParsePsTransport(absl::string_view name) {
  if (name.empty()) return std::string(kPsTransportDefault);
  if (name != kPsTransportGrpc && name != kPsTransportTcp) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --ps_transport '", name, "' (expected grpc or tcp)"));
  }
  return std::string(name);
}

void SetPsTransport(absl::string_view transport, RunConfig* config) {
  if (transport.empty() || transport == kPsTransportDefault) {
    config->clear_ps_transport();
  } else {
    config->set_ps_transport(std::string(transport));
  }
}

absl::StatusOr<Compression> ParseCompressionSpec(absl::string_view name) {
  Compression c;
  if (name.empty() || name == "none") return c;
  if (name == "fp16" || name == "bf16") {
    c.method = Compression::Method::kWire;
    c.wire = name == "fp16" ? WireFormat::kFp16 : WireFormat::kBf16;
    return c;
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(name, ':');
  const bool topk = parts[0] == "topk", powersgd = parts[0] == "powersgd";
  if (!topk && !powersgd) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --compress '", name, "' (expected none, fp16, bf16, topk:F or powersgd:R)"));
  }
  if (parts.size() < 2 || parts.size() > 3 || (parts.size() == 3 && parts[2] != "no_ef")) {
    return absl::InvalidArgumentError(absl::StrCat("--compress '", name, "': expected ", parts[0],
                                                   topk ? ":F" : ":R", " or ", parts[0], topk ? ":F" : ":R",
                                                   ":no_ef"));
  }
  c.error_feedback = parts.size() == 2;
  if (topk) {
    c.method = Compression::Method::kTopK;
    if (!absl::SimpleAtod(parts[1], &c.topk_fraction) || !(c.topk_fraction > 0) || c.topk_fraction > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--compress '", name, "': top-k's fraction F must be a number in (0, 1]"));
    }
  } else {
    c.method = Compression::Method::kPowerSgd;
    if (!absl::SimpleAtoi(parts[1], &c.powersgd_rank) || c.powersgd_rank < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--compress '", name, "': PowerSGD's rank R must be a whole number >= 1"));
    }
  }
  return c;
}

absl::StatusOr<WireFormat> ParseCompression(absl::string_view name) {
  RINGSIDE_ASSIGN_OR_RETURN(const Compression c, ParseCompressionSpec(name));
  return c.wire;
}

// The compressed ring is a ring; the PS compresses its TCP data plane's push-pulls in
// fp16 / bf16; top-k and PowerSGD run on DDP's Gloo group. NCCL's half-precision path,
// gRPC's data plane and the lossy methods on the PS are not wired in.
absl::Status CheckCompression(absl::string_view compress, absl::string_view strategy, absl::string_view backend,
                              absl::string_view allreduce, absl::string_view ps_transport) {
  RINGSIDE_ASSIGN_OR_RETURN(const Compression c, ParseCompressionSpec(compress));
  if (c.method == Compression::Method::kNone) return absl::OkStatus();
  if (strategy == "ps") {
    if (c.lossy()) {
      return absl::InvalidArgumentError(absl::StrCat("--compress=", compress,
                                                     " runs on --strategy=ddp (the PS compresses fp16 and bf16)"));
    }
    if ((ps_transport.empty() ? absl::string_view(kPsTransportDefault) : ps_transport) != kPsTransportTcp) {
      return absl::InvalidArgumentError(absl::StrCat("--compress=", compress,
                                                     " on the PS runs on --ps_transport=tcp (gRPC's data plane "
                                                     "is not compressed)"));
    }
    return absl::OkStatus();
  }
  if (strategy != "ddp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--compress=", compress, c.lossy() ? " needs --strategy=ddp" : " needs --strategy=ddp or ps"));
  }
  if (backend == "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--compress=", compress, " runs on --backend=gloo (NCCL's is not wired in yet)"));
  }
  if (!c.lossy() && !allreduce.empty() && allreduce != "auto" && allreduce != "ring") {
    return absl::InvalidArgumentError(absl::StrCat("--compress=", compress, " runs on the ring: drop --allreduce=",
                                                   allreduce, " or use --allreduce=ring"));
  }
  return absl::OkStatus();
}

absl::Status CheckPsModeName(absl::string_view mode) {
  if (mode.empty() || mode == kPsModeOptimizer || mode == kPsModeSummation) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("unknown --ps_mode '", mode, "' (expected optimizer or summation)"));
}

SgdHyper SgdHyperFor(const RunConfig& c) {
  SgdHyper hyper;
  hyper.lr = c.lr();
  hyper.momentum = c.momentum();
  hyper.weight_decay = c.weight_decay();
  hyper.nesterov = c.nesterov();
  return hyper;
}

std::string ConfigDifference(const RunConfig& reference, const RunConfig& other) {
  google::protobuf::util::MessageDifferencer differ;
  std::string report;
  differ.ReportDifferencesToString(&report);
  if (differ.Compare(reference, other)) return "";
  // One line: "modified: lr: 0.02 -> 0.05; ...".
  std::string line;
  for (char c : report) line += c == '\n' ? ';' : c;
  while (!line.empty() && (line.back() == ';' || line.back() == ' ')) line.pop_back();
  return line;
}

absl::Status CheckSameConfig(const RunConfig& reference, absl::string_view reference_name,
                             const RunConfig& other, absl::string_view other_name) {
  const std::string diff = ConfigDifference(reference, other);
  if (diff.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      other_name, " runs a different configuration than ", reference_name, ": ", diff));
}

}  // namespace ringside
