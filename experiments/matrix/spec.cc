#include "experiments/matrix/spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/ops_factory.h"
#include "common/ps_layout.h"
#include "common/ps_placement.h"
#include "common/run_config.h"
#include "common/status_macros.h"
#include "ddp_ring/allreduce_algorithm.h"
#include "experiments/launch/job_spec.h"
#include "experiments/netem/cpu_share.h"
#include "experiments/sys/files.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace ringside {
namespace {

// Bounds on the spec's numbers: far above any matrix one machine or a small cluster
// runs, low enough that expanding the cells, their batch sizes and process counts
// cannot overflow an int or exhaust memory (a hostile or mistyped spec is refused in
// one line instead).
constexpr int kMaxWorkers = 1024;            // Per cell.
constexpr int kMaxShards = 1024;             // ps_shards.
constexpr int kMaxRanksPerNode = 1024;
constexpr int kMaxRepeats = 1000;
constexpr int64_t kMaxCells = 10000;         // Strategies x worker counts x repeats.
constexpr int64_t kMaxGlobalBatch = 1 << 24;  // Samples per step, all workers together.

// A PS strategy's dedicated shards in each cell: ps_shards, 1 when unset; with
// ps_worker_summers 0 is k = 0 (only the workers' summers).
int CellShards(const StrategySpec& s) {
  return s.ps_worker_summers() ? s.ps_shards() : std::max(1, s.ps_shards());
}

// A cell's directory name from its label: anything but [A-Za-z0-9._-] becomes '_'.
std::string SafeLabel(const std::string& label) {
  std::string safe = label;
  for (char& ch : safe) {
    if (!absl::ascii_isalnum(ch) && ch != '.' && ch != '_' && ch != '-') ch = '_';
  }
  return safe;
}

// The spec's numbers within the bounds above; checked before the cells are expanded.
absl::Status CheckSpecNumbers(const ExperimentSpec& spec) {
  for (const StrategySpec& s : spec.strategies()) {
    if (s.ps_shards() > kMaxShards) {
      return absl::InvalidArgumentError(absl::StrCat("ps_shards must be <= ", kMaxShards, ", got ", s.ps_shards()));
    }
    if (s.ranks_per_node() > kMaxRanksPerNode) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks_per_node must be <= ", kMaxRanksPerNode, ", got ", s.ranks_per_node()));
    }
    if (!(std::isfinite(s.bucket_cap_mb()) && s.bucket_cap_mb() >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket_cap_mb must be a finite number >= 0, got ", s.bucket_cap_mb()));
    }
  }
  for (int n : spec.workers()) {
    if (n < 1 || n > kMaxWorkers) {
      return absl::InvalidArgumentError(absl::StrCat("worker count must be in [1, ", kMaxWorkers, "], got ", n));
    }
  }
  if (spec.repeats() < 0 || spec.repeats() > kMaxRepeats) {
    return absl::InvalidArgumentError(absl::StrCat("repeats must be in [0, ", kMaxRepeats, "], got ", spec.repeats()));
  }
  const int64_t cells = int64_t{spec.strategies_size()} * std::max(1, spec.workers_size()) * std::max(1, spec.repeats());
  if (cells > kMaxCells) {
    return absl::InvalidArgumentError(absl::StrCat("the spec makes ", cells, " cells, more than ", kMaxCells));
  }
  for (int n : spec.workers()) {
    if (int64_t{spec.batch_per_worker()} * n > kMaxGlobalBatch || spec.global_batch() > kMaxGlobalBatch) {
      return absl::InvalidArgumentError(
          absl::StrCat("the global batch at ", n, " workers is over ", kMaxGlobalBatch, " samples"));
    }
  }
  if (spec.cell_timeout_s() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cell_timeout_s must be >= 0, got ", spec.cell_timeout_s()));
  }
  if (spec.has_timeout_s() && spec.timeout_s() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("timeout_s must be >= 1, got ", spec.timeout_s()));
  }
  if (spec.has_lr() && !(std::isfinite(spec.lr()) && spec.lr() >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("lr must be a finite number >= 0, got ", spec.lr()));
  }
  if (spec.has_momentum() && !std::isfinite(spec.momentum())) {
    return absl::InvalidArgumentError(absl::StrCat("momentum must be finite, got ", spec.momentum()));
  }
  return absl::OkStatus();
}

