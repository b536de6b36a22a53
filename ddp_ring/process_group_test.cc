// The Gloo process group with its ranks as threads of one process, rendezvousing
// through an in-memory store. Every collective is checked against its closed form.
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/process_group_test_util.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ddp_ring/store.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using testing_util::AlgorithmName;
using testing_util::CountMismatches;
using testing_util::Mismatches;
using testing_util::Options;
using testing_util::SumOfValues;
using testing_util::Value;



// Compares data[i] with expected(i) for all i (relative tolerance `tol`, 0 = exact);
// reports the number of mismatches and the first one, not millions of lines.
template <typename Expected>
void ExpectAll(const float* data, int64_t n, Expected expected, float tol,
               const std::string& what) {
  const Mismatches m = CountMismatches(data, n, expected, tol);
  const int64_t bad = m.count;
  const int64_t first = m.first;
  EXPECT_EQ(bad, 0) << what << ": first mismatch at " << first << ": got "
                    << (first >= 0 ? data[first] : 0) << ", want "
                    << (first >= 0 ? expected(first) : 0);
}


// A unique store prefix per group, as the contract asks.
std::string NextPrefix() {
  static std::atomic<int> counter{0};
  return absl::StrCat("group", counter++);
}


// Runs body(pg) on `world` threads, each rank with its own Gloo group over one
// in-memory store (under a fresh prefix).
void RunRanks(int world, AllReduceAlgorithm algorithm, absl::Duration timeout,
              const std::function<void(ProcessGroup&)>& body) {
  std::unique_ptr<Store> base = NewInMemoryStore();
  std::unique_ptr<Store> store = NewPrefixStore(NextPrefix(), base.get());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      absl::StatusOr<std::unique_ptr<ProcessGroup>> pg =
          NewGlooProcessGroup(store.get(), Options(rank, world, algorithm, timeout));
      ASSERT_TRUE(pg.ok()) << pg.status();
      EXPECT_EQ((*pg)->rank(), rank);
      EXPECT_EQ((*pg)->world_size(), world);
      EXPECT_EQ((*pg)->backend(), "gloo");
      body(**pg);
    });
  }
  for (std::thread& t : threads) t.join();
}

constexpr absl::Duration kTimeout = absl::Seconds(30);

// A thread joined on scope exit (also when an ASSERT returns early).
class JoiningThread {
 public:
  template <typename F>
  explicit JoiningThread(F&& f) : thread_(std::forward<F>(f)) {}
  ~JoiningThread() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
};

// Notifies on scope exit, so that a failed ASSERT in one rank cannot leave another
// rank waiting forever.
class NotifyOnExit {
 public:
  explicit NotifyOnExit(absl::Notification* notification) : notification_(notification) {}
  ~NotifyOnExit() {
    if (!notification_->HasBeenNotified()) notification_->Notify();
  }

 private:
  absl::Notification* notification_;
};

// ---------------------------------------------------------------------------------
// AllReduce over world sizes x sizes x algorithms.

using AllReduceParam = std::tuple<int, int64_t, AllReduceAlgorithm>;

std::string AllReduceParamName(const testing::TestParamInfo<AllReduceParam>& info) {
  return absl::StrCat("World", std::get<0>(info.param), "N", std::get<1>(info.param),
                      AlgorithmName(std::get<2>(info.param)));
}

// The algorithms every all-reduce test runs.
const auto kAllReduceAlgorithms =
    testing::Values(AllReduceAlgorithm::kRing, AllReduceAlgorithm::kHalvingDoubling,
                    AllReduceAlgorithm::kRecursiveDoubling, AllReduceAlgorithm::kAuto);

class AllReduceTest : public testing::TestWithParam<AllReduceParam> {};

TEST_P(AllReduceTest, SumAndAverageMatchClosedForm) {
  const auto [world, n, algorithm] = GetParam();
  RunRanks(world, algorithm, kTimeout, [&, world = world, n = n](ProcessGroup& pg) {
    const int r = pg.rank();
    std::vector<float> data(n);
    for (int64_t i = 0; i < n; ++i) data[i] = Value(r, i);
    std::shared_ptr<Work> work = pg.AllReduce(data.data(), n, ReduceOp::kSum);
    ASSERT_TRUE(work->Wait().ok()) << work->Wait();
    EXPECT_TRUE(work->IsCompleted());
    EXPECT_TRUE(work->Wait().ok());  // Idempotent.
    ExpectAll(
        data.data(), n, [&](int64_t i) { return SumOfValues(world, i); }, 0,
        absl::StrCat("sum on rank ", r));

    for (int64_t i = 0; i < n; ++i) data[i] = Value(r, i);
    work = pg.AllReduce(data.data(), n, ReduceOp::kAverage);
    ASSERT_TRUE(work->Wait().ok()) << work->Wait();
    ExpectAll(
        data.data(), n, [&](int64_t i) { return SumOfValues(world, i) / world; }, 1e-6f,
        absl::StrCat("average on rank ", r));
  });
}

