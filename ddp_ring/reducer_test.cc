#include "ddp_ring/reducer.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/common.h"
#include "common/test_util.h"
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/process_group_test_util.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

TEST(ComputeBucketsTest, ReverseLayerOrderWithCaps) {
  // Four layers of 100, 50, 1000 and 10 floats; caps in bytes: first 240 floats' worth
  // ... expressed as 4 * floats.
  const std::vector<ParamRange> layers = {{0, 100}, {100, 50}, {150, 1000}, {1150, 10}};
  // First bucket cap 100 floats: {1150,10} fits, {150,1000} does not -> next bucket.
  // Next cap 1100 floats: {150,1000} + {100,50} = 1050 fits, + {0,100} = 1150 does not.
  const std::vector<Bucket> b = ComputeBuckets(layers, 100 * 4, 1100 * 4);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].offset, 1150);
  EXPECT_EQ(b[0].size, 10);
  EXPECT_EQ(b[1].offset, 100);
  EXPECT_EQ(b[1].size, 1050);
  EXPECT_EQ(b[2].offset, 0);
  EXPECT_EQ(b[2].size, 100);
  // A layer larger than the cap gets a bucket of its own; one huge cap: one bucket.
  EXPECT_EQ(ComputeBuckets(layers, 4, 4).size(), 4u);
  const std::vector<Bucket> one = ComputeBuckets(layers, 1 << 30, 1 << 30);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].offset, 0);
  EXPECT_EQ(one[0].size, 1160);
}

// Deterministic batch for a rank: `n` samples of `dim` features.
struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};
Batch MakeBatch(int dim, int classes, int n, uint64_t seed) {
  Rng rng(seed);
  Batch b;
  for (int i = 0; i < n * dim; ++i) b.x.push_back(rng.Normal());
  for (int i = 0; i < n; ++i) b.y.push_back(static_cast<int32_t>(rng.Below(classes)));
  return b;
}

struct Setup {
  const char* spec;
  int dim, classes, per_rank, steps;
  int64_t first_bucket_bytes, bucket_cap_bytes;
};
// Small and fast: equivalence.
constexpr Setup kSmall = {"mlp:24-32-16-5", 24, 5, 6, 8, 16 * 5 * 4, 600 * 4};
// Backward long enough (milliseconds) for buckets to start while it runs: overlap.
constexpr Setup kLarge = {"mlp:256-1024-1024-1024-10", 256, 10, 64, 6, 1 << 20, 4 << 20};
const SgdHyper kHyper{0.1f, 0.9f, 1e-4f, false};