// Two strategies whose cells would share a directory (the same label, or labels that
// differ only in characters a directory name replaces): compare would run one and
// report its numbers for both. InvalidArgument naming both strategies and the cell.
absl::Status CheckDistinctCells(const ExperimentSpec& spec, const std::vector<Cell>& cells) {
  std::map<std::string, const Cell*> by_id;
  for (const Cell& c : cells) {
    auto [it, inserted] = by_id.emplace(c.id, &c);
    if (inserted) continue;
    const Cell& first = *it->second;
    return absl::InvalidArgumentError(absl::StrCat(
        "strategies {", first.strategy.ShortDebugString(), "} and {", c.strategy.ShortDebugString(),
        "} both make cell ", c.id, " (labels '", first.label, "' and '", c.label,
        "'): give them distinct labels"));
  }
  return absl::OkStatus();
}

std::string FormatBatchFlag(const Cell& c) { return absl::StrCat("--batch=", c.batch_per_worker); }

// A device field ("" is cpu): OK or InvalidArgument naming `field` and the text.
absl::Status CheckDevice(const std::string& field, const std::string& text) {
  if (ParseDevice(text).ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be cpu, cuda or cuda:K (K >= 0), got '", text, "'"));
}

// The strategy's device and backend agree (nccl: GPU; gloo: CPU).
absl::Status CheckStrategyDevice(const ExperimentSpec& spec, const StrategySpec& s) {
  RINGSIDE_RETURN_IF_ERROR(CheckDevice(absl::StrCat("strategy ", s.kind(), ": device"), s.device()));
  const std::string device = StrategyDevice(spec, s);
  if (s.kind() != "ddp") {
    if (!s.backend().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("strategy ", s.kind(), ": backend is DDP's (", s.backend(), ")"));
    }
    return absl::OkStatus();
  }
  const std::string backend = StrategyBackend(spec, s);
  if (backend != "gloo" && backend != "nccl") {
    return absl::InvalidArgumentError(absl::StrCat("strategy ddp: unknown backend '", backend, "' (expected gloo or nccl)"));
  }
  if (backend == "nccl" && !IsGpuDevice(device)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy ddp: backend nccl needs device cuda, but its device is ", device,
        " (set device: \"cuda\" in the strategy or the spec)"));
  }
  if (backend == "gloo" && IsGpuDevice(device)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy ddp: backend gloo needs device cpu, but its device is ", device,
        " (on the GPU use backend nccl, or leave backend unset)"));
  }
  if (backend == "nccl" && !s.allreduce().empty() && s.allreduce() != "auto") {
    return absl::InvalidArgumentError(absl::StrCat("strategy ddp: allreduce '", s.allreduce(),
                                                   "' is Gloo's; NCCL picks its own algorithm"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string StrategyDevice(const ExperimentSpec& spec, const StrategySpec& s) {
  if (!s.device().empty()) return s.device();
  if (!spec.device().empty()) return spec.device();
  return "cpu";
}

bool IsGpuDevice(const std::string& device) {
  absl::StatusOr<DeviceSpec> parsed = ParseDevice(device);
  return parsed.ok() && parsed->kind == DeviceKind::kCuda;
}

std::string StrategyBackend(const ExperimentSpec& spec, const StrategySpec& s) {
  if (!s.backend().empty()) return s.backend();
  return IsGpuDevice(StrategyDevice(spec, s)) ? "nccl" : "gloo";
}

bool SpecUsesGpu(const ExperimentSpec& spec) {
  for (const StrategySpec& s : spec.strategies()) {
    if (IsGpuDevice(StrategyDevice(spec, s))) return true;
  }
  return false;
}

absl::Status CheckGpuCellsCanRun(const ExperimentSpec& spec, bool built_with_cuda, const DeviceInfo& devices) {
  if (!SpecUsesGpu(spec)) return absl::OkStatus();
  if (!built_with_cuda) {
    return absl::FailedPreconditionError(
        "the spec has cells on the GPU (device cuda), but this ringside was built without CUDA "
        "(rebuild with --config=cuda, or use the GPU bundle)");
  }
  if (devices.gpu_count < 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the spec has cells on the GPU (device cuda), but this machine has no usable GPU: ",
        devices.detail.empty() ? "none found" : devices.detail));
  }
  for (const StrategySpec& s : spec.strategies()) {
    absl::StatusOr<DeviceSpec> d = ParseDevice(StrategyDevice(spec, s));
    if (d.ok() && d->kind == DeviceKind::kCuda && d->index >= devices.gpu_count) {
      return absl::InvalidArgumentError(absl::StrCat("strategy ", StrategyLabel(spec, s), ": device ",
                                                     DeviceName(*d), ": this machine has ",
                                                     devices.gpu_count, " GPU(s)"));
    }
  }
  return absl::OkStatus();
}

namespace {

// InvalidArgument "strategy L: FIELD is for ps" unless `s` is a PS strategy.
absl::Status PsOnly(const ExperimentSpec& spec, const StrategySpec& s, const char* field) {
  if (s.kind() == "ps") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("strategy ", StrategyLabel(spec, s), ": ", field, " is for ps"));
}

// The PS-only fields of strategy `s` that are set (ps_transport, ps_placement,
// ps_chunk_kb, ps_mode), in that order: each only on a PS strategy (PsOnly), each with a
// known value. InvalidArgument "strategy L: ..." for the first that is not.
absl::Status CheckPsFields(const ExperimentSpec& spec, const StrategySpec& s) {
  if (!s.ps_transport().empty()) {
    RINGSIDE_RETURN_IF_ERROR(PsOnly(spec, s, "ps_transport"));
    if (!ParsePsTransport(s.ps_transport()).ok()) {  // The one check of the names.
      return absl::InvalidArgumentError(absl::StrCat("strategy ", StrategyLabel(spec, s), ": unknown ps_transport '",
                                                     s.ps_transport(), "' (expected grpc or tcp)"));
    }
  }
  if (!s.ps_placement().empty()) {
    RINGSIDE_RETURN_IF_ERROR(PsOnly(spec, s, "ps_placement"));
    if (absl::Status placement = ParsePsPlacement(s.ps_placement()).status(); !placement.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("strategy ", StrategyLabel(spec, s), ": ",
                                                     absl::StripPrefix(placement.message(), "--")));
    }
  }
  if (s.ps_chunk_kb() != 0) {
    RINGSIDE_RETURN_IF_ERROR(PsOnly(spec, s, "ps_chunk_kb"));
    if (s.ps_chunk_kb() < 1 || s.ps_chunk_kb() > 65536) {
      return absl::InvalidArgumentError(absl::StrCat("strategy ", StrategyLabel(spec, s),
                                                     ": ps_chunk_kb must be in [1, 65536], got ", s.ps_chunk_kb()));
    }
  }
  if (!s.ps_mode().empty()) {
    RINGSIDE_RETURN_IF_ERROR(PsOnly(spec, s, "ps_mode"));
    if (absl::Status mode = CheckPsModeName(s.ps_mode()); !mode.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("strategy ", StrategyLabel(spec, s), ": unknown ",
                                                     absl::StripPrefix(mode.message(), "unknown --")));
    }
    if (s.ps_mode() == kPsModeSummation && !s.ps_sync().empty() && s.ps_sync() != "bsp") {
      return absl::InvalidArgumentError(absl::StrCat("strategy ", StrategyLabel(spec, s),
                                                     ": ps_mode summation needs ps_sync bsp, got ", s.ps_sync()));
    }
  }
  return absl::OkStatus();
}

