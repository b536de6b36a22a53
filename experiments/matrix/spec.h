// An experiment matrix: the spec (experiment.proto, text format; examples in specs/),
// its cells (strategy x worker count x repeat) and the `ringside train` command line of
// each cell.
#ifndef RINGSIDE_EXPERIMENTS_MATRIX_SPEC_H_
#define RINGSIDE_EXPERIMENTS_MATRIX_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "experiments/matrix/experiment.pb.h"

namespace ringside {

// Parses a text-format spec and checks it (ValidateSpec). InvalidArgument naming the
// file and the problem.
absl::StatusOr<ExperimentSpec> LoadSpec(const std::string& path);
// The same for a spec's text; `name` stands for the file in messages.
absl::StatusOr<ExperimentSpec> ParseSpec(const std::string& text, const std::string& name);
// Also checks each strategy's device and backend: a device is cpu, cuda or cuda:K;
// DDP's nccl needs a GPU and gloo the CPU; `allreduce` is gloo's.
absl::Status ValidateSpec(const ExperimentSpec& spec);

// Where a strategy's cells compute: its own device, else the spec's, else "cpu"
// (the text as written: "cpu", "cuda", "cuda:K").
std::string StrategyDevice(const ExperimentSpec& spec, const StrategySpec& s);
// True for "cuda" and "cuda:K".
bool IsGpuDevice(const std::string& device);
// DDP's process-group backend: the strategy's, else the device's (nccl on a GPU,
// gloo on the CPU).
std::string StrategyBackend(const ExperimentSpec& spec, const StrategySpec& s);
// Whether any cell of `spec` runs on a GPU.
bool SpecUsesGpu(const ExperimentSpec& spec);
// Refuses a spec with GPU cells where they cannot run, before any cell starts:
// FailedPrecondition naming why (`built_with_cuda`: ops_factory.h BuiltWithCuda();
// `devices`: device.h DetectDevices()), or InvalidArgument for a cuda:K the machine
// does not have. OK for a CPU-only spec whatever the arguments.
absl::Status CheckGpuCellsCanRun(const ExperimentSpec& spec, bool built_with_cuda,
                                 const DeviceInfo& devices);

// One cell of the matrix.
struct Cell {
  std::string id;        // "<label>-n<N>-r<R>", a directory name.
  StrategySpec strategy;
  std::string label;
  std::string device = "cpu";  // StrategyDevice's.
  int workers = 1;
  int repeat = 0;
  int batch_per_worker = 0;
  int global_batch = 0;
  int shards = 0;          // PS: shard processes (ps_shards, or N with ps_shard_per_worker).
  int ranks_per_node = 1;  // Processes per emulated node.
  int nodes = 1;           // Emulated nodes the cell's processes occupy (CellNodes).
  // Resolved CPU share per node (ResolveCellEmulation); 0: none.
  double node_cpus = 0;
};

// The processes of a cell's job: a PS cell's layout's (common/ps_layout.h: its workers,
// and its shards unless colocated), else its workers.
int CellProcesses(const Cell& cell);

// The nodes a cell's processes occupy, ranks_per_node to a node: single 1; DDP N / K;
// PS (S + N) / K, or N / K with ps_colocated (the shards live in worker 0).
int CellNodes(const Cell& cell);

// Resolves the spec's node_cpus over the whole matrix (auto: `machine_cpus` / the most
// nodes any cell uses) and sets every cell's node_cpus, the single baseline's included,
// so every cell runs on nodes of the same capacity. 0 everywhere when the spec sets
// none. InvalidArgument (one line) when a fixed share times a cell's nodes exceeds the
// machine. A spec with a cluster goes through ResolveClusterCells
// (cluster_emulation.h), which lays its devices out as ranks per node first.
absl::Status ResolveCellEmulation(const ExperimentSpec& spec, int machine_cpus,
                                  std::vector<Cell>* cells);

// The emulation a spec asks for, in words, for reports and the terminal: e.g.
// "emulated cluster on one machine: 0.40 CPU per node (cgroup CPU quota), links bw=1gbit,
// 1 process per node (ps-n-shards: 2)". `node_cpus` is the resolved share (0: none);
// `dilation`, for a spec with a cluster, how compare emulated it (the spec's network
// then holds the dilated links): its line comes first. Empty when the spec emulates
// nothing.
std::string DescribeEmulation(const ExperimentSpec& spec, double node_cpus,
                              const DilationRecord* dilation = nullptr);
// The same in about 100 characters, for plots: "emulated on one machine: 0.40 CPU/node,
// bw=1gbit links, 1 process/node (s: 2)" ("cluster gige-cpu, d = 2.93: ..." with a
// dilation); "one machine, loopback, no CPU share per node" when the spec emulates
// nothing.
std::string DescribeEmulationShort(const ExperimentSpec& spec, double node_cpus,
                                   const DilationRecord* dilation = nullptr);

// Cells in table order: strategies in spec order, worker counts ascending, repeats.
std::vector<Cell> ExpandCells(const ExperimentSpec& spec);

// The order compare runs `cells` (ExpandCells's) in, as indices into them: round by
// round, every cell of repeat r before any of repeat r + 1. Within a round the cells
// of more than one process go by worker count (table order among equals) and the
// single baseline sits in their middle, after the first half of them. A drift of the
// host's speed during the run (minutes on a shared VM; 10-30% within a matrix) then
// moves every strategy's median alike instead of the last strategy's repeats alone,
// and each cell, whose speedup pairs it with its round's single (report/points.h), is
// at most half a round away from that baseline instead of up to a whole round.
std::vector<size_t> RunOrder(const std::vector<Cell>& cells);
// The label a strategy gets when the spec gives none, e.g. "ps-s1-bsp", "ddp": on a
// GPU single and ps add "-cuda" ("-cudaK" for cuda:K), ddp adds its backend, "-nccl".
std::string StrategyLabel(const ExperimentSpec& spec, const StrategySpec& s);

// `ringside train` flags for a cell writing to `out_dir`: --device always, --precision
// for GPU cells, --backend for DDP, and the emulation (--network, --node_cpus,
// --ranks_per_node, --slow_node) where the spec asks for it.
std::vector<std::string> CellTrainArgs(const ExperimentSpec& spec, const Cell& cell,
                                       const std::string& out_dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_MATRIX_SPEC_H_