// One rank: kSteps steps of DDP on its own batches; returns final parameters.
// Records, per step, whether a bucket's all-reduce started before backward ended.
std::vector<float> RunRank(const Setup& setup, Store* store, int rank, int world, bool overlap,
                           std::vector<bool>* started_early) {
  const char* kSpec = setup.spec;
  const int kDim = setup.dim, kClasses = setup.classes, kPerRank = setup.per_rank,
            kSteps = setup.steps;
  ProcessGroupOptions po;
  po.rank = rank;
  po.world_size = world;
  po.timeout = absl::Seconds(30);
  auto group = NewGlooProcessGroup(store, po);
  EXPECT_TRUE(group.ok()) << group.status();
  if (!group.ok()) return {};
  auto ops = NewCpuOps(1);
  auto model = Model::Create(kSpec, {kDim, 1, 1}, kClasses, ops.get());
  EXPECT_TRUE(model.ok());
  // Different seeds per rank: the broadcast must make them equal.
  EXPECT_TRUE((*model)->InitParams(100 + rank).ok());
  ReducerOptions ro;
  ro.first_bucket_bytes = setup.first_bucket_bytes;  // Several buckets.
  ro.bucket_cap_bytes = setup.bucket_cap_bytes;
  ro.overlap = overlap;
  auto reducer = Reducer::Create(group->get(), model->get(), ops.get(), kHyper, ro);
  EXPECT_TRUE(reducer.ok());
  EXPECT_GE((*reducer)->buckets().size(), 3u);
  EXPECT_TRUE((*reducer)->Start(0).ok());  // Broadcasts rank 0's parameters.
  const StepHooks hooks = (*reducer)->hooks();
  const std::string trace_path =
      std::string(std::getenv("TEST_TMPDIR")) + "/trace" + std::to_string(rank) +
      (overlap ? "o" : "n") + ".json";
  auto trace = TraceWriter::Open(trace_path, rank, "rank");
  EXPECT_TRUE(trace.ok());
  std::vector<int64_t> backward_end;
  for (int step = 0; step < kSteps; ++step) {
    const Batch b = MakeBatch(kDim, kClasses, kPerRank, 1000 * step + rank);
    EXPECT_TRUE((*model)->Forward(b.x.data(), b.y.data(), kPerRank).ok());
    EXPECT_TRUE((*model)->Backward(1.0f / (kPerRank * world), hooks.backward,
                                   hooks.accumulate_gradients).ok());
    backward_end.push_back(NowMicros());
    StepMetrics m;
    EXPECT_TRUE((*reducer)->FinishStep(HookTimes(), &m, trace->get()).ok());
    // The measured bytes: per bucket, the traffic of the algorithm `auto` ran for it
    // (recursive doubling for these small buckets: lg N x bucket bytes per rank at a
    // power of two, not the ring's 2 (N-1)/N).
    CollectiveBytes expected;
    for (const Bucket& bucket : (*reducer)->buckets()) {
      expected += testing_util::ExpectedAllReduceBytes(
          ResolveAllReduceAlgorithm(AllReduceAlgorithm::kAuto, world, bucket.size * 4), world,
          rank, bucket.size);
    }
    EXPECT_EQ(m.bytes_sent(), expected.sent);
    EXPECT_EQ(m.bytes_received(), expected.received);
  }
  EXPECT_TRUE((*reducer)->Finish().ok());  // The final barrier.
  EXPECT_TRUE((*trace)->Close().ok());
  // Read the bucket spans back from the trace: did one start before backward ended?
  absl::StatusOr<trace::TraceEventBatch> events = ReadTraceFile(trace_path);
  EXPECT_TRUE(events.ok()) << events.status();
  std::vector<int64_t> starts;  // Earliest bucket start per step, in order.
  int spans = 0;
  const int buckets = static_cast<int>((*reducer)->buckets().size());
  int64_t earliest = INT64_MAX;
  const trace::TraceEventBatch batch = events.ok() ? *events : trace::TraceEventBatch();
  for (const trace::TraceEvent& e : batch.events()) {
    if (!absl::StartsWith(e.name(), "all-reduce bucket")) continue;
    earliest = std::min<int64_t>(earliest, static_cast<int64_t>(e.ts()));
    if (++spans % buckets == 0) {
      starts.push_back(earliest);
      earliest = INT64_MAX;
    }
  }
  EXPECT_EQ(static_cast<int>(starts.size()), kSteps);
  for (size_t s = 0; s < starts.size() && s < backward_end.size(); ++s) {
    started_early->push_back(starts[s] < backward_end[s]);
  }
  return std::vector<float>((*model)->params(), (*model)->params() + (*model)->num_params());
}

// Single process: the same samples as one batch of world * kPerRank per step.
std::vector<float> RunReference(const Setup& setup, int world) {
  const char* kSpec = setup.spec;
  const int kDim = setup.dim, kClasses = setup.classes, kPerRank = setup.per_rank,
            kSteps = setup.steps;
  auto ops = NewCpuOps(1);
  auto model = Model::Create(kSpec, {kDim, 1, 1}, kClasses, ops.get());
  EXPECT_TRUE((*model)->InitParams(100).ok());  // Rank 0's initialisation.
  auto sgd = Sgd::Create(kHyper, (*model)->num_params(), ops.get());
  for (int step = 0; step < kSteps; ++step) {
    Batch all;
    for (int r = 0; r < world; ++r) {
      const Batch b = MakeBatch(kDim, kClasses, kPerRank, 1000 * step + r);
      all.x.insert(all.x.end(), b.x.begin(), b.x.end());
      all.y.insert(all.y.end(), b.y.begin(), b.y.end());
    }
    EXPECT_TRUE((*model)->Forward(all.x.data(), all.y.data(), world * kPerRank).ok());
    EXPECT_TRUE((*model)->Backward(1.0f / (kPerRank * world), nullptr).ok());
    sgd->Step((*model)->params(), (*model)->grads());
  }
  return std::vector<float>((*model)->params(), (*model)->params() + (*model)->num_params());
}

class ReducerEquivalenceTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ReducerEquivalenceTest, RanksAsThreadsMatchOneBigBatch) {
  const auto [world, overlap] = GetParam();
  std::unique_ptr<Store> base = NewInMemoryStore();
  std::vector<std::vector<float>> params(world);
  std::vector<std::vector<bool>> early(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back(
        [&, r] { params[r] = RunRank(kSmall, base.get(), r, world, overlap, &early[r]); });
  }
  for (auto& t : threads) t.join();
  const std::vector<float> reference = RunReference(kSmall, world);
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(params[r].size(), reference.size()) << "rank " << r;
    EXPECT_LT(MaxRelativeDifference(params[r], reference), 1e-5) << "rank " << r;
    // Every rank ends with identical parameters.
    EXPECT_EQ(params[r], params[0]) << "rank " << r;
  }
  // Without overlap no all-reduce may start before backward ends.
  if (!overlap) {
    for (int r = 0; r < world; ++r) {
      for (bool e : early[r]) EXPECT_FALSE(e) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, ReducerEquivalenceTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Bool()));