// ps_worker_summers of strategy `s`, when set: needs ps_mode summation, places the
// servers and cuts balanced slices itself (no ps_colocated, ps_shard_per_worker or
// other ps_placement), and ps_shards below each of the spec's worker counts.
// InvalidArgument "strategy L: ..." otherwise.
absl::Status CheckPsWorkerSummers(const ExperimentSpec& spec, const StrategySpec& s) {
  if (!s.ps_worker_summers()) return absl::OkStatus();
  const std::string label = StrategyLabel(spec, s);
  if (s.ps_mode() != kPsModeSummation) {
    return absl::InvalidArgumentError(absl::StrCat("strategy ", label, ": ps_worker_summers needs ps_mode summation"));
  }
  if (s.ps_colocated() || s.ps_shard_per_worker()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy ", label, ": ps_worker_summers places the servers itself (drop ps_colocated, ps_shard_per_worker)"));
  }
  if (!s.ps_placement().empty() && s.ps_placement() != kPsPlacementBalanced) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy ", label, ": ps_worker_summers cuts balanced slices (drop ps_placement)"));
  }
  for (int n : spec.workers()) {
    if (s.ps_shards() >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy ", label, ": ps_worker_summers needs ps_shards below every worker count, got ps_shards ",
          s.ps_shards(), " at ", n, " workers (at k >= n BytePS's optimum leaves the workers' summers nothing)"));
    }
  }
  return absl::OkStatus();
}

