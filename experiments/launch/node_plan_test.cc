#include "experiments/launch/node_plan.h"

#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::ElementsAre;

TEST(ParseSlowNodeTest, AcceptsRankAndFraction) {
  absl::StatusOr<SlowNodeSpec> s = ParseSlowNode("1:0.5");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->enabled);
  EXPECT_EQ(s->rank, 1);
  EXPECT_DOUBLE_EQ(s->factor, 0.5);
  s = ParseSlowNode("0:1");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(s->factor, 1.0);
  for (const char* none : {"", "none", " "}) {
    s = ParseSlowNode(none);
    ASSERT_TRUE(s.ok()) << none;
    EXPECT_FALSE(s->enabled) << none;
  }
}

TEST(ParseSlowNodeTest, RefusesBadTextInOneLine) {
  for (const char* bad : {"1", "1:", ":0.5", "-1:0.5", "a:0.5", "1:x", "1:0.5:2", "1:0", "1:-0.5",
                          "1:1.01", "1:inf", "1:nan"}) {
    absl::StatusOr<SlowNodeSpec> s = ParseSlowNode(bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_FALSE(absl::StrContains(s.status().message(), "\n")) << bad;
    EXPECT_TRUE(absl::StrContains(s.status().message(), "--slow_node")) << s.status();
  }
}

TEST(PlanDdpNodesTest, ConsecutiveRanksPerNode) {
  absl::StatusOr<NodePlan> p = PlanDdpNodes(4, 2, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->num_nodes(), 2);
  EXPECT_THAT(p->node_of, ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(p->members[1], ElementsAre(2, 3));
  EXPECT_THAT(p->roles, ElementsAre("worker", "worker"));
  EXPECT_EQ(p->slow_node, -1);
  EXPECT_EQ(p->Summary(), "nodes: node 0 = rank 0 + rank 1, node 1 = rank 2 + rank 3");
}

TEST(PlanDdpNodesTest, OneRankPerNodeByDefault) {
  absl::StatusOr<NodePlan> p = PlanDdpNodes(3, 1, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->node_of, ElementsAre(0, 1, 2));
}

TEST(PlanDdpNodesTest, SlowRankNamesItsNode) {
  absl::StatusOr<NodePlan> p = PlanDdpNodes(4, 2, {true, 3, 0.25});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->slow_node, 1);
  EXPECT_DOUBLE_EQ(p->slow_factor, 0.25);
  EXPECT_EQ(p->slow_label, "rank 3");
}

TEST(PlanDdpNodesTest, RefusesBadPlacements) {
  EXPECT_EQ(PlanDdpNodes(3, 2, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanDdpNodes(4, 0, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanDdpNodes(0, 1, {}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<NodePlan> p = PlanDdpNodes(4, 2, {true, 4, 0.5});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(p.status().message(), "no rank 4")) << p.status();
  p = PlanDdpNodes(3, 2, {});
  EXPECT_TRUE(absl::StrContains(p.status().message(), "does not divide the 3 ranks")) << p.status();
}

TEST(PlanPsNodesTest, PairsShardAndWorkerOnANode) {
  // Local ranks: shards 0..3, workers 4..7.
  absl::StatusOr<NodePlan> p = PlanPsNodes(PsLayout(4, 4, false), 2, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->num_nodes(), 4);
  EXPECT_THAT(p->node_of, ElementsAre(0, 1, 2, 3, 0, 1, 2, 3));
  EXPECT_THAT(p->roles, ElementsAre("master", "master", "master", "master"));
  EXPECT_EQ(p->Summary(),
            "nodes: node 0 = shard 0 + worker 0, node 1 = shard 1 + worker 1, "
            "node 2 = shard 2 + worker 2, node 3 = shard 3 + worker 3");
}

TEST(PlanPsNodesTest, OneProcessPerNodeInPlacementOrder) {
  // 1 shard, 2 workers: order shard 0, worker 0, worker 1.
  absl::StatusOr<NodePlan> p = PlanPsNodes(PsLayout(1, 2, false), 1, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->node_of, ElementsAre(0, 1, 2));
  EXPECT_THAT(p->roles, ElementsAre("master", "worker", "worker"));
}

TEST(PlanPsNodesTest, PairsThenTheRest) {
  // 1 shard, 3 workers, K=2: {shard 0, worker 0}, {worker 1, worker 2}.
  absl::StatusOr<NodePlan> p = PlanPsNodes(PsLayout(1, 3, false), 2, {true, 2, 0.5});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->node_of, ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(p->roles, ElementsAre("master", "worker"));
  EXPECT_EQ(p->slow_node, 1);
  EXPECT_EQ(p->slow_label, "worker 2");
  // 3 shards, 1 worker, K=2: {shard 0, worker 0}, {shard 1, shard 2}.
  p = PlanPsNodes(PsLayout(3, 1, false), 2, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->node_of, ElementsAre(0, 1, 1, 0));
  EXPECT_THAT(p->roles, ElementsAre("master", "master"));
}

TEST(PlanPsNodesTest, ColocatedPlacesOnlyWorkers) {
  absl::StatusOr<NodePlan> p = PlanPsNodes(PsLayout(2, 4, true), 2, {true, 1, 0.5});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->node_of, ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(p->roles, ElementsAre("master", "worker"));
  EXPECT_EQ(p->slow_node, 0);
  EXPECT_EQ(p->slow_label, "worker 1");
}

// Worker summers live in their workers: the nodes are the dedicated servers' and the
// workers', and only the servers' nodes are "master" (k = 0: none).
TEST(PlanPsNodesTest, WorkerSummersAddNoProcesses) {
  absl::StatusOr<NodePlan> p = PlanPsNodes(PsLayout(1, 3, false, true), 1, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->node_of, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(p->roles, ElementsAre("master", "worker", "worker", "worker"));
  p = PlanPsNodes(PsLayout(0, 2, false, true), 1, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->node_of, ElementsAre(0, 1));
  EXPECT_THAT(p->roles, ElementsAre("worker", "worker"));
}

TEST(PlanPsNodesTest, RefusesBadPlacements) {
  absl::StatusOr<NodePlan> p = PlanPsNodes(PsLayout(1, 2, false), 2, {});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(p.status().message(), "1 shards + 2 workers")) << p.status();
  p = PlanPsNodes(PsLayout(2, 2, false), 2, {true, 2, 0.5});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(p.status().message(), "no worker 2")) << p.status();
  EXPECT_EQ(PlanPsNodes(PsLayout(0, 2, false), 1, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringside
