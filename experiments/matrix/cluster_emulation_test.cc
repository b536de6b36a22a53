// A spec's cluster: bad profiles and combinations refused in one line before anything is
// made; a kept dilation reused on resume; the record's round trip.
#include "experiments/matrix/cluster_emulation.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "experiments/matrix/compare.h"
#include "experiments/matrix/spec.h"
#include "experiments/sys/files.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

ExperimentSpec Spec(const std::string& extra) {
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      absl::StrCat("strategies { kind: \"single\" } strategies { kind: \"ddp\" } workers: 2 "
                   "model: \"cnn:lenet\" batch_per_worker: 256 steps: 3 ",
                   extra),
      "t");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ExperimentSpec();
}

TEST(ClusterSpecTest, APresetOnNodesPasses) {
  EXPECT_TRUE(CheckClusterSpec(Spec("cluster: \"gige-cpu\" node_cpus: \"auto\""), 0.4).ok());
  EXPECT_TRUE(CheckClusterSpec(Spec(""), 0).ok());  // No cluster: nothing to check.
}

struct Refusal {
  const char* extra;
  double node_cpus;
  const char* message;
};

class ClusterSpecRefusalTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(ClusterSpecRefusalTest, OneLine) {
  const absl::Status s = CheckClusterSpec(Spec(GetParam().extra), GetParam().node_cpus);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), GetParam().message)) << s;
  EXPECT_EQ(s.message().find('\n'), absl::string_view::npos) << s;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ClusterSpecRefusalTest,
    ::testing::Values(
        Refusal{"cluster: \"gige-cpu\" node_cpus: \"auto\" network: \"bw=1gbit\"", 0.4, "exclude each other"},
        Refusal{"cluster: \"gige-cpu\"", 0, "needs node_cpus"},
        Refusal{"cluster: \"no-such\" node_cpus: \"auto\"", 0.4, "is neither a preset (aws-p3.16xlarge"}));

TEST(ClusterSpecTest, SeveralDevicesPerNodeAreEmulatedNotRefused) {
  EXPECT_TRUE(CheckClusterSpec(Spec("cluster: \"dgx-a100\" node_cpus: \"auto\""), 0.4).ok());
}

// A profile of two devices per node, in a file as a user would write it.
std::string PairsProfile() {
  const std::string path = TempDir() + "/pairs.textproto";
  EXPECT_TRUE(WriteFileAtomically(path, "name: \"pairs\" device_tflops: 0.01 devices_per_node: 2 "
                                        "nic { bandwidth: \"100mbit\" } intra_node { bandwidth: \"1gbit\" }\n")
                  .ok());
  return path;
}

ExperimentSpec PairsSpec(const std::string& strategies, const std::string& workers, const std::string& cpus) {
  absl::StatusOr<ExperimentSpec> spec =
      ParseSpec(absl::StrCat(strategies, " ", workers, " model: \"mlp:4-2\" batch_per_worker: 8 steps: 3 cluster: \"",
                             PairsProfile(), "\" node_cpus: \"", cpus, "\""),
                "t");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ExperimentSpec();
}

const Cell& Find(const std::vector<Cell>& cells, const std::string& id) {
  for (const Cell& c : cells) {
    if (c.id == id) return c;
  }
  ADD_FAILURE() << "no cell " << id;
  return cells.front();
}