// One strategy of the spec: its kind, and the fields that apply to it (the PS-only ones
// through CheckPsFields and CheckPsWorkerSummers, then device and backend). The first
// failing check's error.
absl::Status CheckStrategySpec(const ExperimentSpec& spec, const StrategySpec& s) {
  RINGSIDE_RETURN_IF_ERROR(ParseJobStrategy(s.kind()).status());
  if (s.dp_interpreter_lock() && s.kind() != "dp") {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy ", s.kind(), ": dp_interpreter_lock is for dp"));
  }
  if (s.kind() == "dp") {
    // One process of replica threads, on the CPU (data_parallel.h).
    if (IsGpuDevice(StrategyDevice(spec, s))) {
      return absl::InvalidArgumentError("strategy dp: its replicas train on the CPU (device cpu)");
    }
    if (s.ranks_per_node() > 1) {
      return absl::InvalidArgumentError("strategy dp: ranks_per_node does not apply (one process)");
    }
  }
  if (s.ps_shards() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("strategy ", StrategyLabel(spec, s),
                                                   ": ps_shards must be >= 0 (0: one shard), got ", s.ps_shards()));
  }
  if (s.ranks_per_node() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("strategy ", StrategyLabel(spec, s),
                                                   ": ranks_per_node must be >= 1, got ", s.ranks_per_node()));
  }
  if (s.ps_shard_per_worker() && (s.kind() != "ps" || s.ps_shards() > 0 || s.ps_colocated())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy ", StrategyLabel(spec, s), ": ps_shard_per_worker is for ps without ps_shards or ps_colocated"));
  }
  if (!s.allreduce().empty()) {
    RINGSIDE_RETURN_IF_ERROR(ParseAllReduceAlgorithm(s.allreduce()).status());
  }
  if (!s.compress().empty()) {
    if (absl::Status c = CheckCompression(s.compress(), s.kind(), StrategyBackend(spec, s), s.allreduce(),
                                              s.ps_transport());
        !c.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("strategy ", StrategyLabel(spec, s), ": ", c.message()));
    }
  }
  RINGSIDE_RETURN_IF_ERROR(CheckPsFields(spec, s));
  RINGSIDE_RETURN_IF_ERROR(CheckPsWorkerSummers(spec, s));
  return CheckStrategyDevice(spec, s);
}

}  // namespace

