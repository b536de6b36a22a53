// OrderedSum alone (the worker-id order, parked pushes, skipped workers, the mean),
// then the shard's BSP determinism through it.
#include "ps_server/ordered_sum.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/ops_factory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard.h"
#include "ps_server/shard_test_util.h"

namespace ringside {
namespace shard_test {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------
// Determinism (BSP): the sum is g_0 + g_1 + ... in worker-id order, whatever the order of
// arrival, so the result is the same bits every time.

// Worker w's gradient, chosen so that float addition order shows: 3e7 + 1 loses the 1.
std::vector<float> OrderSensitiveGradient(int64_t size, int worker, int64_t step) {
  static constexpr float kBase[] = {3e7f, 1.0f, -3e7f, 0.5f, 7e6f, -0.25f, -7e6f, 0.125f};
  std::vector<float> g(size);
  for (int64_t i = 0; i < size; ++i) {
    g[i] = kBase[worker % 8] * (1.0f + 0.01f * static_cast<float>(i)) + 0.001f * static_cast<float>(step);
  }
  return g;
}

// ---------------------------------------------------------------------------------
// OrderedSum alone.

// Pushes `g` of worker w into `sum` as ShardChunk does (Advance, Add, Advance), in
// blocks of 2 floats (a scratch buffer the sum may not keep).
void PushInBlocks(OrderedSum& sum, int w, const std::vector<float>& g,
                  const std::vector<bool>& counts) {
  const auto counting = [&counts](int u) { return static_cast<bool>(counts[u]); };
  sum.Advance(counting);
  sum.Add(w, [&g](OrderedSum::Block block) {
    float scratch[2];
    const int64_t size = static_cast<int64_t>(g.size());
    for (int64_t at = 0; at < size; at += 2) {
      const int64_t len = std::min<int64_t>(2, size - at);
      std::copy(g.begin() + at, g.begin() + at + len, scratch);
      block(at, scratch, len);
    }
  });
  sum.Advance(counting);
}

std::unique_ptr<Ops> CpuOps() {
  absl::StatusOr<std::unique_ptr<Ops>> ops = NewOps("cpu", 0, 0);
  EXPECT_TRUE(ops.ok()) << ops.status();
  return ops.ok() ? *std::move(ops) : nullptr;
}

TEST(OrderedSumTest, AnyArrivalOrderGivesTheLeftToRightSumBitForBit) {
  constexpr int kWorkers = 4;
  constexpr int64_t kSize = 5;
  std::unique_ptr<Ops> ops = CpuOps();
  ASSERT_NE(ops, nullptr);
  std::vector<std::vector<float>> g(kWorkers);
  for (int w = 0; w < kWorkers; ++w) g[w] = OrderSensitiveGradient(kSize, w, 0);
  std::vector<float> want(kSize);
  for (int64_t i = 0; i < kSize; ++i) {
    float s = g[0][i];
    for (int w = 1; w < kWorkers; ++w) s += g[w][i];
    want[i] = s;
  }
  const std::vector<bool> all(kWorkers, true);
  for (const std::vector<int>& order :
       {std::vector<int>{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}, {1, 3, 0, 2}}) {
    OrderedSum sum(kWorkers, kSize, ops.get());
    for (size_t i = 0; i < order.size(); ++i) {
      EXPECT_FALSE(sum.complete());
      PushInBlocks(sum, order[i], g[order[i]], all);
    }
    ASSERT_TRUE(sum.complete());
    EXPECT_EQ(sum.contributors(), kWorkers);
    const float* mean = sum.TakeMean();  // All contributed: the sum itself.
    EXPECT_EQ(0, std::memcmp(mean, want.data(), kSize * sizeof(float)));
  }
}

TEST(OrderedSumTest, AParkedPushWaitsForTheGapToClose) {
  std::unique_ptr<Ops> ops = CpuOps();
  ASSERT_NE(ops, nullptr);
  OrderedSum sum(3, 2, ops.get());
  const std::vector<bool> all(3, true);
  PushInBlocks(sum, 2, {1.0f, 2.0f}, all);
  PushInBlocks(sum, 1, {3.0f, 4.0f}, all);
  EXPECT_FALSE(sum.complete());  // Worker 0 is missing: both are parked.
  EXPECT_EQ(sum.contributors(), 2);
  PushInBlocks(sum, 0, {5.0f, 6.0f}, all);
  ASSERT_TRUE(sum.complete());
  const float* mean = sum.TakeMean();
  EXPECT_EQ(mean[0], 9.0f);
  EXPECT_EQ(mean[1], 12.0f);
  // The next step's sum starts afresh.
  PushInBlocks(sum, 0, {1.0f, 1.0f}, all);
  EXPECT_FALSE(sum.complete());
  EXPECT_EQ(sum.contributors(), 1);
}

TEST(OrderedSumTest, WorkersThatDoNotCountAreSkippedAndTheMeanIsOverTheContributors) {
  std::unique_ptr<Ops> ops = CpuOps();
  ASSERT_NE(ops, nullptr);
  OrderedSum sum(3, 2, ops.get());
  const std::vector<bool> counts = {true, false, true};  // Worker 1 was lost.
  PushInBlocks(sum, 2, {3.0f, 6.0f}, counts);
  EXPECT_FALSE(sum.complete());
  PushInBlocks(sum, 0, {1.0f, 2.0f}, counts);
  ASSERT_TRUE(sum.complete());
  // Workers scaled by 1/3; two contributed: the mean is the sum times 3/2.
  const float* mean = sum.TakeMean();
  EXPECT_FLOAT_EQ(mean[0], 6.0f);
  EXPECT_FLOAT_EQ(mean[1], 12.0f);
}

// ---------------------------------------------------------------------------------
// Through the shard.

TEST(ShardDeterminismTest, BspSumsInWorkerIdOrderWhateverTheArrivalOrder) {
  for (int workers : {3, 4, 8}) {
    // The float left fold in worker-id order, stepped with lr 1 (no momentum).
    std::vector<float> want = InitialParams(kSliceSize);
    for (int64_t i = 0; i < kSliceSize; ++i) {
      float sum = 0.0f;
      for (int w = 0; w < workers; ++w) sum += OrderSensitiveGradient(kSliceSize, w, 0)[i];
      want[i] -= sum;
    }
    std::vector<int> order(workers);
    for (int w = 0; w < workers; ++w) order[w] = w;
    // Several arrival orders (each chunk in a different one): identity, reversed,
    // rotations and swaps.
    for (int trial = 0; trial < 12; ++trial) {
      std::unique_ptr<Shard> shard = NewShard(Options(workers, Bsp(), Hyper(1.0f)));
      ASSERT_NE(shard, nullptr);
      Initialise(*shard);
      for (int64_t k = kNumChunks - 1; k >= 0; --k) {
        std::vector<int> arrival = order;
        if ((trial + k) % 2 == 1) std::reverse(arrival.begin(), arrival.end());
        std::rotate(arrival.begin(), arrival.begin() + (trial + k) % workers, arrival.end());
        if (trial % 3 == 2) std::swap(arrival[0], arrival[workers - 1]);
        for (int w : arrival) {
          ASSERT_TRUE(PushChunk(*shard, w, 0, ps::GRADIENTS, k,
                                OrderSensitiveGradient(kSliceSize, w, 0)).ok());
        }
      }
      absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, workers - 1, 1);
      ASSERT_TRUE(got.ok()) << got.status();
      for (int64_t i = 0; i < kSliceSize; ++i) {
        // Bit for bit (as floats compare: none is NaN).
        EXPECT_EQ((*got)[i], want[i]) << workers << " workers, trial " << trial << ", element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace shard_test
}  // namespace ringside
