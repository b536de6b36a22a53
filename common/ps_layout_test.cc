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
  EXPECT_TRUE(layout.ShardsHostedBy(layout.RankOfWorker(0)).empty());
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
  EXPECT_FALSE(layout.ShardsHostedBy(layout.RankOfWorker(0)).empty());
  EXPECT_TRUE(layout.ShardsHostedBy(layout.RankOfWorker(1)).empty());
}

TEST(PsLayoutTest, WorkerSummersLiveInTheirWorkers) {
  const PsLayout layout(/*shards=*/1, /*workers=*/3, /*colocated=*/false, /*worker_summers=*/true);
  EXPECT_EQ(layout.shards(), 4);
  EXPECT_EQ(layout.dedicated_shards(), 1);
  EXPECT_EQ(layout.shard_processes(), 1);
  EXPECT_EQ(layout.num_processes(), 4);
  EXPECT_EQ(layout.RankHostingShard(0), 0);
  EXPECT_EQ(layout.RankHostingShard(1), 1);  // Worker 0's summer.
  EXPECT_EQ(layout.RankHostingShard(3), 3);  // Worker 2's.
  EXPECT_EQ(layout.ShardsHostedBy(0), std::vector<int>({0}));
  EXPECT_EQ(layout.ShardsHostedBy(2), std::vector<int>({2}));
  for (int w = 0; w < 3; ++w) EXPECT_EQ(layout.ShardsHostedBy(layout.RankOfWorker(w)), std::vector<int>({1 + w}));
  // k = 0: only the workers' summers.
  const PsLayout none(0, 2, false, true);
  EXPECT_EQ(none.shards(), 2);
  EXPECT_EQ(none.num_processes(), 2);
  EXPECT_EQ(none.ShardsHostedBy(0), std::vector<int>({0}));
  EXPECT_EQ(none.ShardsHostedBy(1), std::vector<int>({1}));
}

// BytePS's optimum (OSDI'20, 4.1): 2(n-1) per server, n-k per worker's summer, out of
// n^2 + kn - 2k; without worker summers, all equal.
TEST(PsLayoutTest, ShardWeightsAreBytePsOptimum) {
  EXPECT_EQ(PsLayout(3, 2, false).ShardWeights(), std::vector<int64_t>({1, 1, 1}));
  // n = 4, k = 2: servers 6, summers 2 (of 20): 0.3 M and 0.1 M.
  EXPECT_EQ(PsLayout(2, 4, false, true).ShardWeights(), std::vector<int64_t>({6, 6, 2, 2, 2, 2}));
  // k = 0: every worker's summer holds M / n.
  EXPECT_EQ(PsLayout(0, 4, false, true).ShardWeights(), std::vector<int64_t>({4, 4, 4, 4}));
  // One worker, no server: it sums everything itself.
  EXPECT_EQ(PsLayout(0, 1, false, true).ShardWeights(), std::vector<int64_t>({1}));
  // The weights add up to n^2 + kn - 2k at every k < n.
  for (int n = 2; n <= 8; ++n) {
    for (int k = 0; k < n; ++k) {
      int64_t sum = 0;
      for (int64_t w : PsLayout(k, n, false, true).ShardWeights()) sum += w;
      EXPECT_EQ(sum, n * n + k * n - 2 * k) << "n " << n << " k " << k;
    }
  }
}

TEST(PsLayoutTest, OfReadsTheRunConfig) {
  RunConfig c;
  c.set_ps_shards(4);
  c.set_world_size(2);
  c.set_ps_colocated(true);
  EXPECT_EQ(PsLayout::Of(c), PsLayout(4, 2, true));
  c.set_ps_colocated(false);
  EXPECT_NE(PsLayout::Of(c), PsLayout(4, 2, true));
  c.set_ps_shards(1);
  c.set_ps_worker_summers(true);
  EXPECT_EQ(PsLayout::Of(c), PsLayout(1, 2, false, true));
  EXPECT_EQ(PsLayout::Of(c).shards(), 3);
}

}  // namespace
}  // namespace ringside
