#include "experiments/matrix/spec.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "experiments/matrix/builtin_specs.h"
#include "experiments/sys/files.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

std::string SpecPath(const std::string& name) {
  const char* root = std::getenv("TEST_SRCDIR");
  return absl::StrCat(root != nullptr ? root : ".", "/ringside/experiments/matrix/specs/", name);
}

// The error of a spec "s" with one strategy `strategy` (its fields), 2 workers.
std::string StrategyError(const std::string& strategy) {
  return std::string(
      ParseSpec(absl::StrCat("strategies { ", strategy, " } workers: 2 model: \"mlp:4-2\" batch_per_worker: 8"), "s")
          .status()
          .message());
}

TEST(SpecTest, EveryShippedSpecLoads) {
  for (const char* name : {"demo.textproto", "quick.textproto", "validate.textproto", "gpu.textproto",
                           "placement.textproto", "summation.textproto"}) {
    absl::StatusOr<ExperimentSpec> spec = LoadSpec(SpecPath(name));
    EXPECT_TRUE(spec.ok()) << name << ": " << spec.status();
  }
}

// Repeats run round by round: every cell's repeat 0, then every cell's repeat 1.
TEST(SpecTest, CellsRunRoundByRound) {
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      "strategies { kind: \"single\" } strategies { kind: \"ddp\" } workers: 2 workers: 4 "
      "model: \"mlp:4-2\" batch_per_worker: 8 steps: 3 repeats: 2",
      "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<Cell> cells = ExpandCells(*spec);
  std::vector<std::string> ids;
  for (const Cell& c : cells) ids.push_back(c.id);
  EXPECT_EQ(absl::StrJoin(ids, " "), "single-n1-r0 single-n1-r1 ddp-n2-r0 ddp-n2-r1 ddp-n4-r0 ddp-n4-r1");
  ids.clear();
  for (size_t i : RunOrder(cells)) ids.push_back(cells[i].id);
  EXPECT_EQ(absl::StrJoin(ids, " "), "ddp-n2-r0 single-n1-r0 ddp-n4-r0 ddp-n2-r1 single-n1-r1 ddp-n4-r1");
}