TEST(ClusterCellsTest, DevicesPerNodeBecomeRanksPerNodeAndTheSingleGetsOneDevicesShare) {
  const ExperimentSpec spec = PairsSpec(
      "strategies { kind: \"single\" } strategies { kind: \"ddp\" } "
      "strategies { kind: \"ps\" ps_shard_per_worker: true } strategies { kind: \"ps\" ps_colocated: true }",
      "workers: 2 workers: 4", "auto");
  std::vector<Cell> cells = ExpandCells(spec);
  ASSERT_TRUE(ResolveClusterCells(spec, /*machine_cpus=*/2, &cells).ok());
  // DDP at 4: 2 nodes of 2 ranks; PS with a shard per worker at 4: 8 processes, 4
  // nodes (the most of any cell), so "auto" gives each node 2 / 4 = 0.5 CPU.
  EXPECT_EQ(Find(cells, "ddp-n2-r0").ranks_per_node, 2);
  EXPECT_EQ(Find(cells, "ddp-n2-r0").nodes, 1);
  EXPECT_EQ(Find(cells, "ddp-n4-r0").nodes, 2);
  EXPECT_EQ(Find(cells, "ps-sn-bsp-n4-r0").nodes, 4);
  EXPECT_EQ(Find(cells, "ps-s1-bsp-coloc-n4-r0").nodes, 2);
  EXPECT_DOUBLE_EQ(Find(cells, "ddp-n4-r0").node_cpus, 0.5);
  // The single baseline is one process (exempt from filling a node) on one device's
  // share: what the dilation's host step is measured on, and what each rank of a full
  // node computes on (the cost model's node_cpus / ranks_per_node).
  EXPECT_EQ(Find(cells, "single-n1-r0").ranks_per_node, 1);
  EXPECT_DOUBLE_EQ(Find(cells, "single-n1-r0").node_cpus, 0.25);
  const std::vector<std::string> args = CellTrainArgs(spec, Find(cells, "ddp-n4-r0"), "/tmp/x");
  EXPECT_NE(std::find(args.begin(), args.end(), "--ranks_per_node=2"), args.end());
  EXPECT_NE(std::find(args.begin(), args.end(), "--node_cpus=0.5"), args.end());
  const std::vector<std::string> single = CellTrainArgs(spec, Find(cells, "single-n1-r0"), "/tmp/x");
  EXPECT_NE(std::find(single.begin(), single.end(), "--node_cpus=0.25"), single.end());
}

// One device per node (the demo's gige-cpu): a PS that packs each shard beside its
// worker (ranks_per_node 2, as the demo's spec does) keeps its packing: a shard is not a
// device. DDP's ranks stay one per node.
TEST(ClusterCellsTest, OneDevicePerNodeKeepsAPsShardBesideItsWorker) {
  const ExperimentSpec spec = Spec(
      "strategies { kind: \"ps\" ps_shard_per_worker: true ranks_per_node: 2 label: \"ps-n\" } workers: 4 "
      "cluster: \"gige-cpu\" node_cpus: \"auto\"");
  std::vector<Cell> cells = ExpandCells(spec);
  ASSERT_TRUE(ResolveClusterCells(spec, 2, &cells).ok());
  EXPECT_EQ(Find(cells, "ps-n-n4-r0").ranks_per_node, 2);
  EXPECT_EQ(Find(cells, "ps-n-n4-r0").nodes, 4);
  EXPECT_EQ(Find(cells, "ddp-n4-r0").ranks_per_node, 1);
}

TEST(ClusterCellsTest, WithoutAClusterTheCellsAreResolvedAsBefore) {
  const ExperimentSpec spec = Spec("node_cpus: \"0.4\"");
  std::vector<Cell> cells = ExpandCells(spec);
  ASSERT_TRUE(ResolveClusterCells(spec, 2, &cells).ok());
  for (const Cell& c : cells) {
    EXPECT_EQ(c.ranks_per_node, 1) << c.id;
    EXPECT_DOUBLE_EQ(c.node_cpus, 0.4) << c.id;
  }
}

struct LayoutRefusal {
  const char* strategies;
  const char* workers;
  const char* message;
};

class ClusterCellsRefusalTest : public ::testing::TestWithParam<LayoutRefusal> {};

