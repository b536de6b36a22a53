#include "common/ps_layout.h"

#include <vector>

#include "gtest/gtest.h"

namespace ringside {
namespace {

TEST(PsLayoutTest, DedicatedShardsComeFirstThenTheWorkers) {
  const PsLayout layout(/*shards=*/2, /*workers=*/3, /*colocated=*/false);
  EXPECT_EQ(layout.shard_processes(), 2);
  EXPECT_EQ(layout.num_processes(), 5);
  EXPECT_TRUE(layout.IsShardProcess(0));
  EXPECT_TRUE(layout.IsShardProcess(1));
  EXPECT_FALSE(layout.IsShardProcess(2));
  EXPECT_FALSE(layout.IsShardProcess(-1));
  EXPECT_EQ(layout.WorkerOf(2), 0);
  EXPECT_EQ(layout.WorkerOf(4), 2);
  EXPECT_EQ(layout.RankOfWorker(1), 3);
  EXPECT_EQ(layout.RankHostingShard(1), 1);
  EXPECT_EQ(layout.ShardsHostedBy(1), std::vector<int>({1}));
  EXPECT_TRUE(layout.ShardsHostedBy(2).empty());
  EXPECT_FALSE(layout.WorkerHostsShards(0));
}

TEST(PsLayoutTest, ColocatedWorkerZeroHostsEveryShard) {
  const PsLayout layout(/*shards=*/3, /*workers=*/2, /*colocated=*/true);
  EXPECT_EQ(layout.shard_processes(), 0);
  EXPECT_EQ(layout.num_processes(), 2);
  EXPECT_FALSE(layout.IsShardProcess(0));
  EXPECT_EQ(layout.WorkerOf(0), 0);
  EXPECT_EQ(layout.WorkerOf(1), 1);
  EXPECT_EQ(layout.RankOfWorker(1), 1);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(layout.RankHostingShard(s), 0);
  EXPECT_EQ(layout.ShardsHostedBy(0), std::vector<int>({0, 1, 2}));
  EXPECT_TRUE(layout.ShardsHostedBy(1).empty());
  EXPECT_TRUE(layout.WorkerHostsShards(0));
  EXPECT_FALSE(layout.WorkerHostsShards(1));
}

TEST(PsLayoutTest, OfReadsTheRunConfig) {
  RunConfig c;
  c.set_ps_shards(4);
  c.set_world_size(2);
  c.set_ps_colocated(true);
  EXPECT_EQ(PsLayout::Of(c), PsLayout(4, 2, true));
  c.set_ps_colocated(false);
  EXPECT_NE(PsLayout::Of(c), PsLayout(4, 2, true));
}

}  // namespace
}  // namespace ringside