TEST(SpecTest, TheDemoRunsTheSpecFileItDocuments) {
  absl::StatusOr<std::string> file = ReadFile(SpecPath("demo.textproto"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(DemoSpecText(), *file);
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(std::string(DemoSpecText()), "demo");
  ASSERT_TRUE(spec.ok()) << spec.status();
  // single on 1 worker; DDP and both PSs on 2 and 4; three times each. The PS with a
  // shard per worker packs each shard beside its worker: as many nodes as workers.
  const std::vector<Cell> cells = ExpandCells(*spec);
  std::vector<std::string> ids;
  for (const Cell& c : cells) {
    if (c.repeat == 0) ids.push_back(absl::StrCat(c.label, " n", c.workers, " s", c.shards, " nodes ", c.nodes));
  }
  EXPECT_EQ(absl::StrJoin(ids, ", "),
            "single n1 s0 nodes 1, ddp n2 s0 nodes 2, ddp n4 s0 nodes 4, "
            "ps-1-master n2 s1 nodes 3, ps-1-master n4 s1 nodes 5, "
            "ps-n-shards n2 s2 nodes 2, ps-n-shards n4 s4 nodes 4");
  EXPECT_EQ(cells.size(), 21u);
  // Each round: the 2-worker cells, the single baseline, the 4-worker cells.
  ids.clear();
  for (size_t i : RunOrder(cells)) {
    if (cells[i].repeat == 1) ids.push_back(absl::StrCat(cells[i].label, " n", cells[i].workers));
  }
  EXPECT_EQ(absl::StrJoin(ids, ", "),
            "ddp n2, ps-1-master n2, ps-n-shards n2, single n1, ddp n4, ps-1-master n4, ps-n-shards n4");
}

TEST(SpecTest, BadSpecsAreRefusedNamingTheProblem) {
  EXPECT_EQ(ParseSpec("strategies { kind: \"x\" }", "s").status().message(),
            "s: unknown strategy 'x' (expected single, dp, ps or ddp)");
  EXPECT_EQ(ParseSpec("bogus: 1", "s").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadSpec("/nonexistent.textproto").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SpecTest, AutoNodeCpusSplitsTheMachineOverTheLargestCellsNodes) {
  // PS with one master at 4 workers: 5 nodes (the server's included); the shard-per-
  // worker PS packs shard i with worker i (2 per node): 4; DDP 4; single 1.
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      "strategies { kind: \"single\" } strategies { kind: \"ps\" label: \"m\" } "
      "strategies { kind: \"ps\" ps_shard_per_worker: true ranks_per_node: 2 label: \"s\" } "
      "strategies { kind: \"ddp\" } workers: 1 workers: 4 model: \"mlp:4-2\" batch_per_worker: 8 "
      "steps: 3 node_cpus: \"auto\" network: \"bw=1gbit\"",
      "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<Cell> cells = ExpandCells(*spec);
  std::vector<std::string> nodes;
  for (const Cell& c : cells) nodes.push_back(absl::StrCat(c.id, "=", c.nodes));
  EXPECT_EQ(absl::StrJoin(nodes, " "), "single-n1-r0=1 m-n1-r0=2 m-n4-r0=5 s-n1-r0=1 s-n4-r0=4 ddp-n1-r0=1 ddp-n4-r0=4");
  ASSERT_TRUE(ResolveCellEmulation(*spec, 2, &cells).ok());
  for (const Cell& c : cells) EXPECT_DOUBLE_EQ(c.node_cpus, 0.4) << c.id;
  // Every cell, the single baseline included, runs on a node of that share.
  const std::string single = absl::StrJoin(CellTrainArgs(*spec, cells[0], "OUT"), " ");
  EXPECT_NE(single.find("--node_cpus=0.4"), std::string::npos) << single;
  EXPECT_EQ(single.find("--network"), std::string::npos) << single;
  const std::string packed = absl::StrJoin(CellTrainArgs(*spec, cells[4], "OUT"), " ");
  for (const char* want : {"--node_cpus=0.4", "--ranks_per_node=2", "--ps_shards=4", "--workers=4"}) {
    EXPECT_NE(packed.find(want), std::string::npos) << want << " in " << packed;
  }
  EXPECT_EQ(DescribeEmulation(*spec, 0.4),
            "emulated cluster on one machine: 0.40 CPU per node (cgroup CPU quota), links bw=1gbit per node "
            "(network namespaces, tc), 1 process per node (s: 2); not a real cluster's numbers");
  // A share that does not divide evenly is rounded down, so that the nodes' decimal
  // flags never add up to more than the machine: 2 CPUs over 3 nodes.
  spec->clear_strategies();
  spec->add_strategies()->set_kind("ps");
  spec->clear_workers();
  spec->add_workers(2);
  cells = ExpandCells(*spec);
  ASSERT_TRUE(ResolveCellEmulation(*spec, 2, &cells).ok());
  EXPECT_DOUBLE_EQ(cells[0].node_cpus, 0.6666);
  EXPECT_NE(absl::StrJoin(CellTrainArgs(*spec, cells[0], "OUT"), " ").find("--node_cpus=0.6666 "), std::string::npos);
  // A fixed share the largest cell cannot fit is refused, naming both numbers.
  spec->set_node_cpus("0.8");  // x 3 nodes = 2.4 CPUs.
  cells = ExpandCells(*spec);
  EXPECT_EQ(ResolveCellEmulation(*spec, 2, &cells).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SpecTest, BadEmulationIsRefusedBeforeAnyCell) {
  const std::string base = "strategies { kind: \"ddp\" ranks_per_node: 2 } workers: 2 workers: 4 model: \"mlp:4-2\" "
                           "batch_per_worker: 8 steps: 3 ";
  EXPECT_TRUE(ParseSpec(base + "node_cpus: \"auto\" slow_node: \"1:0.5\"", "s").ok());
  EXPECT_EQ(ParseSpec(base + "node_cpus: \"-1\"", "s").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSpec(base + "slow_node: \"1:0.5\"", "s").status().message(),
            "s: slow_node needs node_cpus (the slow node's CPU share is a fraction of it)");
  EXPECT_EQ(ParseSpec(base + "node_cpus: \"auto\" slow_node: \"2:0.5\"", "s").status().message(),
            "s: slow_node: rank 2 does not exist in the cells with 2 worker(s) (ranks 0..1)");
  EXPECT_EQ(ParseSpec(base + "node_cpus: \"auto\" slow_node: \"1:0\"", "s").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSpec("strategies { kind: \"ddp\" ranks_per_node: 2 } workers: 3 model: \"mlp:4-2\" "
                      "batch_per_worker: 8 steps: 3",
                      "s")
                .status()
                .message(),
            "s: cell ddp-k2-n3-r0: 3 processes do not divide into nodes of 2 (ranks_per_node)");
}

TEST(SpecTest, CellArgsCarryTheStrategysFlags) {
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      "strategies { kind: \"ps\" ps_shards: 2 ps_sync: \"ssp:2\" } workers: 4 model: \"mlp:4-2\" "
      "global_batch: 64 steps: 3 network: \"bw=1gbit\"",
      "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<Cell> cells = ExpandCells(*spec);
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].batch_per_worker, 16);
  const std::string args = absl::StrJoin(CellTrainArgs(*spec, cells[0], "OUT"), " ");
  for (const char* want : {"--strategy=ps", "--batch=16", "--workers=4", "--ps_shards=2",
                           "--ps_sync=ssp:2", "--network=bw=1gbit", "--out=OUT"}) {
    EXPECT_NE(args.find(want), std::string::npos) << want << " not in " << args;
  }
}

// Compression reaches its cells' command line and label; ddp on the ring over gloo and
// the PS over TCP take it, and only a known format (CheckCompression's words).
TEST(SpecTest, CompressReachesTheCellsAndIsChecked) {
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      "strategies { kind: \"ddp\" compress: \"fp16\" } strategies { kind: \"ddp\" compress: \"none\" } "
      "workers: 2 model: \"mlp:4-2\" batch_per_worker: 8 steps: 3",
      "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<Cell> cells = ExpandCells(*spec);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].label, "ddp-fp16");
  EXPECT_EQ(cells[1].label, "ddp");
  EXPECT_NE(absl::StrJoin(CellTrainArgs(*spec, cells[0], "OUT"), " ").find("--compress=fp16"), std::string::npos);
  EXPECT_EQ(StrategyError("kind: \"ddp\" compress: \"zstd\""),
            "s: strategy ddp-zstd: unknown --compress 'zstd' (expected none, fp16, bf16, topk:F or powersgd:R)");
  EXPECT_EQ(StrategyError("kind: \"ps\" ps_transport: \"grpc\" compress: \"bf16\""),
            "s: strategy ps-s1-bsp-grpc-bf16: --compress=bf16 on the PS runs on --ps_transport=tcp (gRPC's data "
            "plane is not compressed)");
  EXPECT_EQ(StrategyError("kind: \"dp\" compress: \"bf16\""),
            "s: strategy dp-threads: --compress=bf16 needs --strategy=ddp or ps");
  absl::StatusOr<ExperimentSpec> ps = ParseSpec(
      "strategies { kind: \"ps\" compress: \"fp16\" } workers: 2 model: \"mlp:4-2\" batch_per_worker: 8 steps: 3", "s");
  ASSERT_TRUE(ps.ok()) << ps.status();
  const std::vector<Cell> ps_cells = ExpandCells(*ps);
  ASSERT_EQ(ps_cells.size(), 1u);
  EXPECT_EQ(ps_cells[0].label, "ps-s1-bsp-fp16");
  EXPECT_NE(absl::StrJoin(CellTrainArgs(*ps, ps_cells[0], "OUT"), " ").find("--compress=fp16"), std::string::npos);
  EXPECT_EQ(StrategyError("kind: \"ddp\" allreduce: \"halving-doubling\" compress: \"fp16\""),
            "s: strategy ddp-hd-fp16: --compress=fp16 runs on the ring: drop --allreduce=halving-doubling or use "
            "--allreduce=ring");
}

// A PS strategy's transport reaches its cells' command line and label (gRPC's cells
// are named; TCP is the default); only ps takes one, and only grpc or tcp.
TEST(SpecTest, PsTransportReachesTheCellsAndIsChecked) {
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      "strategies { kind: \"ps\" ps_transport: \"grpc\" } strategies { kind: \"ps\" } "
      "strategies { kind: \"ps\" ps_transport: \"tcp\" ps_shards: 2 } workers: 2 "
      "model: \"mlp:4-2\" batch_per_worker: 8 steps: 3",
      "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<Cell> cells = ExpandCells(*spec);
  ASSERT_EQ(cells.size(), 3u);
  EXPECT_EQ(cells[0].label, "ps-s1-bsp-grpc");
  EXPECT_EQ(cells[1].label, "ps-s1-bsp");
  EXPECT_EQ(cells[2].label, "ps-s2-bsp");
  EXPECT_NE(absl::StrJoin(CellTrainArgs(*spec, cells[0], "OUT"), " ").find("--ps_transport=grpc"), std::string::npos);
  EXPECT_EQ(absl::StrJoin(CellTrainArgs(*spec, cells[1], "OUT"), " ").find("--ps_transport"), std::string::npos);
  EXPECT_NE(absl::StrJoin(CellTrainArgs(*spec, cells[2], "OUT"), " ").find("--ps_transport=tcp"), std::string::npos);
  EXPECT_EQ(StrategyError("kind: \"ps\" ps_transport: \"rdma\""),
            "s: strategy ps-s1-bsp: unknown ps_transport 'rdma' (expected grpc or tcp)");
  EXPECT_EQ(StrategyError("kind: \"ddp\" ps_transport: \"tcp\""), "s: strategy ddp: ps_transport is for ps");
}

// Summation servers (issue 35) and the chunk size reach the cells' command lines and
// labels; summation under SSP, an unknown mode and a chunk size outside [1, 65536] or
// on DDP are refused naming the strategy.
TEST(SpecTest, PsModeAndChunkSizeReachTheCellsAndAreChecked) {
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      "strategies { kind: \"ps\" ps_shards: 4 ps_mode: \"summation\" ps_chunk_kb: 256 } workers: 4 "
      "model: \"mlp:4-2\" batch_per_worker: 8 steps: 3",
      "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<Cell> cells = ExpandCells(*spec);
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].label, "ps-sum-s4-bsp");
  const std::string args = absl::StrJoin(CellTrainArgs(*spec, cells[0], "OUT"), " ");
  EXPECT_NE(args.find("--ps_mode=summation"), std::string::npos) << args;
  EXPECT_NE(args.find("--ps_chunk_kb=256"), std::string::npos) << args;
  EXPECT_EQ(StrategyError("kind: \"ps\" ps_mode: \"sum\""),
            "s: strategy ps-s1-bsp: unknown ps_mode 'sum' (expected optimizer or summation)");
  EXPECT_EQ(StrategyError("kind: \"ps\" ps_mode: \"summation\" ps_sync: \"asp\""),
            "s: strategy ps-sum-s1-asp: ps_mode summation needs ps_sync bsp, got asp");
  EXPECT_EQ(StrategyError("kind: \"ddp\" ps_mode: \"summation\""), "s: strategy ddp: ps_mode is for ps");
  EXPECT_EQ(StrategyError("kind: \"ps\" ps_chunk_kb: 70000"),
            "s: strategy ps-s1-bsp: ps_chunk_kb must be in [1, 65536], got 70000");
  EXPECT_EQ(StrategyError("kind: \"ddp\" ps_chunk_kb: 64"), "s: strategy ddp: ps_chunk_kb is for ps");
}

// A dp cell is `train --strategy=dp --workers=N` on one process: no network, node CPU
// share or slow node, one node; the lock is passed on and named in the label.
TEST(SpecTest, DpCellsRunOneProcessOfReplicaThreads) {
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      "strategies { kind: \"single\" } strategies { kind: \"dp\" } "
      "strategies { kind: \"dp\" dp_interpreter_lock: true } workers: 2 workers: 4 "
      "model: \"mlp:4-2\" batch_per_worker: 8 steps: 3 network: \"bw=1gbit\" node_cpus: \"auto\"",
      "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<Cell> cells = ExpandCells(*spec);
  ASSERT_EQ(cells.size(), 5u);  // single once, each dp at 2 and 4.
  ASSERT_TRUE(ResolveCellEmulation(*spec, 2, &cells).ok());
  EXPECT_EQ(cells[1].label, "dp-threads");
  EXPECT_EQ(cells[3].label, "dp-threads-gil");
  EXPECT_EQ(cells[2].nodes, 1);
  EXPECT_EQ(cells[2].node_cpus, 0);
  EXPECT_EQ(cells[2].global_batch, 32);
  const std::string args = absl::StrJoin(CellTrainArgs(*spec, cells[2], "OUT"), " ");
  for (const char* want : {"--strategy=dp", "--workers=4", "--batch=8"}) {
    EXPECT_NE(args.find(want), std::string::npos) << want << " not in " << args;
  }
  for (const char* unwanted : {"--network", "--node_cpus", "--slow_node", "--ranks_per_node",
                               "--dp_interpreter_lock"}) {
    EXPECT_EQ(args.find(unwanted), std::string::npos) << unwanted << " in " << args;
  }
  EXPECT_NE(absl::StrJoin(CellTrainArgs(*spec, cells[3], "OUT"), " ").find("--dp_interpreter_lock"),
            std::string::npos);
  EXPECT_EQ(ParseSpec("strategies { kind: \"ddp\" dp_interpreter_lock: true } workers: 2 "
                      "model: \"mlp:4-2\" batch_per_worker: 8",
                      "s")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSpec("strategies { kind: \"dp\" device: \"cuda\" } workers: 2 "
                      "model: \"mlp:4-2\" batch_per_worker: 8",
                      "s")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SpecTest, UnsetFieldsTakeTheCommandLineDefaultsSetOnesAreKept) {
  const std::string base = "strategies { kind: \"single\" } model: \"mlp:4-2\" batch_per_worker: 8 steps: 3 ";
  absl::StatusOr<ExperimentSpec> unset = ParseSpec(base, "s");
  ASSERT_TRUE(unset.ok()) << unset.status();
  std::string args = absl::StrJoin(CellTrainArgs(*unset, ExpandCells(*unset)[0], "OUT"), " ");
  for (const char* want : {"--momentum=0.9", "--lr=0.02", "--threads=1", "--seed=1", "--epochs=5",
                           "--dataset=fashion-mnist", "--timeout_s=60"}) {
    EXPECT_NE(args.find(want), std::string::npos) << want << " not in " << args;
  }
  absl::StatusOr<ExperimentSpec> set =
      ParseSpec(base + "momentum: 0 threads: 0 lr: 0.5 seed: 7 epochs: 2", "s");
  ASSERT_TRUE(set.ok()) << set.status();
  args = absl::StrJoin(CellTrainArgs(*set, ExpandCells(*set)[0], "OUT"), " ");
  for (const char* want : {"--momentum=0 ", "--lr=0.5", "--threads=0", "--seed=7", "--epochs=2"}) {
    EXPECT_NE(args.find(want), std::string::npos) << want << " not in " << args;
  }
  EXPECT_EQ(ParseSpec(base + "epochs: 0", "s").status().message(), "s: epochs must be >= 1, got 0");
}

constexpr char kBase[] = "model: \"mlp:4-2\" batch_per_worker: 8 steps: 3 workers: 2 ";

std::string Args(const ExperimentSpec& spec, size_t cell) {
  return absl::StrJoin(CellTrainArgs(spec, ExpandCells(spec)[cell], "OUT"), " ");
}

TEST(SpecTest, GpuCellsGetTheirDevicePrecisionAndBackend) {
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      absl::StrCat(kBase, "device: \"cuda\" precision: \"tf32\" strategies { kind: \"single\" } "
                          "strategies { kind: \"ps\" } strategies { kind: \"ddp\" } "
                          "strategies { kind: \"ddp\" device: \"cpu\" }"),
      "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<std::string> ids;
  for (const Cell& c : ExpandCells(*spec)) ids.push_back(c.id);
  EXPECT_EQ(absl::StrJoin(ids, " "), "single-cuda-n1-r0 ps-s1-bsp-cuda-n2-r0 ddp-nccl-n2-r0 ddp-n2-r0");
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NE(Args(*spec, i).find("--device=cuda --precision=tf32"), std::string::npos) << Args(*spec, i);
  }
  EXPECT_NE(Args(*spec, 2).find("--backend=nccl"), std::string::npos) << Args(*spec, 2);
  // The strategy's own device overrides the spec's: DDP on the CPU, Gloo, no precision.
  EXPECT_NE(Args(*spec, 3).find("--device=cpu"), std::string::npos) << Args(*spec, 3);
  EXPECT_NE(Args(*spec, 3).find("--backend=gloo"), std::string::npos) << Args(*spec, 3);
  EXPECT_EQ(Args(*spec, 3).find("--precision"), std::string::npos) << Args(*spec, 3);
  EXPECT_TRUE(SpecUsesGpu(*spec));
}