INSTANTIATE_TEST_SUITE_P(
    Gloo, AllReduceTest,
    testing::Combine(testing::Values(1, 2, 3, 4), testing::Values(0, 1, 7, 1000003),
                     kAllReduceAlgorithms),
    AllReduceParamName);

// ---------------------------------------------------------------------------------
// Bytes: what every collective reports having sent and received, per algorithm, against
// the algorithm's known traffic (testing_util::ExpectedAllReduceBytes), and the group's
// running total against the sum of its operations.

class AllReduceBytesTest : public testing::TestWithParam<AllReduceParam> {};

TEST_P(AllReduceBytesTest, EachRankReportsTheAlgorithmsTraffic) {
  const auto [world, n, algorithm] = GetParam();
  std::vector<CollectiveBytes> reported(world);
  RunRanks(world, algorithm, kTimeout, [&, world = world, n = n, algorithm = algorithm](ProcessGroup& pg) {
    const int r = pg.rank();
    std::vector<float> data(n, 1.0f);
    const CollectiveBytes before = pg.total_bytes();
    std::shared_ptr<Work> work = pg.AllReduce(data.data(), n, ReduceOp::kSum);
    ASSERT_TRUE(work->Wait().ok()) << work->Wait();
    const CollectiveBytes bytes = work->bytes();
    reported[r] = bytes;
    EXPECT_EQ(pg.total_bytes() - before, bytes) << "rank " << r;
    const AllReduceAlgorithm ran = ResolveAllReduceAlgorithm(
        algorithm, world, n * static_cast<int64_t>(sizeof(float)));
    const CollectiveBytes want = testing_util::ExpectedAllReduceBytes(ran, world, r, n);
    const int p2 = testing_util::PowerOfTwoRanks(world);
    if (ran == AllReduceAlgorithm::kHalvingDoubling && r < p2 && n % p2 != 0) {
      // Uneven halvings: each rank receives what it sends, within one float per halving
      // of the even split.
      EXPECT_EQ(bytes.sent, bytes.received) << "rank " << r;
      EXPECT_NEAR(bytes.sent, want.sent, 2 * 4 * world) << "rank " << r;
    } else {
      EXPECT_EQ(bytes.sent, want.sent) << "rank " << r << " ran " << AllReduceAlgorithmName(ran);
      EXPECT_EQ(bytes.received, want.received) << "rank " << r << " ran " << AllReduceAlgorithmName(ran);
    }
  });
  // Whatever one rank sends, another receives.
  int64_t sent = 0, received = 0;
  for (const CollectiveBytes& b : reported) {
    sent += b.sent;
    received += b.received;
  }
  EXPECT_EQ(sent, received);
}

INSTANTIATE_TEST_SUITE_P(
    Gloo, AllReduceBytesTest,
    testing::Combine(testing::Values(1, 2, 3, 4),
                     testing::Values(0, 1, 7, 4096, (int64_t{4} << 20) / 4 + 3),
                     kAllReduceAlgorithms),
    AllReduceParamName);

// The other collectives: broadcast (binomial tree: a rank receives the vector once,
// the root never, and sends it once per child), all-gather and reduce-scatter ((w - 1)
// x n each way), barrier (no payload).
class CollectiveBytesTest : public testing::TestWithParam<int> {};

