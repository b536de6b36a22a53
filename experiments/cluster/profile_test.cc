#include "experiments/cluster/profile.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr char kGood[] = R"pb(
  name: "test" device: "X" device_tflops: 10 devices_per_node: 4
  nic { bandwidth: "25gbit" latency_us: 5 }
  intra_node { bandwidth: "100GB/s" }
  step { model: "cnn:lenet" batch: 256 step_ms: 80 source: "measured" }
)pb";

TEST(ClusterProfileTest, ParsesEveryField) {
  absl::StatusOr<ClusterProfile> p = ParseClusterProfile(kGood, "t");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "test");
  EXPECT_DOUBLE_EQ(p->device_flops, 10e12);
  EXPECT_EQ(p->devices_per_node, 4);
  EXPECT_DOUBLE_EQ(p->nic.bytes_per_s, 25e9 / 8);
  EXPECT_DOUBLE_EQ(p->nic.latency_s, 5e-6);
  EXPECT_DOUBLE_EQ(p->intra_node.bytes_per_s, 100e9);
  EXPECT_DOUBLE_EQ(p->intra_node.latency_s, 0);
  ASSERT_EQ(p->steps.size(), 1u);
  EXPECT_DOUBLE_EQ(p->steps[0].step_s, 0.080);
}

TEST(ClusterProfileTest, TargetStepFromEntryElseFlops) {
  absl::StatusOr<ClusterProfile> p = ParseClusterProfile(kGood, "t");
  ASSERT_TRUE(p.ok());
  // The entry wins for its model and batch, whatever the FLOPs.
  EXPECT_DOUBLE_EQ(*TargetStepSeconds(*p, "cnn:lenet", 256, 1e12), 0.080);
  // Otherwise GEMM FLOPs / device rate: 5e9 / 10e12 = 0.5 ms.
  EXPECT_DOUBLE_EQ(*TargetStepSeconds(*p, "cnn:lenet", 128, 5e9), 5e-4);
  EXPECT_DOUBLE_EQ(*TargetStepSeconds(*p, "mlp:784-10", 256, 5e9), 5e-4);
}

TEST(ClusterProfileTest, ADeviceWithoutASpeedParsesButHasNoStep) {
  absl::StatusOr<ClusterProfile> p = ParseClusterProfile(R"pb(name: "x" nic { bandwidth: "1gbit" })pb", "t");
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<double> t = TargetStepSeconds(*p, "cnn:lenet", 256, 6e9);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(t.status().message(), "no device_tflops to derive one")) << t.status();
}

TEST(ClusterProfileTest, NoRateNoEntryIsFailedPrecondition) {
  absl::StatusOr<ClusterProfile> p = ParseClusterProfile(
      R"pb(name: "s" nic { bandwidth: "1gbit" } step { model: "cnn:lenet" batch: 256 step_ms: 80 })pb", "t");
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<double> t = TargetStepSeconds(*p, "cnn:lenet", 64, 1e9);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(t.status().message(), "no step time for cnn:lenet at batch 64"));
}

struct BadCase {
  const char* text;
  const char* message;
};

class BadProfileTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadProfileTest, OneLineNamingTheField) {
  absl::StatusOr<ClusterProfile> p = ParseClusterProfile(GetParam().text, "f.textproto");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(p.status().message(), "cluster profile f.textproto: ")) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), GetParam().message)) << p.status();
  EXPECT_FALSE(absl::StrContains(p.status().message(), "\n"));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, BadProfileTest,
    ::testing::Values(
        BadCase{R"pb(device_tflops: 1 nic { bandwidth: "1gbit" })pb", "name is missing"},
        BadCase{R"pb(name: "x" device_tflops: -3 nic { bandwidth: "1gbit" })pb", "device_tflops must be > 0"},
        BadCase{R"pb(name: "x" device_tflops: 1)pb", "nic is missing"},
        BadCase{R"pb(name: "x" device_tflops: 1 nic { latency_us: 1 })pb", "nic.bandwidth is missing"},
        BadCase{R"pb(name: "x" device_tflops: 1 nic { bandwidth: "10mbps" })pb", "unknown unit"},
        BadCase{R"pb(name: "x" device_tflops: 1 nic { bandwidth: "1gbit" latency_us: -1 })pb",
                "nic.latency_us must be >= 0"},
        BadCase{R"pb(name: "x" device_tflops: 1 devices_per_node: 2 nic { bandwidth: "1gbit" })pb",
                "intra_node is missing"},
        BadCase{R"pb(name: "x" device_tflops: 1 devices_per_node: 0 nic { bandwidth: "1gbit" })pb",
                "devices_per_node must be >= 1"},
        BadCase{R"pb(name: "x" nic { bandwidth: "1gbit" } step { model: "m" batch: 8 step_ms: -2 })pb",
                "step[0].step_ms must be > 0"},
        BadCase{R"pb(name: "x" nic { bandwidth: "1gbit" } step { model: "m" step_ms: 2 })pb",
                "step[0].batch is missing"},
        BadCase{R"pb(name: "x" nic { bandwidth: "1gbit" } nonsense: 3)pb", "line 1"}));

TEST(ClusterProfileTest, EveryPresetLoadsAndNamesItsSource) {
  ASSERT_FALSE(ClusterPresetNames().empty());
  for (const std::string& name : ClusterPresetNames()) {
    absl::StatusOr<ClusterProfile> p = LoadClusterProfile(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    EXPECT_EQ(p->name, name);
    EXPECT_FALSE(p->source.empty()) << name;
  }
}

TEST(ClusterProfileTest, UnknownPresetListsThePresets) {
  absl::StatusOr<ClusterProfile> p = LoadClusterProfile("no-such-cluster");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(p.status().message(), "dgx-a100")) << p.status();
}

}  // namespace
}  // namespace ringside