TEST(SpecTest, CpuSpecsAreUnchangedByTheDeviceFields) {
  absl::StatusOr<ExperimentSpec> spec =
      ParseSpec(absl::StrCat(kBase, "strategies { kind: \"ddp\" } strategies { kind: \"single\" }"), "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(ExpandCells(*spec)[0].id, "ddp-n2-r0");
  EXPECT_EQ(ExpandCells(*spec)[1].id, "single-n1-r0");
  EXPECT_NE(Args(*spec, 0).find("--device=cpu"), std::string::npos);
  EXPECT_NE(Args(*spec, 0).find("--backend=gloo"), std::string::npos);
  EXPECT_EQ(Args(*spec, 0).find("--precision"), std::string::npos);
  EXPECT_FALSE(SpecUsesGpu(*spec));
}

TEST(SpecTest, BackendAndDeviceMustAgree) {
  const auto error = [](const std::string& extra) {
    return std::string(ParseSpec(absl::StrCat(kBase, extra), "s").status().message());
  };
  EXPECT_EQ(error("strategies { kind: \"ddp\" backend: \"nccl\" }"),
            "s: strategy ddp: backend nccl needs device cuda, but its device is cpu (set device: \"cuda\" "
            "in the strategy or the spec)");
  EXPECT_EQ(error("device: \"cuda\" strategies { kind: \"ddp\" backend: \"gloo\" }"),
            "s: strategy ddp: backend gloo needs device cpu, but its device is cuda (on the GPU use backend "
            "nccl, or leave backend unset)");
  EXPECT_EQ(error("strategies { kind: \"ddp\" backend: \"gloo\" device: \"cuda:1\" }"),
            "s: strategy ddp: backend gloo needs device cpu, but its device is cuda:1 (on the GPU use backend "
            "nccl, or leave backend unset)");
  EXPECT_EQ(error("strategies { kind: \"ddp\" backend: \"mpi\" }"),
            "s: strategy ddp: unknown backend 'mpi' (expected gloo or nccl)");
  EXPECT_EQ(error("device: \"gpu\" strategies { kind: \"single\" }"),
            "s: device must be cpu, cuda or cuda:K (K >= 0), got 'gpu'");
  EXPECT_EQ(error("strategies { kind: \"ps\" device: \"cuda:-1\" }"),
            "s: strategy ps: device must be cpu, cuda or cuda:K (K >= 0), got 'cuda:-1'");
  EXPECT_EQ(error("precision: \"fp16\" strategies { kind: \"single\" }"),
            "s: precision must be fp32, tf32 or bf16, got 'fp16'");
  EXPECT_EQ(error("device: \"cuda\" strategies { kind: \"ddp\" allreduce: \"ring\" }"),
            "s: strategy ddp: allreduce 'ring' is Gloo's; NCCL picks its own algorithm");
  EXPECT_EQ(error("strategies { kind: \"ps\" backend: \"nccl\" }"), "s: strategy ps: backend is DDP's (nccl)");
  // Accepted: nccl with a GPU from the strategy or the spec.
  EXPECT_EQ(error("strategies { kind: \"ddp\" backend: \"nccl\" device: \"cuda\" }"), "");
  EXPECT_EQ(error("device: \"cuda:0\" strategies { kind: \"ddp\" backend: \"nccl\" }"), "");
}

TEST(SpecTest, GpuCellsAreRefusedWhereTheyCannotRun) {
  absl::StatusOr<ExperimentSpec> gpu =
      ParseSpec(absl::StrCat(kBase, "strategies { kind: \"ddp\" device: \"cuda\" }"), "s");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  DeviceInfo none;
  none.detail = "libcuda.so.1: cannot open shared object file";
  DeviceInfo one;
  one.gpu_count = 1;
  absl::Status s = CheckGpuCellsCanRun(*gpu, /*built_with_cuda=*/false, one);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "the spec has cells on the GPU (device cuda), but this ringside was built without "
                         "CUDA (rebuild with --config=cuda, or use the GPU bundle)");
  s = CheckGpuCellsCanRun(*gpu, /*built_with_cuda=*/true, none);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "the spec has cells on the GPU (device cuda), but this machine has no usable GPU: "
                         "libcuda.so.1: cannot open shared object file");
  EXPECT_TRUE(CheckGpuCellsCanRun(*gpu, true, one).ok());
  absl::StatusOr<ExperimentSpec> k =
      ParseSpec(absl::StrCat(kBase, "device: \"cuda:1\" strategies { kind: \"single\" }"), "s");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(CheckGpuCellsCanRun(*k, true, one).message(),
            "strategy single-cuda1: device cuda:1: this machine has 1 GPU(s)");
  // A CPU spec runs anywhere.
  absl::StatusOr<ExperimentSpec> cpu = ParseSpec(absl::StrCat(kBase, "strategies { kind: \"ddp\" }"), "s");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(CheckGpuCellsCanRun(*cpu, false, none).ok());
}