TEST_P(ClusterCellsRefusalTest, OneLineNamingBothNumbers) {
  const ExperimentSpec spec = PairsSpec(GetParam().strategies, GetParam().workers, "0.5");
  std::vector<Cell> cells = ExpandCells(spec);
  const absl::Status s = ResolveClusterCells(spec, 2, &cells);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), GetParam().message)) << s;
  EXPECT_EQ(s.message().find('\n'), absl::string_view::npos) << s;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ClusterCellsRefusalTest,
    ::testing::Values(
        LayoutRefusal{"strategies { kind: \"ddp\" }", "workers: 2 workers: 3",
                      "cluster pairs has 2 devices per node: the 3 ranks of ddp at 3 workers do not fill whole "
                      "nodes (3 is not a multiple of 2)"},
        LayoutRefusal{"strategies { kind: \"ps\" ps_shards: 1 }", "workers: 2",
                      "the 3 processes of ps-s1-bsp at 2 workers (1 shard + 2 workers) do not fill whole nodes "
                      "(3 is not a multiple of 2)"},
        LayoutRefusal{"strategies { kind: \"ddp\" ranks_per_node: 4 }", "workers: 4",
                      "strategy ddp-k4's ranks_per_node=4 differs from cluster pairs's 2 devices per node"}));

TEST(ClusterCellsTest, TheSingleBaselineIsExempt) {
  // One process fills no node of two: the single cell alone is not refused.
  const ExperimentSpec spec = PairsSpec("strategies { kind: \"single\" } strategies { kind: \"ddp\" }",
                                        "workers: 2", "0.5");
  std::vector<Cell> cells = ExpandCells(spec);
  EXPECT_TRUE(ResolveClusterCells(spec, 2, &cells).ok());
}

// Runs compare on `spec_text` (written as NAME_spec.textproto) and expects a refusal
// that names the spec and contains `message`, with no output directory made.
void ExpectCompareRefuses(const std::string& name, const std::string& spec_text, const std::string& message) {
  const std::string spec = TempDir() + "/" + name + "_spec.textproto";
  ASSERT_TRUE(WriteFileAtomically(spec, spec_text).ok());
  CompareOptions o;
  o.spec_path = spec;
  o.out_dir = TempDir() + "/" + name + "_out";
  o.self_exe = "/bin/false";  // Never reached.
  o.progress = nullptr;
  const absl::Status s = RunCompare(o);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StartsWith(s.message(), spec + ": ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), message)) << s;
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));
}

TEST(ClusterSpecTest, CompareRefusesRanksThatDoNotFillNodesBeforeMakingAnything) {
  ExpectCompareRefuses("pairs",
                       absl::StrCat("strategies { kind: \"ddp\" } workers: 3 model: \"mlp:4-2\" "
                                    "batch_per_worker: 8 steps: 3 node_cpus: \"0.5\" cluster: \"",
                                    PairsProfile(), "\"\n"),
                       "2 devices per node: the 3 ranks of ddp at 3 workers");
}

TEST(ClusterSpecTest, ABadProfileFileNamesItsField) {
  const std::string path = TempDir() + "/bad_cluster.textproto";
  ASSERT_TRUE(WriteFileAtomically(path, "name: \"x\" device_tflops: -1 nic { bandwidth: \"1gbit\" }\n").ok());
  const absl::Status s = CheckClusterSpec(Spec(absl::StrCat("cluster: \"", path, "\" node_cpus: \"0.5\"")), 0.5);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "device_tflops must be > 0")) << s;
}

TEST(ClusterSpecTest, CompareRefusesABadClusterBeforeMakingAnything) {
  ExpectCompareRefuses("cluster",
                       "strategies { kind: \"single\" } workers: 1 model: \"mlp:4-2\" "
                       "batch_per_worker: 8 steps: 3 cluster: \"nope\" node_cpus: \"0.5\"\n",
                       "cluster \"nope\" is neither a preset");
}

DilationRecord Kept() {
  DilationRecord r;
  r.set_cluster("gige-cpu");
  r.set_factor(2.5);
  r.set_host_step_ms(250);
  r.set_host_compute_ms(249);
  r.set_target_step_ms(100);
  r.set_node_cpus(0.4);
  r.set_model("cnn:lenet");
  r.set_batch(256);
  r.set_network("bw=400mbit");
  r.set_description("cluster gige-cpu emulated with dilation d = 2.50");
  return r;
}