// Overlap is real: on a model with several buckets and a backward of milliseconds, the
// recorded timeline (trace spans, start = when the process group began executing the
// all-reduce) shows buckets starting before backward ended; with overlap off, never.
TEST(ReducerOverlapTest, BucketsStartDuringBackward) {
  for (bool overlap : {true, false}) {
    std::unique_ptr<Store> base = NewInMemoryStore();
    std::unique_ptr<Store> store = NewPrefixStore(overlap ? "on" : "off", base.get());
    std::vector<std::vector<bool>> early(2);
    std::vector<std::vector<float>> params(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back(
          [&, r] { params[r] = RunRank(kLarge, store.get(), r, 2, overlap, &early[r]); });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(params[0], params[1]);
    for (int r = 0; r < 2; ++r) {
      int count = 0;
      for (bool e : early[r]) count += e;
      std::cerr << "overlap " << overlap << ", rank " << r << ": " << count << " of "
                << early[r].size() << " steps had an all-reduce start during backward\n";
      if (overlap) {
        EXPECT_GE(count, 1) << "rank " << r << ": no all-reduce started during backward";
      } else {
        EXPECT_EQ(count, 0) << "rank " << r;
      }
    }
  }
}

// Who was late: a rank that starts every backward `kLateMs` later than the other (a
// test-only delay standing in for a slower node) waits about that much less for the
// all-reduces after its backward, and finishes backward later; allreduce_wait_ms is
// the exposed part of comm_ms.
TEST(ReducerLateRankTest, TheLateRankWaitsLeast) {
  constexpr int kWorld = 2, kLate = 1, kSteps = 6;
  constexpr double kLateMs = 40;
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<std::vector<StepMetrics>> records(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      ProcessGroupOptions po;
      po.rank = r;
      po.world_size = kWorld;
      po.timeout = absl::Seconds(30);
      auto group = NewGlooProcessGroup(store.get(), po);
      ASSERT_TRUE(group.ok()) << group.status();
      auto ops = NewCpuOps(1);
      auto model = Model::Create(kSmall.spec, {kSmall.dim, 1, 1}, kSmall.classes, ops.get());
      ASSERT_TRUE(model.ok());
      ReducerOptions ro;
      ro.first_bucket_bytes = kSmall.first_bucket_bytes;
      ro.bucket_cap_bytes = kSmall.bucket_cap_bytes;
      auto reducer = Reducer::Create(group->get(), model->get(), ops.get(), kHyper, ro);
      ASSERT_TRUE(reducer.ok());
      ASSERT_TRUE((*reducer)->Start(0).ok());
      const StepHooks hooks = (*reducer)->hooks();
      for (int step = 0; step < kSteps; ++step) {
        const Batch b = MakeBatch(kSmall.dim, kSmall.classes, kSmall.per_rank, 1000 * step + r);
        if (r == kLate) absl::SleepFor(absl::Milliseconds(kLateMs));
        ASSERT_TRUE((*model)->Forward(b.x.data(), b.y.data(), kSmall.per_rank).ok());
        const int64_t before_backward = NowMicros();
        ASSERT_TRUE((*model)->Backward(1.0f / (kSmall.per_rank * kWorld), hooks.backward,
                                       hooks.accumulate_gradients).ok());
        StepMetrics m;
        ASSERT_TRUE((*reducer)->FinishStep(HookTimes(), &m, nullptr).ok());
        EXPECT_GE(m.first_bucket_us(), before_backward);
        EXPECT_GE(m.backward_end_us(), m.first_bucket_us());
        EXPECT_GE(m.allreduce_wait_ms(), 0);
        EXPECT_DOUBLE_EQ(m.comm_ms(), m.allreduce_wait_ms());  // No launch time given.
        records[r].push_back(m);
      }
      ASSERT_TRUE((*reducer)->Finish().ok());
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(records[0].size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(records[kLate].size(), static_cast<size_t>(kSteps));
  for (int step = 1; step < kSteps; ++step) {  // Step 0 also waits for the start.
    const StepMetrics& early = records[0][step];
    const StepMetrics& late = records[kLate][step];
    EXPECT_LT(late.allreduce_wait_ms(), early.allreduce_wait_ms()) << "step " << step;
    EXPECT_GT(early.allreduce_wait_ms() - late.allreduce_wait_ms(), 0.5 * kLateMs)
        << "step " << step;
    EXPECT_GT(late.backward_end_us() - early.backward_end_us(), 500 * kLateMs) << "step " << step;
  }
}

}  // namespace
}  // namespace ringside