TEST(SpecTest, TheGpuSpecRunsSingleGpuPsAndDdpNccl) {
  absl::StatusOr<ExperimentSpec> spec = LoadSpec(SpecPath("gpu.textproto"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<std::string> ids;
  for (const Cell& c : ExpandCells(*spec)) {
    ids.push_back(c.id);
    EXPECT_EQ(c.device, "cuda") << c.id;
    EXPECT_EQ(c.batch_per_worker, 256) << c.id;
  }
  EXPECT_EQ(absl::StrJoin(ids, " "),
            "single-cuda-n1-r0 ps-s2-bsp-cuda-n1-r0 ps-s2-bsp-cuda-n2-r0 ps-s2-bsp-cuda-n4-r0 "
            "ddp-nccl-n1-r0 ddp-nccl-n2-r0 ddp-nccl-n4-r0");
  EXPECT_EQ(spec->model(), "mlp:784-4096-4096-4096-10");
}


// Issue #23 (hostile input): two strategies whose cells share an id would share a
// directory, and compare would report the first's numbers for both.
TEST(SpecTest, CollidingCellsAreRefusedNamingBothStrategies) {
  const std::string rest = " workers: 2 model: \"mlp:4-2\" batch_per_worker: 8 steps: 3";
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      "strategies { kind: \"ddp\" bucket_cap_mb: 10 } strategies { kind: \"ddp\" bucket_cap_mb: 50 }" + rest, "s");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            "s: strategies {kind: \"ddp\" bucket_cap_mb: 10} and {kind: \"ddp\" bucket_cap_mb: 50} both make "
            "cell ddp-n2-r0 (labels 'ddp' and 'ddp'): give them distinct labels");
  // Labels that differ only where a directory name has '_' collide too.
  EXPECT_EQ(ParseSpec("strategies { kind: \"ps\" label: \"a b\" } strategies { kind: \"ps\" label: \"a/b\" }" + rest,
                      "s")
                .status()
                .message(),
            "s: strategies {kind: \"ps\" label: \"a b\"} and {kind: \"ps\" label: \"a/b\"} both make cell a_b-n2-r0 "
            "(labels 'a b' and 'a/b'): give them distinct labels");
  // Distinct labels are fine.
  EXPECT_TRUE(ParseSpec("strategies { kind: \"ddp\" bucket_cap_mb: 10 label: \"ddp-10\" } "
                        "strategies { kind: \"ddp\" bucket_cap_mb: 50 label: \"ddp-50\" }" + rest,
                        "s")
                  .ok());
}

