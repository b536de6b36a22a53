// A spec's cluster: bad profiles and combinations refused in one line before anything is
// made; a kept dilation reused on resume; the record's round trip.
#include "experiments/matrix/cluster_emulation.h"

#include <cstdlib>
#include <filesystem>
#include <string>

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
        Refusal{"cluster: \"no-such\" node_cpus: \"auto\"", 0.4, "is neither a preset (aws-p3.16xlarge"},
        Refusal{"cluster: \"dgx-a100\" node_cpus: \"auto\"", 0.4, "8 devices per node"}));

TEST(ClusterSpecTest, ABadProfileFileNamesItsField) {
  const std::string path = TempDir() + "/bad_cluster.textproto";
  ASSERT_TRUE(WriteFileAtomically(path, "name: \"x\" device_tflops: -1 nic { bandwidth: \"1gbit\" }\n").ok());
  const absl::Status s = CheckClusterSpec(Spec(absl::StrCat("cluster: \"", path, "\" node_cpus: \"0.5\"")), 0.5);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "device_tflops must be > 0")) << s;
}

TEST(ClusterSpecTest, CompareRefusesABadClusterBeforeMakingAnything) {
  const std::string spec = TempDir() + "/cluster_spec.textproto";
  ASSERT_TRUE(WriteFileAtomically(spec, "strategies { kind: \"single\" } workers: 1 model: \"mlp:4-2\" "
                                        "batch_per_worker: 8 steps: 3 cluster: \"nope\" node_cpus: \"0.5\"\n")
                  .ok());
  CompareOptions o;
  o.spec_path = spec;
  o.out_dir = TempDir() + "/cluster_out";
  o.self_exe = "/bin/false";  // Never reached.
  o.progress = nullptr;
  const absl::Status s = RunCompare(o);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StartsWith(s.message(), spec + ": ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "cluster \"nope\" is neither a preset")) << s;
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));
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

TEST(DilationRecordTest, AResumedMatrixKeepsItsLinks) {
  // The kept record fits (same cluster, model, batch and share): reused as it is, with
  // nothing measured (no cgroup, so no root needed).
  const std::string dir = TempDir() + "/kept";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteDilation(Kept(), dir).ok());
  absl::StatusOr<DilationRecord> d =
      ResolveDilation(Spec("cluster: \"gige-cpu\" node_cpus: \"0.4\""), 0.4, dir, nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->network(), "bw=400mbit");
}

}  // namespace
}  // namespace ringside
