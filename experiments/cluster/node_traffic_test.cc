#include "experiments/cluster/node_traffic.h"

#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr double kM = 100e6;

TEST(NodeTrafficTest, RingAcrossNodesSendsOneRanksShareThroughEachNic) {
  // 16 ranks, 4 per node: 2 x 15/16 x M through each NIC, not 4 times it.
  EXPECT_DOUBLE_EQ(RingNicBytesPerStep(16, 4, kM), 2.0 * 15 / 16 * kM);
  EXPECT_DOUBLE_EQ(RingNicBytesPerStep(16, 1, kM), 2.0 * 15 / 16 * kM);
  EXPECT_DOUBLE_EQ(RingNicBytesPerStep(4, 4, kM), 0);  // One node: nothing leaves it.
  EXPECT_DOUBLE_EQ(RingNicBytesPerStep(1, 1, kM), 0);
  // The other three edges of each node stay inside it.
  EXPECT_DOUBLE_EQ(RingIntraNodeBytesPerStep(16, 4, kM), 3 * 2.0 * 15 / 16 * kM);
  EXPECT_DOUBLE_EQ(RingIntraNodeBytesPerStep(4, 4, kM), 4 * 2.0 * 3 / 4 * kM);
  EXPECT_DOUBLE_EQ(RingIntraNodeBytesPerStep(16, 1, kM), 0);
}

TEST(NodeTrafficTest, HierarchicalUsesTheNodeCount) {
  // 4 nodes of 4: 2 x 3/4 x M through each NIC.
  EXPECT_DOUBLE_EQ(HierarchicalNicBytesPerStep(16, 4, kM), 2.0 * 3 / 4 * kM);
  EXPECT_DOUBLE_EQ(HierarchicalNicBytesPerStep(8, 8, kM), 0);
}

TEST(NodeTrafficTest, PsWorkersAndServers) {
  EXPECT_DOUBLE_EQ(PsWorkerNicBytesPerStep(4, kM), 4 * kM);
  EXPECT_DOUBLE_EQ(PsWorkerNicBytesPerStep(1, kM), kM);
  // 8 workers, 2 shards on a node of 4 shards: 8 x M x 2/4.
  EXPECT_DOUBLE_EQ(PsServerNicBytesPerStep(8, 4, 2, kM), 4 * kM);
  EXPECT_DOUBLE_EQ(PsServerNicBytesPerStep(8, 1, 1, kM), 8 * kM);
}

}  // namespace
}  // namespace ringside