// Numbers a hostile or mistyped spec could use to exhaust memory (cells) or overflow
// an int (batch sizes) are refused in one line.
TEST(SpecTest, OutOfRangeNumbersAreRefused) {
  const std::string base = "strategies { kind: \"ddp\" } model: \"mlp:4-2\" steps: 3 ";
  auto message = [&](const std::string& extra) {
    return std::string(ParseSpec(base + extra, "s").status().message());
  };
  EXPECT_EQ(message("workers: 2 batch_per_worker: 8 repeats: 2000000000"), "s: repeats must be in [0, 1000], got 2000000000");
  EXPECT_EQ(message("workers: 100000 batch_per_worker: 8"), "s: worker count must be in [1, 1024], got 100000");
  EXPECT_EQ(message("workers: 1024 batch_per_worker: 2000000000"),
            "s: the global batch at 1024 workers is over 16777216 samples");
  EXPECT_EQ(message("workers: 1 workers: 2 workers: 3 workers: 4 workers: 5 batch_per_worker: 8 repeats: 1000 "
                    "strategies { kind: \"ps\" } strategies { kind: \"single\" }"),
            "s: the spec makes 15000 cells, more than 10000");
  EXPECT_EQ(message("workers: 2 batch_per_worker: 8 lr: inf"), "s: lr must be a finite number >= 0, got inf");
  EXPECT_EQ(message("workers: 2 batch_per_worker: 8 momentum: nan"), "s: momentum must be finite, got nan");
  EXPECT_EQ(message("workers: 2 batch_per_worker: 8 cell_timeout_s: -1"), "s: cell_timeout_s must be >= 0, got -1");
  EXPECT_EQ(message("workers: 2 batch_per_worker: 8 timeout_s: 0"), "s: timeout_s must be >= 1, got 0");
  EXPECT_EQ(ParseSpec("strategies { kind: \"ddp\" bucket_cap_mb: nan } workers: 2 model: \"m\" batch_per_worker: 8 "
                      "steps: 3", "s").status().message(),
            "s: bucket_cap_mb must be a finite number >= 0, got nan");
  EXPECT_EQ(ParseSpec("strategies { kind: \"ps\" ps_shards: 100000 } workers: 2 model: \"m\" batch_per_worker: 8 "
                      "steps: 3", "s").status().message(),
            "s: ps_shards must be <= 1024, got 100000");
  EXPECT_EQ(ParseSpec("strategies { kind: \"ps\" ps_shards: -2 } workers: 2 model: \"m\" batch_per_worker: 8 "
                      "steps: 3", "s").status().message(),
            "s: strategy ps-s1-bsp: ps_shards must be >= 0 (0: one shard), got -2");
}

}  // namespace
}  // namespace ringside