TEST_P(CollectiveBytesTest, BroadcastAllGatherReduceScatterBarrier) {
  const int world = GetParam();
  constexpr int64_t kN = 1001;
  constexpr int64_t kBytes = kN * 4;
  RunRanks(world, AllReduceAlgorithm::kRing, kTimeout, [&](ProcessGroup& pg) {
    const int r = pg.rank();
    const CollectiveBytes start = pg.total_bytes();
    CollectiveBytes sum;
    for (int root : {0, world - 1}) {
      std::vector<float> data(kN, 1.0f);
      std::shared_ptr<Work> work = pg.Broadcast(data.data(), kN, root);
      ASSERT_TRUE(work->Wait().ok());
      const int v = (r - root + world) % world;
      int children = 0;
      for (int mask = 1; mask < world; mask *= 2) children += v < mask && v + mask < world;
      EXPECT_EQ(work->bytes(), (CollectiveBytes{children * kBytes, v > 0 ? kBytes : 0}))
          << "rank " << r << " root " << root;
      sum += work->bytes();
    }
    std::vector<float> in(kN * world, 1.0f), out(kN * world);
    std::shared_ptr<Work> work = pg.AllGather(in.data(), kN, out.data());
    ASSERT_TRUE(work->Wait().ok());
    const CollectiveBytes each = {(world - 1) * kBytes, (world - 1) * kBytes};
    EXPECT_EQ(work->bytes(), each) << "all-gather, rank " << r;
    sum += work->bytes();
    work = pg.ReduceScatter(in.data(), out.data(), kN, ReduceOp::kSum);
    ASSERT_TRUE(work->Wait().ok());
    EXPECT_EQ(work->bytes(), each) << "reduce-scatter, rank " << r;
    sum += work->bytes();
    work = pg.Barrier();
    ASSERT_TRUE(work->Wait().ok());
    EXPECT_EQ(work->bytes(), CollectiveBytes{}) << "barrier, rank " << r;
    EXPECT_EQ(pg.total_bytes() - start, sum) << "rank " << r;
  });
}

INSTANTIATE_TEST_SUITE_P(Gloo, CollectiveBytesTest, testing::Values(1, 2, 3, 4));

// Every rank must end with the same bits, not merely close values: DDP replicas that
// drift apart by rounding are no longer replicas. Inexact inputs make the order of the
// additions visible.
class BitIdenticalTest
    : public testing::TestWithParam<std::tuple<int, AllReduceAlgorithm>> {};