TEST(DilationRecordTest, RoundTrip) {
  const std::string dir = TempDir() + "/round_trip";
  std::filesystem::create_directories(dir);
  EXPECT_EQ(ReadDilation(dir).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteDilation(Kept(), dir).ok());
  absl::StatusOr<DilationRecord> back = ReadDilation(dir);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->network(), "bw=400mbit");
  EXPECT_DOUBLE_EQ(back->factor(), 2.5);
}

TEST(DilationRecordTest, ARecordOfAnotherLayoutIsNotKept) {
  // A record for gige-cpu with 2 devices per node does not fit gige-cpu (1): it is
  // measured again (a tiny model, so quick where a cgroup can be made, refused where
  // it cannot), never handed back. The same record with the profile's layout is kept.
  const ExperimentSpec spec = *ParseSpec(
      "strategies { kind: \"ddp\" } workers: 2 model: \"mlp:4-2\" batch_per_worker: 8 steps: 3 "
      "cluster: \"gige-cpu\" node_cpus: \"0.4\"",
      "t");
  DilationRecord r = Kept();
  r.set_model("mlp:4-2");
  r.set_batch(8);
  const std::string dir = TempDir() + "/other_layout";
  std::filesystem::create_directories(dir);
  r.set_devices_per_node(1);
  ASSERT_TRUE(WriteDilation(r, dir).ok());
  absl::StatusOr<DilationRecord> kept = ResolveDilation(spec, 0.4, dir, nullptr);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->network(), "bw=400mbit");
  r.set_devices_per_node(2);
  ASSERT_TRUE(WriteDilation(r, dir).ok());
  bool fresh = false;
  absl::StatusOr<DilationRecord> d = ResolveDilation(spec, 0.4, dir, nullptr, &fresh);
  EXPECT_TRUE(!d.ok() || d->network() != "bw=400mbit") << "the record of another layout was kept";
  EXPECT_EQ(fresh, d.ok()) << "a dilation measured now must say so (compare then runs its first cell on it)";
}

TEST(DilationRecordTest, AResumedMatrixKeepsItsLinks) {
  // The kept record fits (same cluster, model, batch and share): reused as it is, with
  // nothing measured (no cgroup, so no root needed).
  const std::string dir = TempDir() + "/kept";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteDilation(Kept(), dir).ok());
  bool fresh = true;
  absl::StatusOr<DilationRecord> d =
      ResolveDilation(Spec("cluster: \"gige-cpu\" node_cpus: \"0.4\""), 0.4, dir, nullptr, &fresh);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->network(), "bw=400mbit");
  EXPECT_FALSE(fresh) << "a kept dilation is not fresh: compare measures again before its first cell";
}

}  // namespace
// A DDP cell's pace against its probe's: the probe's single process computed its forward
// in 100 ms; a DDP rank's 130 ms says the host ran 30% slower than the links were shaped
// for. A PS cell, or a forward unknown on either side, has no reading.
TEST(CellPaceOffTest, DdpForwardOverTheProbesLessOne) {
  DilationRecord probe;
  probe.set_host_forward_ms(100);
  CellResult ddp;
  ddp.set_kind("ddp");
  ddp.set_forward_ms(130);
  ASSERT_TRUE(CellPaceOff(ddp, probe).has_value());
  EXPECT_NEAR(*CellPaceOff(ddp, probe), 0.3, 1e-12);
  ddp.set_forward_ms(85);
  EXPECT_NEAR(*CellPaceOff(ddp, probe), -0.15, 1e-12);
  CellResult ps = ddp;
  ps.set_kind("ps");
  EXPECT_FALSE(CellPaceOff(ps, probe).has_value());
  ddp.set_forward_ms(0);
  EXPECT_FALSE(CellPaceOff(ddp, probe).has_value());
  ddp.set_forward_ms(130);
  probe.set_host_forward_ms(0);  // A record written before the forward was kept.
  EXPECT_FALSE(CellPaceOff(ddp, probe).has_value());
}

}  // namespace ringside