absl::Status ValidateSpec(const ExperimentSpec& spec) {
  if (spec.strategies().empty()) return absl::InvalidArgumentError("the spec lists no strategies");
  RINGSIDE_RETURN_IF_ERROR(CheckDevice("device", spec.device()));
  if (absl::StatusOr<GemmPrecision> p = ParseGemmPrecision(spec.precision()); !p.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("precision must be fp32, tf32 or bf16, got '", spec.precision(), "'"));
  }
  for (const StrategySpec& s : spec.strategies()) {
    RINGSIDE_RETURN_IF_ERROR(CheckStrategySpec(spec, s));
  }
  bool any_parallel = false;
  for (const StrategySpec& s : spec.strategies()) any_parallel |= s.kind() != "single";
  if (any_parallel && spec.workers().empty()) {
    return absl::InvalidArgumentError("the spec lists no worker counts (workers: 1 workers: 2 ...)");
  }
  RINGSIDE_RETURN_IF_ERROR(CheckSpecNumbers(spec));
  if (spec.model().empty()) return absl::InvalidArgumentError("the spec names no model");
  if ((spec.batch_per_worker() > 0) == (spec.global_batch() > 0)) {
    return absl::InvalidArgumentError(
        "the spec needs exactly one of batch_per_worker (weak scaling) and global_batch (strong scaling)");
  }
  if (spec.batch_per_worker() < 0 || spec.global_batch() < 0) {
    return absl::InvalidArgumentError("batch sizes must be positive");
  }
  for (int n : spec.workers()) {
    if (spec.global_batch() > 0 && spec.global_batch() % n != 0) {
      return absl::InvalidArgumentError(absl::StrCat("global_batch ", spec.global_batch(),
                                                     " does not divide by ", n, " workers"));
    }
  }
  if (spec.steps() <= 0 && !spec.has_epochs()) {
    return absl::InvalidArgumentError("the spec needs steps or epochs");
  }
  if (spec.has_epochs() && spec.epochs() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("epochs must be >= 1, got ", spec.epochs()));
  }
  if (spec.steps() < 0 || spec.repeats() < 0) {
    return absl::InvalidArgumentError("steps and repeats must not be negative");
  }
  if (spec.has_threads() && spec.threads() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be >= 0, got ", spec.threads()));
  }
  if (spec.has_lr() && !(spec.lr() >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("lr must be >= 0, got ", spec.lr()));
  }
  RINGSIDE_ASSIGN_OR_RETURN(NodeCpuSpec cpus, ParseNodeCpus(spec.node_cpus()));
  const std::vector<Cell> cells = ExpandCells(spec);
  RINGSIDE_RETURN_IF_ERROR(CheckDistinctCells(spec, cells));
  // Processes must fill whole nodes in every cell.
  for (const Cell& c : cells) {
    const int processes = CellProcesses(c);
    if (processes % c.ranks_per_node != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cell ", c.id, ": ", processes, " processes do not divide into nodes of ",
                                                     c.ranks_per_node, " (ranks_per_node)"));
    }
  }
  RINGSIDE_ASSIGN_OR_RETURN(SlowNodeSpec slow, ParseSlowNode(spec.slow_node()));
  if (slow.enabled) {
    if (!cpus.enabled) return absl::InvalidArgumentError("slow_node needs node_cpus (the slow node's CPU share is a fraction of it)");
    for (int n : spec.workers()) {
      if (n > 1 && slow.rank >= n) {  // One-worker cells run without it.
        return absl::InvalidArgumentError(absl::StrCat("slow_node: rank ", slow.rank, " does not exist in the cells with ", n,
                                                       " worker(s) (ranks 0..", n - 1, ")"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// The strategies that pack several processes on a node, as " (label: K, ...)"; "" for none.
std::string PackedStrategies(const ExperimentSpec& spec) {
  std::vector<std::string> packed;
  for (const StrategySpec& s : spec.strategies()) {
    if (s.ranks_per_node() > 1) packed.push_back(absl::StrCat(StrategyLabel(spec, s), ": ", s.ranks_per_node()));
  }
  return packed.empty() ? "" : absl::StrCat(" (", absl::StrJoin(packed, ", "), ")");
}

}  // namespace

std::string DescribeEmulationShort(const ExperimentSpec& spec, double node_cpus, const DilationRecord* dilation) {
  if (node_cpus <= 0 && spec.network().empty()) return "one machine, loopback, no CPU share per node";
  std::vector<std::string> parts;
  if (dilation != nullptr) parts.push_back(absl::StrFormat("cluster %s, d = %.2f", dilation->cluster(), dilation->factor()));
  if (node_cpus > 0) parts.push_back(absl::StrFormat("%.2f CPU/node", node_cpus));
  parts.push_back(spec.network().empty() ? "loopback" : absl::StrCat(spec.network(), " links"));
  if (dilation != nullptr && dilation->devices_per_node() > 1) {  // A device is a rank.
    parts.push_back(absl::StrFormat("%d processes/node (devices)", dilation->devices_per_node()));
  } else {
    parts.push_back(absl::StrCat("1 process/node", PackedStrategies(spec)));
  }
  if (!spec.slow_node().empty()) parts.push_back(absl::StrCat("slow node ", spec.slow_node()));
  return absl::StrCat("emulated on one machine: ", absl::StrJoin(parts, ", "));
}

int CellProcesses(const Cell& cell) {
  if (cell.strategy.kind() != "ps") return cell.workers;
  return PsLayout(cell.shards, cell.workers, cell.strategy.ps_colocated(), cell.strategy.ps_worker_summers())
      .num_processes();
}

int CellNodes(const Cell& cell) {
  const std::string& kind = cell.strategy.kind();
  if (kind == "single" || kind == "dp") return 1;  // dp: one process of threads.
  return std::max(1, CellProcesses(cell) / std::max(1, cell.ranks_per_node));
}

absl::Status ResolveCellEmulation(const ExperimentSpec& spec, int machine_cpus, std::vector<Cell>* cells) {
  RINGSIDE_ASSIGN_OR_RETURN(NodeCpuSpec parsed, ParseNodeCpus(spec.node_cpus()));
  if (!parsed.enabled) return absl::OkStatus();
  int max_nodes = 1;
  for (const Cell& c : *cells) max_nodes = std::max(max_nodes, c.nodes);
  RINGSIDE_ASSIGN_OR_RETURN(double cpus, ResolveNodeCpus(parsed, max_nodes, machine_cpus));
  // Rounded down to 1e-4 CPU: the flag carries it as decimal text, and 2/3 printed as
  // 0.666667 would ask 3 nodes for more than 2 CPUs.
  cpus = std::floor(cpus * 1e4) / 1e4;
  // dp runs as one process without a node (train refuses --node_cpus with dp): its
  // replica threads share the whole machine, and its cell says so (node_cpus 0).
  for (Cell& c : *cells) c.node_cpus = c.strategy.kind() == "dp" ? 0 : cpus;
  return absl::OkStatus();
}

std::string DescribeEmulation(const ExperimentSpec& spec, double node_cpus, const DilationRecord* dilation) {
  std::vector<std::string> parts;
  if (node_cpus > 0) parts.push_back(absl::StrFormat("%.2f CPU per node (cgroup CPU quota)", node_cpus));
  if (!spec.network().empty()) parts.push_back(absl::StrCat("links ", spec.network(), " per node (network namespaces, tc)"));
  if (parts.empty()) return "";
  if (dilation != nullptr && dilation->devices_per_node() > 1) {  // cluster_emulation.h
    parts.push_back(absl::StrFormat("%d processes per node, one per device (the single baseline on one device's "
                                    "share, %.4g CPU)",
                                    dilation->devices_per_node(), dilation->device_cpus()));
  } else {
    parts.push_back(absl::StrCat("1 process per node", PackedStrategies(spec)));
  }
  if (absl::StatusOr<SlowNodeSpec> slow = ParseSlowNode(spec.slow_node()); slow.ok() && slow->enabled) {
    parts.push_back(absl::StrCat("the node of rank/worker ", slow->rank, " slowed to ", slow->factor, " of that share"));
  }
  if (dilation != nullptr) {
    return absl::StrCat(dilation->description(), "; on one machine: ", absl::StrJoin(parts, ", "));
  }
  return absl::StrCat("emulated cluster on one machine: ", absl::StrJoin(parts, ", "),
                      "; not a real cluster's numbers");
}

absl::StatusOr<ExperimentSpec> ParseSpec(const std::string& text, const std::string& name) {
  ExperimentSpec spec;
  // Collect the parser's first complaint as one line.
  class Collector : public google::protobuf::io::ErrorCollector {
   public:
    void AddError(int line, int column, const std::string& message) override {
      if (first.empty()) first = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
    }
    std::string first;
  } errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &spec)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not a valid experiment spec: ", errors.first));
  }
  if (absl::Status s = ValidateSpec(spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  return spec;
}

absl::StatusOr<ExperimentSpec> LoadSpec(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
  return ParseSpec(*text, path);
}

namespace {

// A PS label's placement suffix: none for the default, "-rr" or "-greedy".
std::string PlacementSuffix(const std::string& placement) {
  if (placement == kPsPlacementRoundRobin) return "-rr";
  if (placement == kPsPlacementGreedy) return "-greedy";
  return "";
}

}  // namespace

std::string StrategyLabel(const ExperimentSpec& spec, const StrategySpec& s) {
  if (!s.label().empty()) return s.label();
  // "-cuda", "-cuda1" (cuda:1) for single and ps on a GPU.
  std::string gpu;
  if (const std::string device = StrategyDevice(spec, s); IsGpuDevice(device)) {
    gpu = absl::StrCat("-", device);
    gpu.erase(std::remove(gpu.begin(), gpu.end(), ':'), gpu.end());
  }
  if (s.kind() == "ps") {
    std::string sync = s.ps_sync().empty() ? "bsp" : s.ps_sync();
    for (char& c : sync) {
      if (c == ':') c = '_';
    }
    return absl::StrCat(s.ps_mode() == kPsModeSummation ? "ps-sum-s" : "ps-s",
                        s.ps_shard_per_worker() ? "n" : absl::StrCat(CellShards(s)),
                        s.ps_worker_summers() ? "w" : "", "-", sync,
                        s.ps_colocated() ? "-coloc" : "", s.ranks_per_node() > 1 ? absl::StrCat("-k", s.ranks_per_node()) : "",
                        s.ps_transport() == kPsTransportGrpc ? "-grpc" : "", PlacementSuffix(s.ps_placement()),
                        !s.compress().empty() && s.compress() != "none" ? absl::StrCat("-", s.compress()) : "", gpu);
  }
  if (s.kind() == "ddp") {
    std::string label = "ddp";
    if (StrategyBackend(spec, s) == "nccl") absl::StrAppend(&label, "-nccl");
    if (s.allreduce() == "halving-doubling") absl::StrAppend(&label, "-hd");
    if (s.allreduce() == "recursive-doubling") absl::StrAppend(&label, "-rd");
    if (s.allreduce() == "ring") absl::StrAppend(&label, "-ring");
    if (s.no_overlap()) absl::StrAppend(&label, "-nooverlap");
    if (s.ranks_per_node() > 1) absl::StrAppend(&label, "-k", s.ranks_per_node());
    if (!s.compress().empty() && s.compress() != "none") absl::StrAppend(&label, "-", s.compress());
    return label;
  }
  if (s.kind() == "dp") return s.dp_interpreter_lock() ? "dp-threads-gil" : "dp-threads";
  return absl::StrCat(s.kind(), gpu);
}

std::vector<size_t> RunOrder(const std::vector<Cell>& cells) {
  std::map<int, std::vector<size_t>> rounds;  // repeat -> its cells' indices
  for (size_t i = 0; i < cells.size(); ++i) rounds[cells[i].repeat].push_back(i);
  std::vector<size_t> order;
  order.reserve(cells.size());
  for (auto& [repeat, round] : rounds) {
    std::vector<size_t> baseline, others;
    for (size_t i : round) (cells[i].strategy.kind() == "single" ? baseline : others).push_back(i);
    std::stable_sort(others.begin(), others.end(),
                     [&cells](size_t a, size_t b) { return cells[a].workers < cells[b].workers; });
    const size_t middle = others.size() / 2;
    order.insert(order.end(), others.begin(), others.begin() + middle);
    order.insert(order.end(), baseline.begin(), baseline.end());
    order.insert(order.end(), others.begin() + middle, others.end());
  }
  return order;
}

std::vector<Cell> ExpandCells(const ExperimentSpec& spec) {
  std::vector<int> workers(spec.workers().begin(), spec.workers().end());
  std::sort(workers.begin(), workers.end());
  workers.erase(std::unique(workers.begin(), workers.end()), workers.end());
  const int repeats = std::max(1, spec.repeats());
  std::vector<Cell> cells;
  for (const StrategySpec& s : spec.strategies()) {
    const std::vector<int> counts = s.kind() == "single" ? std::vector<int>{1} : workers;
    for (int n : counts) {
      for (int r = 0; r < repeats; ++r) {
        Cell c;
        c.strategy = s;
        c.label = StrategyLabel(spec, s);
        c.device = StrategyDevice(spec, s);
        c.workers = n;
        c.repeat = r;
        c.global_batch = spec.global_batch() > 0 ? spec.global_batch() : spec.batch_per_worker() * n;
        c.batch_per_worker = spec.global_batch() > 0 ? spec.global_batch() / n : spec.batch_per_worker();
        if (s.kind() == "ps") c.shards = s.ps_shard_per_worker() ? n : CellShards(s);
        c.ranks_per_node = std::max(1, s.ranks_per_node());
        c.nodes = CellNodes(c);
        c.id = absl::StrCat(SafeLabel(c.label), "-n", n, "-r", r);
        cells.push_back(c);
      }
    }
  }
  return cells;
}

std::vector<std::string> CellTrainArgs(const ExperimentSpec& spec, const Cell& cell,
                                       const std::string& out_dir) {
  const StrategySpec& s = cell.strategy;
  // Unset fields take the command line's defaults (experiment.proto).
  const RunConfig d = DefaultRunConfig();
  std::vector<std::string> a = {
      "train",
      absl::StrCat("--strategy=", s.kind()),
      absl::StrCat("--model=", spec.model()),
      absl::StrCat("--dataset=", spec.dataset().empty() ? d.dataset() : spec.dataset()),
      FormatBatchFlag(cell),
      absl::StrCat("--epochs=", spec.has_epochs() ? spec.epochs() : d.epochs()),
      absl::StrCat("--steps=", spec.steps()),
      absl::StrCat("--lr=", spec.has_lr() ? spec.lr() : d.lr()),
      absl::StrCat("--momentum=", spec.has_momentum() ? spec.momentum() : d.momentum()),
      absl::StrCat("--threads=", spec.has_threads() ? spec.threads() : d.threads()),
      absl::StrCat("--seed=", spec.has_seed() ? spec.seed() : d.seed()),
      absl::StrCat("--timeout_s=", spec.has_timeout_s() ? spec.timeout_s()
                                                        : absl::ToInt64Seconds(kDefaultPeerTimeout)),
      absl::StrCat("--out=", out_dir),
      absl::StrCat("--device=", cell.device)};
  if (IsGpuDevice(cell.device)) {
    a.push_back(absl::StrCat("--precision=", spec.precision().empty() ? "fp32" : spec.precision()));
  }
  // single and dp are one process: no network between processes, no nodes to pack.
  const bool one_process = s.kind() == "single" || s.kind() == "dp";
  if (!one_process && !spec.network().empty()) {
    a.push_back(absl::StrCat("--network=", spec.network()));
  }
  // The single baseline runs on one node of the same CPU share as the others' nodes.
  if (cell.node_cpus > 0) a.push_back(absl::StrCat("--node_cpus=", cell.node_cpus));
  if (!one_process) {
    if (cell.ranks_per_node > 1) a.push_back(absl::StrCat("--ranks_per_node=", cell.ranks_per_node));
    if (!spec.slow_node().empty() && cell.workers > 1) a.push_back(absl::StrCat("--slow_node=", spec.slow_node()));
  }
  if (s.kind() == "dp") {
    a.push_back(absl::StrCat("--workers=", cell.workers));  // Replica threads.
    if (s.dp_interpreter_lock()) a.push_back("--dp_interpreter_lock");
  } else if (s.kind() == "ps") {
    a.push_back(absl::StrCat("--workers=", cell.workers));
    a.push_back(absl::StrCat("--ps_shards=", cell.shards));
    a.push_back(absl::StrCat("--ps_sync=", s.ps_sync().empty() ? "bsp" : s.ps_sync()));
    if (s.ps_colocated()) a.push_back("--ps_colocated");
    if (s.ps_worker_summers()) a.push_back("--ps_worker_summers");
    if (!s.ps_transport().empty()) a.push_back(absl::StrCat("--ps_transport=", s.ps_transport()));
    if (!s.ps_placement().empty()) a.push_back(absl::StrCat("--ps_placement=", s.ps_placement()));
    if (!s.ps_mode().empty()) a.push_back(absl::StrCat("--ps_mode=", s.ps_mode()));
    if (s.ps_chunk_kb() > 0) a.push_back(absl::StrCat("--ps_chunk_kb=", s.ps_chunk_kb()));
    if (!s.compress().empty()) a.push_back(absl::StrCat("--compress=", s.compress()));
  } else if (s.kind() == "ddp") {
    a.push_back(absl::StrCat("--workers=", cell.workers));
    a.push_back(absl::StrCat("--backend=", StrategyBackend(spec, s)));
    if (s.bucket_cap_mb() > 0) a.push_back(absl::StrCat("--bucket_cap_mb=", s.bucket_cap_mb()));
    if (s.no_overlap()) a.push_back("--overlap=false");
    if (!s.allreduce().empty()) a.push_back(absl::StrCat("--allreduce=", s.allreduce()));
    if (!s.compress().empty()) a.push_back(absl::StrCat("--compress=", s.compress()));
  }
  return a;
}

}  // namespace ringside
