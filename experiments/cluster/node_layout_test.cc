// Devices per node as ranks per node: a device's share, and the one-line refusals.
#include "experiments/cluster/node_layout.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

ClusterProfile TwoPerNode() {
  ClusterProfile p;
  p.name = "pairs";
  p.devices_per_node = 2;
  p.nic = PathProfile{125e6, 0};
  p.intra_node = PathProfile{1e9, 0};
  return p;
}

TEST(DeviceCpusTest, ANodesShareSplitOverItsDevices) {
  EXPECT_DOUBLE_EQ(DeviceCpus(0.4, 2), 0.2);
  EXPECT_DOUBLE_EQ(DeviceCpus(1.5, 8), 0.1875);
  // 2/3 CPU over 3 devices: rounded down to 1e-4, never more than the node holds.
  EXPECT_DOUBLE_EQ(DeviceCpus(2.0 / 3, 3), 0.2222);
  EXPECT_LE(3 * DeviceCpus(2.0 / 3, 3), 2.0 / 3);
  // One device: the node's share as given; no share: none.
  EXPECT_DOUBLE_EQ(DeviceCpus(2.0 / 3, 1), 2.0 / 3);
  EXPECT_EQ(DeviceCpus(0, 4), 0);
}

TEST(ClusterRanksPerNodeTest, RanksPerNodeIsDevicesPerNode) {
  absl::StatusOr<int> k = ClusterRanksPerNode(TwoPerNode(), 4, "4 DDP ranks", 0, "--ranks_per_node");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(*k, 2);
  // The same number given explicitly is fine; one device per node fits any count.
  EXPECT_EQ(ClusterRanksPerNode(TwoPerNode(), 6, "6 ranks", 2, "--ranks_per_node").value_or(0), 2);
  ClusterProfile one = TwoPerNode();
  one.devices_per_node = 1;
  EXPECT_EQ(ClusterRanksPerNode(one, 3, "3 ranks", 0, "--ranks_per_node").value_or(0), 1);
}

TEST(ClusterRanksPerNodeTest, RanksThatDoNotFillNodesAreRefusedNamingBothNumbers) {
  absl::StatusOr<int> k = ClusterRanksPerNode(TwoPerNode(), 3, "3 DDP ranks", 0, "--ranks_per_node");
  ASSERT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(k.status().message(),
            "cluster pairs has 2 devices per node: 3 DDP ranks do not fill whole nodes (3 is not a multiple of 2)");
}

TEST(ClusterRanksPerNodeTest, ADifferentRanksPerNodeIsRefused) {
  absl::StatusOr<int> k = ClusterRanksPerNode(TwoPerNode(), 4, "4 ranks", 4, "--ranks_per_node");
  ASSERT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(k.status().message(), "--ranks_per_node=4 differs from cluster pairs's 2 devices"))
      << k.status();
  EXPECT_EQ(k.status().message().find('\n'), absl::string_view::npos);
}

}  // namespace
}  // namespace ringside