TEST_P(BitIdenticalTest, EveryRankHoldsTheSameBits) {
  const auto [world, algorithm] = GetParam();
  const int64_t n = 300007;  // Several of recursive doubling's 1 MiB pieces.
  std::vector<std::vector<float>> results(world);
  RunRanks(world, algorithm, kTimeout, [&](ProcessGroup& pg) {
    std::vector<float> data(n);
    for (int64_t i = 0; i < n; ++i) {
      data[i] = 0.1f * static_cast<float>(pg.rank() + 1) + 1e-3f * static_cast<float>(i % 97);
    }
    std::shared_ptr<Work> work = pg.AllReduce(data.data(), n, ReduceOp::kSum);
    ASSERT_TRUE(work->Wait().ok()) << work->Wait();
    results[pg.rank()] = std::move(data);
  });
  for (int r = 1; r < world; ++r) {
    ASSERT_EQ(results[r].size(), results[0].size());
    EXPECT_EQ(std::memcmp(results[r].data(), results[0].data(), n * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0";
  }
  for (int64_t i = 0; i < n; i += 1009) {
    float expected = 0;
    for (int r = 0; r < world; ++r) {
      expected += 0.1f * static_cast<float>(r + 1) + 1e-3f * static_cast<float>(i % 97);
    }
    EXPECT_NEAR(results[0][i], expected, 1e-5f) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Gloo, BitIdenticalTest,
    testing::Combine(testing::Values(2, 3, 4, 5),
                     testing::Values(AllReduceAlgorithm::kRing,
                                     AllReduceAlgorithm::kRecursiveDoubling)),
    [](const testing::TestParamInfo<std::tuple<int, AllReduceAlgorithm>>& info) {
      return absl::StrCat("World", std::get<0>(info.param),
                          AlgorithmName(std::get<1>(info.param)));
    });

TEST(AllReduceAlgorithmTest, NamesRoundTripAndAutoResolvesByWorldSize) {
  for (AllReduceAlgorithm a :
       {AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kRing,
        AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kRecursiveDoubling}) {
    absl::StatusOr<AllReduceAlgorithm> parsed = ParseAllReduceAlgorithm(AllReduceAlgorithmName(a));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, a);
  }
  absl::StatusOr<AllReduceAlgorithm> bad = ParseAllReduceAlgorithm("tree");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'tree'"), absl::string_view::npos) << bad.status();
  const int64_t cut = kAutoRecursiveDoublingBelowBytes;
  EXPECT_EQ(ResolveAllReduceAlgorithm(AllReduceAlgorithm::kAuto, 2, 4),
            AllReduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(ResolveAllReduceAlgorithm(AllReduceAlgorithm::kAuto, 2, 100 * cut),
            AllReduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(ResolveAllReduceAlgorithm(AllReduceAlgorithm::kAuto, 4, cut - 4),
            AllReduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(ResolveAllReduceAlgorithm(AllReduceAlgorithm::kAuto, 4, cut), AllReduceAlgorithm::kRing);
  EXPECT_EQ(ResolveAllReduceAlgorithm(AllReduceAlgorithm::kAuto, 3, cut), AllReduceAlgorithm::kRing);
  EXPECT_EQ(ResolveAllReduceAlgorithm(AllReduceAlgorithm::kHalvingDoubling, 2, 4),
            AllReduceAlgorithm::kHalvingDoubling);
  EXPECT_EQ(ResolveAllReduceAlgorithm(AllReduceAlgorithm::kRing, 4, 4), AllReduceAlgorithm::kRing);
  EXPECT_TRUE(MayRunRecursiveDoubling(AllReduceAlgorithm::kAuto, 3));
  EXPECT_FALSE(MayRunRecursiveDoubling(AllReduceAlgorithm::kAuto, 1));
  EXPECT_FALSE(MayRunRecursiveDoubling(AllReduceAlgorithm::kRing, 4));
}

// 10^7 floats (40 MB per rank), worlds 2 and 4 only: the bucket sizes of a real model.
class LargeAllReduceTest
    : public testing::TestWithParam<std::tuple<int, AllReduceAlgorithm>> {};

TEST_P(LargeAllReduceTest, TenMillionFloats) {
  const auto [world, algorithm] = GetParam();
  const int64_t n = 10000000;
  RunRanks(world, algorithm, kTimeout,
           [&, world = world, algorithm = algorithm](ProcessGroup& pg) {
             std::vector<float> data(n);
             for (int64_t i = 0; i < n; ++i) data[i] = Value(pg.rank(), i);
             const absl::Time start = absl::Now();
             std::shared_ptr<Work> work = pg.AllReduce(data.data(), n, ReduceOp::kSum);
             ASSERT_TRUE(work->Wait().ok()) << work->Wait();
             if (pg.rank() == 0) {
               std::printf("world %d %s: all-reduce of 1e7 floats took %s\n", world,
                           AlgorithmName(algorithm).c_str(),
                           absl::FormatDuration(absl::Now() - start).c_str());
             }
             ExpectAll(
                 data.data(), n, [&](int64_t i) { return SumOfValues(world, i); }, 0,
                 absl::StrCat("rank ", pg.rank()));
           });
}

INSTANTIATE_TEST_SUITE_P(
    Gloo, LargeAllReduceTest,
    testing::Combine(testing::Values(2, 4),
                     testing::Values(AllReduceAlgorithm::kRing,
                                     AllReduceAlgorithm::kHalvingDoubling,
                                     AllReduceAlgorithm::kRecursiveDoubling,
                                     AllReduceAlgorithm::kAuto)),
    [](const testing::TestParamInfo<std::tuple<int, AllReduceAlgorithm>>& info) {
      return absl::StrCat("World", std::get<0>(info.param),
                          AlgorithmName(std::get<1>(info.param)));
    });

// ---------------------------------------------------------------------------------
// Broadcast, AllGather, ReduceScatter over world sizes x sizes (they do not depend on
// the all-reduce algorithm).

using CollectiveParam = std::tuple<int, int64_t>;

class CollectiveTest : public testing::TestWithParam<CollectiveParam> {};

TEST_P(CollectiveTest, BroadcastFromFirstAndLastRank) {
  const auto [world, n] = GetParam();
  RunRanks(world, AllReduceAlgorithm::kRing, kTimeout,
           [&, world = world, n = n](ProcessGroup& pg) {
             for (int root : {0, world - 1}) {
               std::vector<float> data(n, -1.0f);
               if (pg.rank() == root) {
                 for (int64_t i = 0; i < n; ++i) data[i] = Value(root, i);
               }
               std::shared_ptr<Work> work = pg.Broadcast(data.data(), n, root);
               ASSERT_TRUE(work->Wait().ok()) << work->Wait();
               ExpectAll(
                   data.data(), n, [&](int64_t i) { return Value(root, i); }, 0,
                   absl::StrCat("root ", root, " on rank ", pg.rank()));
             }
           });
}

TEST_P(CollectiveTest, AllGatherConcatenatesInRankOrder) {
  const auto [world, n] = GetParam();
  RunRanks(world, AllReduceAlgorithm::kRing, kTimeout,
           [&, world = world, n = n](ProcessGroup& pg) {
             std::vector<float> in(n);
             for (int64_t i = 0; i < n; ++i) in[i] = Value(pg.rank(), i);
             std::vector<float> out(n * world, -1.0f);
             std::shared_ptr<Work> work = pg.AllGather(in.data(), n, out.data());
             ASSERT_TRUE(work->Wait().ok()) << work->Wait();
             ExpectAll(
                 out.data(), n * world,
                 [&](int64_t j) { return Value(static_cast<int>(j / n), j % n); }, 0,
                 absl::StrCat("rank ", pg.rank()));
           });
}

TEST_P(CollectiveTest, ReduceScatterSumAndAverage) {
  const auto [world, n] = GetParam();
  RunRanks(world, AllReduceAlgorithm::kRing, kTimeout,
           [&, world = world, n = n](ProcessGroup& pg) {
             const int r = pg.rank();
             std::vector<float> in(n * world);
             for (int64_t j = 0; j < n * world; ++j) in[j] = Value(r, j);
             const std::vector<float> original = in;
             std::vector<float> out(n, -1.0f);
             std::shared_ptr<Work> work =
                 pg.ReduceScatter(in.data(), out.data(), n, ReduceOp::kSum);
             ASSERT_TRUE(work->Wait().ok()) << work->Wait();
             // out[i] = sum over ranks of in[r * n + i].
             ExpectAll(
                 out.data(), n, [&](int64_t i) { return SumOfValues(world, r * n + i); },
                 0, absl::StrCat("sum on rank ", r));
             EXPECT_EQ(in, original) << "the input must be left untouched";

             work = pg.ReduceScatter(in.data(), out.data(), n, ReduceOp::kAverage);
             ASSERT_TRUE(work->Wait().ok()) << work->Wait();
             ExpectAll(
                 out.data(), n,
                 [&](int64_t i) { return SumOfValues(world, r * n + i) / world; }, 1e-6f,
                 absl::StrCat("average on rank ", r));
           });
}

INSTANTIATE_TEST_SUITE_P(Gloo, CollectiveTest,
                         testing::Combine(testing::Values(1, 2, 3, 4),
                                          testing::Values(0, 1, 7, 1000003)),
                         [](const testing::TestParamInfo<CollectiveParam>& info) {
                           return absl::StrCat("World", std::get<0>(info.param), "N",
                                               std::get<1>(info.param));
                         });

// ---------------------------------------------------------------------------------
// Barrier, ordering, in-flight operations.

class BarrierTest : public testing::TestWithParam<int> {};

TEST_P(BarrierTest, NoRankLeavesBeforeAllEntered) {
  const int world = GetParam();
  constexpr int kRounds = 3;
  absl::Mutex mu;
  std::vector<std::vector<absl::Time>> enter(kRounds, std::vector<absl::Time>(world));
  std::vector<std::vector<absl::Time>> leave(kRounds, std::vector<absl::Time>(world));
  RunRanks(world, AllReduceAlgorithm::kRing, kTimeout, [&](ProcessGroup& pg) {
    const int r = pg.rank();
    for (int round = 0; round < kRounds; ++round) {
      // A different rank arrives last in each round.
      absl::SleepFor(absl::Milliseconds(40 * ((r + round) % world)));
      {
        absl::MutexLock lock(&mu);
        enter[round][r] = absl::Now();
      }
      std::shared_ptr<Work> work = pg.Barrier();
      ASSERT_TRUE(work->Wait().ok()) << work->Wait();
      absl::MutexLock lock(&mu);
      leave[round][r] = absl::Now();
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    const absl::Time last_in =
        *std::max_element(enter[round].begin(), enter[round].end());
    for (int r = 0; r < world; ++r) {
      EXPECT_GE(leave[round][r], last_in)
          << "round " << round << ": rank " << r << " left before the last rank entered";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gloo, BarrierTest, testing::Values(1, 2, 3, 4));

class InFlightTest : public testing::TestWithParam<AllReduceAlgorithm> {};

// Six collectives issued back to back, then waited in order: the FIFO keeps them
// apart (each has its own tag) and every result is right.
TEST_P(InFlightTest, SeveralOperationsQueuedThenWaitedInOrder) {
  const int world = 3;
  const int64_t n = 10007;
  RunRanks(world, GetParam(), kTimeout, [&](ProcessGroup& pg) {
    const int r = pg.rank();
    std::vector<float> a(n), b(n, -1.0f), c(n), d(n * world), e(n * world), f(n), g(n);
    for (int64_t i = 0; i < n; ++i) {
      a[i] = Value(r, i);
      c[i] = Value(r, i + 5);
      g[i] = Value(r, i + 9);
    }
    if (r == 1) {
      for (int64_t i = 0; i < n; ++i) b[i] = Value(7, i);
    }
    for (int64_t j = 0; j < n * world; ++j) e[j] = Value(r, j);
    std::vector<std::shared_ptr<Work>> works = {
        pg.AllReduce(a.data(), n, ReduceOp::kSum),
        pg.Broadcast(b.data(), n, 1),
        pg.AllGather(c.data(), n, d.data()),
        pg.ReduceScatter(e.data(), f.data(), n, ReduceOp::kSum),
        pg.AllReduce(g.data(), n, ReduceOp::kAverage),
        pg.Barrier(),
    };
    for (size_t k = 0; k < works.size(); ++k) {
      ASSERT_TRUE(works[k]->Wait().ok()) << "op " << k << ": " << works[k]->Wait();
    }
    ExpectAll(
        a.data(), n, [&](int64_t i) { return SumOfValues(world, i); }, 0, "a");
    ExpectAll(
        b.data(), n, [&](int64_t i) { return Value(7, i); }, 0, "b");
    ExpectAll(
        d.data(), n * world,
        [&](int64_t j) { return Value(static_cast<int>(j / n), j % n + 5); }, 0, "d");
    ExpectAll(
        f.data(), n, [&](int64_t i) { return SumOfValues(world, r * n + i); }, 0, "f");
    ExpectAll(
        g.data(), n, [&](int64_t i) { return SumOfValues(world, i + 9) / world; }, 1e-6f,
        "g");
  });
}

INSTANTIATE_TEST_SUITE_P(Gloo, InFlightTest,
                         testing::Values(AllReduceAlgorithm::kRing,
                                         AllReduceAlgorithm::kHalvingDoubling,
                                     AllReduceAlgorithm::kRecursiveDoubling,
                                     AllReduceAlgorithm::kAuto),
                         [](const testing::TestParamInfo<AllReduceAlgorithm>& info) {
                           return AlgorithmName(info.param);
                         });

TEST(GlooProcessGroupTest, ZeroElementsCompleteAtOnce) {
  RunRanks(2, AllReduceAlgorithm::kRing, kTimeout, [](ProcessGroup& pg) {
    std::vector<std::shared_ptr<Work>> works = {
        pg.AllReduce(nullptr, 0, ReduceOp::kSum), pg.Broadcast(nullptr, 0, 1),
        pg.AllGather(nullptr, 0, nullptr),
        pg.ReduceScatter(nullptr, nullptr, 0, ReduceOp::kAverage)};
    for (const auto& work : works) {
      EXPECT_TRUE(work->IsCompleted());
      EXPECT_TRUE(work->Wait().ok()) << work->Wait();
    }
  });
}

TEST(GlooProcessGroupTest, InvalidArgumentsFailWithoutCommunicating) {
  RunRanks(2, AllReduceAlgorithm::kRing, kTimeout, [](ProcessGroup& pg) {
    float x = 1.0f;
    EXPECT_EQ(pg.Broadcast(&x, 1, 2)->Wait().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(pg.Broadcast(&x, 1, -1)->Wait().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(pg.AllReduce(&x, -1, ReduceOp::kSum)->Wait().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(pg.AllReduce(nullptr, 4, ReduceOp::kSum)->Wait().code(),
              absl::StatusCode::kInvalidArgument);
    // The group still works afterwards.
    std::shared_ptr<Work> work = pg.AllReduce(&x, 1, ReduceOp::kSum);
    ASSERT_TRUE(work->Wait().ok()) << work->Wait();
    EXPECT_EQ(x, 2.0f);
  });
}

TEST(GlooProcessGroupTest, InvalidOptionsAreRefused) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  EXPECT_EQ(
      NewGlooProcessGroup(store.get(), Options(2, 2, AllReduceAlgorithm::kRing, kTimeout))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      NewGlooProcessGroup(nullptr, Options(0, 1, AllReduceAlgorithm::kRing, kTimeout))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewGlooProcessGroup(store.get(), Options(0, 1, AllReduceAlgorithm::kRing,
                                                     absl::ZeroDuration()))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------
// Failures: every one bounded by the timeout, reported as a Status.

class TimeoutTest : public testing::TestWithParam<AllReduceAlgorithm> {};

// Rank 1 joins but never issues the all-reduce: rank 0's Wait returns
// DeadlineExceeded after about the 1 s timeout, and the group fails fast afterwards.
TEST_P(TimeoutTest, PeerThatNeverIssuesTheOpGivesDeadlineExceeded) {
  absl::Notification rank0_done;
  RunRanks(2, GetParam(), absl::Seconds(1), [&](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      // Keep the connection open (but silent) until rank 0 has seen its timeout.
      rank0_done.WaitForNotification();
      return;
    }
    NotifyOnExit notify(&rank0_done);
    std::vector<float> data(1000, 1.0f);
    const absl::Time start = absl::Now();
    const absl::Status status = pg.AllReduce(data.data(), 1000, ReduceOp::kSum)->Wait();
    const absl::Duration took = absl::Now() - start;
    std::printf("missing peer detected after %s: %s\n",
                absl::FormatDuration(took).c_str(), status.ToString().c_str());
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_NE(status.message().find("rank 0: all_reduce #0"), std::string::npos)
        << status;
    EXPECT_GE(took, absl::Milliseconds(900));
    EXPECT_LE(took, absl::Seconds(3));

    // The context is unusable now: the next collective fails at once, with the first
    // error.
    const absl::Time again = absl::Now();
    const absl::Status next = pg.Barrier()->Wait();
    EXPECT_EQ(next.code(), absl::StatusCode::kDeadlineExceeded) << next;
    EXPECT_NE(next.message().find("failed earlier"), std::string::npos) << next;
    EXPECT_LE(absl::Now() - again, absl::Milliseconds(200));
    rank0_done.Notify();
  });
}

// Rank 1 goes away after the rendezvous: rank 0's all-reduce fails with Unavailable
// well before its (long) timeout. (Rank 1's own timeout is short: it bounds how long
// its destructor waits for rank 0 to shut down too, which rank 0 never does.)
TEST_P(TimeoutTest, PeerThatLeftGivesUnavailableQuickly) {
  absl::Notification rank1_gone;
  std::unique_ptr<Store> base = NewInMemoryStore();
  std::unique_ptr<Store> store = NewPrefixStore(NextPrefix(), base.get());
  JoiningThread rank1([&] {
    NotifyOnExit notify(&rank1_gone);
    auto pg = NewGlooProcessGroup(store.get(),
                                  Options(1, 2, GetParam(), absl::Milliseconds(200)));
    ASSERT_TRUE(pg.ok()) << pg.status();
    EXPECT_TRUE((*pg)->Barrier()->Wait().ok());
    pg->reset();  // Closes its connections.
    rank1_gone.Notify();
  });
  auto pg =
      NewGlooProcessGroup(store.get(), Options(0, 2, GetParam(), absl::Seconds(10)));
  ASSERT_TRUE(pg.ok()) << pg.status();
  EXPECT_TRUE((*pg)->Barrier()->Wait().ok());
  rank1_gone.WaitForNotification();
  std::vector<float> data(100000, 1.0f);
  const absl::Time start = absl::Now();
  const absl::Status status =
      (*pg)->AllReduce(data.data(), 100000, ReduceOp::kSum)->Wait();
  const absl::Duration took = absl::Now() - start;
  std::printf("dead peer detected after %s: %s\n", absl::FormatDuration(took).c_str(),
              status.ToString().c_str());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("all_reduce"), std::string::npos) << status;
  EXPECT_LE(took, absl::Seconds(2));
}

// Three all-reduces queued while the peer stays silent: the first times out, the
// others fail at once with its error, so all are done within about one timeout.
TEST_P(TimeoutTest, QueuedOperationsFailFastAfterATimeout) {
  absl::Notification rank0_done;
  RunRanks(2, GetParam(), absl::Seconds(1), [&](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      rank0_done.WaitForNotification();
      return;
    }
    NotifyOnExit notify(&rank0_done);
    std::vector<float> a(10, 1.0f), b(10, 1.0f), c(10, 1.0f);
    std::shared_ptr<Work> w1 = pg.AllReduce(a.data(), 10, ReduceOp::kSum);
    std::shared_ptr<Work> w2 = pg.AllReduce(b.data(), 10, ReduceOp::kSum);
    std::shared_ptr<Work> w3 = pg.AllReduce(c.data(), 10, ReduceOp::kSum);
    const absl::Time start = absl::Now();
    for (const auto& work : {w3, w1, w2}) {
      EXPECT_EQ(work->Wait().code(), absl::StatusCode::kDeadlineExceeded) << work->Wait();
    }
    EXPECT_LE(absl::Now() - start, absl::Seconds(3));
    rank0_done.Notify();
  });
}

INSTANTIATE_TEST_SUITE_P(Gloo, TimeoutTest,
                         testing::Values(AllReduceAlgorithm::kRing,
                                         AllReduceAlgorithm::kHalvingDoubling,
                                     AllReduceAlgorithm::kRecursiveDoubling,
                                     AllReduceAlgorithm::kAuto),
                         [](const testing::TestParamInfo<AllReduceAlgorithm>& info) {
                           return AlgorithmName(info.param);
                         });

TEST(GlooProcessGroupTest, DestroyingTheGroupCancelsQueuedOperations) {
  absl::Notification rank0_done;
  std::unique_ptr<Store> base = NewInMemoryStore();
  std::unique_ptr<Store> store = NewPrefixStore(NextPrefix(), base.get());
  JoiningThread rank1([&] {
    auto pg = NewGlooProcessGroup(
        store.get(), Options(1, 2, AllReduceAlgorithm::kRing, absl::Seconds(1)));
    ASSERT_TRUE(pg.ok()) << pg.status();
    rank0_done.WaitForNotification();
  });
  NotifyOnExit notify(&rank0_done);
  auto pg = NewGlooProcessGroup(
      store.get(), Options(0, 2, AllReduceAlgorithm::kRing, absl::Seconds(1)));
  ASSERT_TRUE(pg.ok()) << pg.status();
  std::vector<std::vector<float>> buffers(4, std::vector<float>(10, 1.0f));
  std::vector<std::shared_ptr<Work>> works;
  for (auto& buffer : buffers) {
    works.push_back((*pg)->AllReduce(buffer.data(), 10, ReduceOp::kSum));
  }
  const absl::Time start = absl::Now();
  pg->reset();
  const absl::Duration took = absl::Now() - start;
  EXPECT_LE(took, absl::Seconds(2));
  int cancelled = 0;
  for (const auto& work : works) {
    EXPECT_TRUE(work->IsCompleted());
    const absl::Status status = work->Wait();
    EXPECT_FALSE(status.ok());
    if (absl::IsCancelled(status)) ++cancelled;
  }
  EXPECT_GE(cancelled, 2);  // At most the first was running (and maybe the second).
}

// Rank 2 of 3 never arrives: both others get DeadlineExceeded naming rank 2, within
// about the timeout.
TEST(GlooProcessGroupTest, RankThatNeverJoinsGivesDeadlineExceeded) {
  std::unique_ptr<Store> base = NewInMemoryStore();
  std::unique_ptr<Store> store = NewPrefixStore(NextPrefix(), base.get());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      const absl::Time start = absl::Now();
      auto pg = NewGlooProcessGroup(
          store.get(), Options(rank, 3, AllReduceAlgorithm::kRing, absl::Seconds(1)));
      const absl::Duration took = absl::Now() - start;
      std::printf("rank %d: rendezvous failed after %s: %s\n", rank,
                  absl::FormatDuration(took).c_str(), pg.status().ToString().c_str());
      EXPECT_EQ(pg.status().code(), absl::StatusCode::kDeadlineExceeded) << pg.status();
      EXPECT_NE(pg.status().message().find("rank(s) 2 of 3 never joined"),
                std::string::npos)
          << pg.status();
      EXPECT_LE(took, absl::Seconds(3));
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(GlooProcessGroupTest, MismatchedWorldSizeIsRefused) {
  std::unique_ptr<Store> base = NewInMemoryStore();
  std::unique_ptr<Store> store = NewPrefixStore(NextPrefix(), base.get());
  JoiningThread rank1([&] {
    // Expects 3 ranks, so it waits for a rank 2 that never comes.
    auto pg = NewGlooProcessGroup(
        store.get(), Options(1, 3, AllReduceAlgorithm::kRing, absl::Seconds(1)));
    EXPECT_FALSE(pg.ok());
  });
  auto pg = NewGlooProcessGroup(
      store.get(), Options(0, 2, AllReduceAlgorithm::kRing, absl::Seconds(1)));
  EXPECT_EQ(pg.status().code(), absl::StatusCode::kInvalidArgument) << pg.status();
  EXPECT_NE(pg.status().message().find("world size 3"), std::string::npos) << pg.status();
}

// A name that does not resolve, and an address this machine does not have: errors,
// not crashes.
TEST(GlooProcessGroupTest, UnusableHostnameIsAnError) {
  std::unique_ptr<Store> base = NewInMemoryStore();
  for (const char* host : {"no-such-host.invalid", "192.0.2.1"}) {
    std::unique_ptr<Store> store = NewPrefixStore(NextPrefix(), base.get());
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        ProcessGroupOptions options =
            Options(rank, 2, AllReduceAlgorithm::kRing, absl::Seconds(1));
        options.hostname = host;
        auto pg = NewGlooProcessGroup(store.get(), options);
        EXPECT_FALSE(pg.ok());
        std::printf("rank %d, host %s: %s\n", rank, host, pg.status().ToString().c_str());
      });
    }
    for (std::thread& t : threads) t.join();
  }
}

}  // namespace
}  // namespace ringside
