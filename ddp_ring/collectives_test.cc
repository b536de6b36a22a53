// Every collective of the process-group interface on the Gloo backend, ranks as threads
// (local_ranks.h), against its closed form and its byte counts per rank: worlds 1-8,
// sizes 0, 1, odd and large, roots first, middle and last. process_group_test.cc covers
// worlds 1-4, timeouts and shutdown of the older collectives; this file adds reduce,
// scatter, gather and all-to-all, and worlds 5-8 for all of them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "ddp_ring/allreduce_algorithm.h"
#include "ddp_ring/local_ranks.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/process_group_test_util.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using testing_util::AlgorithmName;
using testing_util::CountMismatches;
using testing_util::Mismatches;
using testing_util::ExpectedAllReduceBytes;
using testing_util::PowerOfTwoRanks;
using testing_util::SumOfValues;
using testing_util::Value;

constexpr int64_t kFloat = sizeof(float);
// Large enough for several MiB through a rank at world 8, not a multiple of any world
// size, and still small enough for 2 cores.
constexpr int64_t kLarge = 262147;

ProcessGroupOptions Options(absl::Duration timeout = absl::Seconds(30),
                            AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto) {
  ProcessGroupOptions options;
  options.timeout = timeout;
  options.algorithm = algorithm;
  options.hostname = "127.0.0.1";
  return options;
}

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

// Rank r's input of `n` floats: Value(r, i).
std::vector<float> Input(int rank, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = Value(rank, i);
  return v;
}

// The roots every rooted collective runs from: first, middle and last rank.
std::vector<int> Roots(int world) {
  std::vector<int> roots = {0, world / 2, world - 1};
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  return roots;
}

// Children of v = (rank - root) mod world in the binomial tree of broadcast and reduce:
// v + 2^k for each 2^k > v with v + 2^k < world.
int64_t TreeChildren(int v, int world) {
  int64_t children = 0;
  for (int mask = 1; mask < world; mask *= 2) children += v < mask && v + mask < world;
  return children;
}

// Checks the bytes `work` reports and adds them to `*total`.
void ExpectBytes(const Work& work, CollectiveBytes want, CollectiveBytes* total,
                 const std::string& what) {
  const CollectiveBytes got = work.bytes();
  EXPECT_EQ(got, want) << what << ": sent " << got.sent << " received " << got.received
                       << ", want " << want.sent << " and " << want.received;
  *total += got;
}

using CollectiveParam = std::tuple<int, int64_t>;

class CollectivesTest : public testing::TestWithParam<CollectiveParam> {};

// Broadcast, reduce (sum and average), scatter and gather from every root of Roots().
TEST_P(CollectivesTest, RootedCollectivesMatchTheirClosedForms) {
  const auto [world, n] = GetParam();
  const int64_t b = n * kFloat;
  const absl::Status status = RunLocalGlooRanks(world, Options(), [&, world = world, n = n](
                                                                      ProcessGroup& pg) {
    const int r = pg.rank();
    const CollectiveBytes start = pg.total_bytes();
    CollectiveBytes total;
    for (int root : Roots(world)) {
      const std::string where = absl::StrCat("root ", root, ", rank ", r);
      const int v = (r - root + world) % world;
      const int64_t children = TreeChildren(v, world);

      // Broadcast: every rank ends with the root's vector.
      std::vector<float> data = Input(r, n);
      std::shared_ptr<Work> work = pg.Broadcast(data.data(), n, root);
      RINGSIDE_RETURN_IF_ERROR(work->Wait());
      ExpectAll(data.data(), n, [&](int64_t i) { return Value(root, i); }, 0,
                "broadcast, " + where);
      ExpectBytes(*work, {children * b, v > 0 ? b : 0}, &total, "broadcast, " + where);

      // Reduce: the root holds the sum (the average); the others' buffers are untouched.
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        const bool average = op == ReduceOp::kAverage;
        const std::string what = absl::StrCat(average ? "reduce average, " : "reduce sum, ", where);
        data = Input(r, n);
        work = pg.Reduce(data.data(), n, op, root);
        RINGSIDE_RETURN_IF_ERROR(work->Wait());
        if (r == root) {
          ExpectAll(data.data(), n,
                    [&](int64_t i) { return SumOfValues(world, i) / (average ? world : 1); },
                    average ? 1e-6f : 0, what);
        } else {
          EXPECT_EQ(data, Input(r, n)) << what << ": a non-root buffer changed";
        }
        ExpectBytes(*work, {v > 0 ? b : 0, children * b}, &total, what);
      }

      // Scatter: rank r gets slice r of the root's vector; `in` only exists on the root.
      std::vector<float> in = r == root ? Input(root, world * n) : std::vector<float>();
      std::vector<float> out(n, -1.0f);
      work = pg.Scatter(r == root ? in.data() : nullptr, out.data(), n, root);
      RINGSIDE_RETURN_IF_ERROR(work->Wait());
      ExpectAll(out.data(), n, [&](int64_t i) { return Value(root, r * n + i); }, 0,
                "scatter, " + where);
      if (r == root) {
        EXPECT_EQ(in, Input(root, world * n)) << "scatter changed its input";
      }
      ExpectBytes(*work, {r == root ? (world - 1) * b : 0, r == root ? 0 : b}, &total,
                  "scatter, " + where);

      // Gather: the root's out is the concatenation in rank order. Non-roots pass no
      // `out` from an even root and one that must stay untouched from an odd root.
      in = Input(r, n);
      const bool pass_out = r == root || root % 2 == 1;
      std::vector<float> gathered(pass_out ? world * n : 0, -1.0f);
      work = pg.Gather(in.data(), n, pass_out ? gathered.data() : nullptr, root);
      RINGSIDE_RETURN_IF_ERROR(work->Wait());
      if (r == root) {
        ExpectAll(gathered.data(), world * n,
                  [&](int64_t j) { return Value(static_cast<int>(j / n), j % n); }, 0,
                  "gather, " + where);
      } else {
        EXPECT_TRUE(std::all_of(gathered.begin(), gathered.end(), [](float x) { return x == -1.0f; }))
            << "gather wrote a non-root's out, " << where;
      }
      EXPECT_EQ(in, Input(r, n)) << "gather changed its input, " << where;
      ExpectBytes(*work, {r == root ? 0 : b, r == root ? (world - 1) * b : 0}, &total,
                  "gather, " + where);
    }
    EXPECT_EQ(pg.total_bytes() - start, total) << "rank " << r;
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// All-reduce (sum and average; the algorithm kAuto picks), all-gather, reduce-scatter
// (sum and average), all-to-all and barrier.
TEST_P(CollectivesTest, SymmetricCollectivesMatchTheirClosedForms) {
  const auto [world, n] = GetParam();
  const int64_t b = n * kFloat;
  const CollectiveBytes each = {(world - 1) * b, (world - 1) * b};
  const absl::Status status = RunLocalGlooRanks(world, Options(), [&, world = world, n = n](
                                                                      ProcessGroup& pg) {
    const int r = pg.rank();
    const std::string where = absl::StrCat("rank ", r);
    const CollectiveBytes start = pg.total_bytes();
    CollectiveBytes total;

    const AllReduceAlgorithm algorithm =
        ResolveAllReduceAlgorithm(AllReduceAlgorithm::kAuto, world, b);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      const bool average = op == ReduceOp::kAverage;
      const std::string what = absl::StrCat(average ? "all-reduce average, " : "all-reduce sum, ", where);
      std::vector<float> data = Input(r, n);
      std::shared_ptr<Work> work = pg.AllReduce(data.data(), n, op);
      RINGSIDE_RETURN_IF_ERROR(work->Wait());
      ExpectAll(data.data(), n,
                [&](int64_t i) { return SumOfValues(world, i) / (average ? world : 1); },
                average ? 1e-6f : 0, what);
      ExpectBytes(*work, ExpectedAllReduceBytes(algorithm, world, r, n), &total, what);
    }

    std::vector<float> in = Input(r, n);
    std::vector<float> out(world * n, -1.0f);
    std::shared_ptr<Work> work = pg.AllGather(in.data(), n, out.data());
    RINGSIDE_RETURN_IF_ERROR(work->Wait());
    ExpectAll(out.data(), world * n,
              [&](int64_t j) { return Value(static_cast<int>(j / n), j % n); }, 0,
              "all-gather, " + where);
    ExpectBytes(*work, each, &total, "all-gather, " + where);

    // Reduce-scatter: out [i] = sum over ranks of in [r n + i].
    in = Input(r, world * n);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      const bool average = op == ReduceOp::kAverage;
      const std::string what =
          absl::StrCat(average ? "reduce-scatter average, " : "reduce-scatter sum, ", where);
      out.assign(n, -1.0f);
      work = pg.ReduceScatter(in.data(), out.data(), n, op);
      RINGSIDE_RETURN_IF_ERROR(work->Wait());
      ExpectAll(out.data(), n,
                [&](int64_t i) { return SumOfValues(world, r * n + i) / (average ? world : 1); },
                average ? 1e-6f : 0, what);
      EXPECT_EQ(in, Input(r, world * n)) << what << ": the input changed";
      ExpectBytes(*work, each, &total, what);
    }

    // All-to-all: out [s n + i] = rank s's in [r n + i].
    out.assign(world * n, -1.0f);
    work = pg.AllToAll(in.data(), out.data(), n);
    RINGSIDE_RETURN_IF_ERROR(work->Wait());
    ExpectAll(out.data(), world * n,
              [&](int64_t j) { return Value(static_cast<int>(j / n), r * n + j % n); }, 0,
              "all-to-all, " + where);
    EXPECT_EQ(in, Input(r, world * n)) << "all-to-all changed its input, " << where;
    ExpectBytes(*work, each, &total, "all-to-all, " + where);

    work = pg.Barrier();
    RINGSIDE_RETURN_IF_ERROR(work->Wait());
    ExpectBytes(*work, {}, &total, "barrier, " + where);
    EXPECT_EQ(pg.total_bytes() - start, total) << where;
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

std::string CollectiveParamName(const testing::TestParamInfo<CollectiveParam>& info) {
  return absl::StrCat("World", std::get<0>(info.param), "N", std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Gloo, CollectivesTest,
                         testing::Combine(testing::Range(1, 9), testing::Values(0, 1, 7)),
                         CollectiveParamName);
INSTANTIATE_TEST_SUITE_P(GlooLarge, CollectivesTest,
                         testing::Combine(testing::Range(1, 9), testing::Values(kLarge)),
                         CollectiveParamName);

// The all-reduce algorithms at the world sizes process_group_test.cc leaves out (5-8:
// a folded rank, then none), sizes that do not divide by the world.
using AlgorithmParam = std::tuple<int, int64_t, AllReduceAlgorithm>;

class AllReduceAlgorithmTest : public testing::TestWithParam<AlgorithmParam> {};

TEST_P(AllReduceAlgorithmTest, SumMatchesClosedFormAndTraffic) {
  const auto [world, n, algorithm] = GetParam();
  const absl::Status status = RunLocalGlooRanks(
      world, Options(absl::Seconds(30), algorithm),
      [&, world = world, n = n, algorithm = algorithm](ProcessGroup& pg) {
        const int r = pg.rank();
        std::vector<float> data = Input(r, n);
        std::shared_ptr<Work> work = pg.AllReduce(data.data(), n, ReduceOp::kSum);
        RINGSIDE_RETURN_IF_ERROR(work->Wait());
        ExpectAll(data.data(), n, [&](int64_t i) { return SumOfValues(world, i); }, 0,
                  absl::StrCat("rank ", r));
        // Halving-doubling's formula holds when the halvings split evenly.
        if (algorithm != AllReduceAlgorithm::kHalvingDoubling || n % PowerOfTwoRanks(world) == 0 ||
            r >= PowerOfTwoRanks(world)) {
          EXPECT_EQ(work->bytes(), ExpectedAllReduceBytes(algorithm, world, r, n)) << "rank " << r;
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

INSTANTIATE_TEST_SUITE_P(
    Gloo, AllReduceAlgorithmTest,
    testing::Combine(testing::Range(5, 9), testing::Values(7, 8 * 1021, kLarge),
                     testing::Values(AllReduceAlgorithm::kRing,
                                     AllReduceAlgorithm::kHalvingDoubling,
                                     AllReduceAlgorithm::kRecursiveDoubling)),
    [](const testing::TestParamInfo<AlgorithmParam>& info) {
      return absl::StrCat("World", std::get<0>(info.param), "N", std::get<1>(info.param),
                          AlgorithmName(std::get<2>(info.param)));
    });

TEST(CollectivesTest, ZeroElementsCompleteAtOnce) {
  const absl::Status status = RunLocalGlooRanks(3, Options(), [](ProcessGroup& pg) {
    const std::vector<std::shared_ptr<Work>> works = {
        pg.Reduce(nullptr, 0, ReduceOp::kSum, 2), pg.Scatter(nullptr, nullptr, 0, 1),
        pg.Gather(nullptr, 0, nullptr, 0), pg.AllToAll(nullptr, nullptr, 0)};
    for (const auto& work : works) {
      EXPECT_TRUE(work->IsCompleted());
      EXPECT_TRUE(work->Wait().ok()) << work->Wait();
      EXPECT_EQ(work->bytes(), CollectiveBytes{});
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(CollectivesTest, InvalidArgumentsFailWithoutCommunicating) {
  const absl::Status status = RunLocalGlooRanks(3, Options(), [](ProcessGroup& pg) {
    float x[3] = {1.0f, 1.0f, 1.0f};
    float y[3] = {0.0f, 0.0f, 0.0f};
    const bool root0 = pg.rank() == 0;
    const std::vector<std::pair<std::string, std::shared_ptr<Work>>> refused = {
        {"reduce root 3", pg.Reduce(x, 1, ReduceOp::kSum, 3)},
        {"reduce root -1", pg.Reduce(x, 1, ReduceOp::kSum, -1)},
        {"reduce n -1", pg.Reduce(x, -1, ReduceOp::kSum, 0)},
        {"reduce null", pg.Reduce(nullptr, 1, ReduceOp::kSum, 0)},
        {"scatter root 3", pg.Scatter(x, y, 1, 3)},
        {"scatter n -1", pg.Scatter(x, y, -1, 0)},
        {"scatter null out", pg.Scatter(x, nullptr, 1, 0)},
        {"gather root -1", pg.Gather(x, 1, y, -1)},
        {"gather n -1", pg.Gather(x, -1, y, 0)},
        {"gather null in", pg.Gather(nullptr, 1, y, 0)},
        {"all-to-all n -1", pg.AllToAll(x, y, -1)},
        {"all-to-all null in", pg.AllToAll(nullptr, y, 1)},
        {"all-to-all null out", pg.AllToAll(x, nullptr, 1)},
    };
    for (const auto& [what, work] : refused) {
      EXPECT_EQ(work->Wait().code(), absl::StatusCode::kInvalidArgument) << what << ": " << work->Wait();
    }
    // The root's own null buffer (the others may pass null): refused on the root only,
    // so the other ranks skip these too.
    if (root0) {
      EXPECT_EQ(pg.Scatter(nullptr, y, 1, 0)->Wait().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(pg.Gather(x, 1, nullptr, 0)->Wait().code(), absl::StatusCode::kInvalidArgument);
    }
    // The group still works afterwards.
    std::shared_ptr<Work> work = pg.Reduce(x, 1, ReduceOp::kSum, 0);
    RINGSIDE_RETURN_IF_ERROR(work->Wait());
    if (root0) {
      EXPECT_EQ(x[0], 3.0f);
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// Rank 1 joins but never issues the gather: the root's Wait returns DeadlineExceeded
// after about the 1 s timeout, naming the collective, and the group then fails fast.
TEST(CollectivesTest, PeerThatNeverIssuesTheGatherGivesDeadlineExceeded) {
  absl::Notification root_done;
  const absl::Status status =
      RunLocalGlooRanks(2, Options(absl::Seconds(1)), [&](ProcessGroup& pg) {
        if (pg.rank() == 1) {
          // Connected, but silent (bounded, should the root never get that far).
          root_done.WaitForNotificationWithTimeout(absl::Seconds(20));
          return absl::OkStatus();
        }
        std::vector<float> in(100, 1.0f), out(200);
        const absl::Time start = absl::Now();
        const absl::Status gather = pg.Gather(in.data(), 100, out.data(), 0)->Wait();
        const absl::Duration took = absl::Now() - start;
        EXPECT_EQ(gather.code(), absl::StatusCode::kDeadlineExceeded) << gather;
        EXPECT_NE(gather.message().find("rank 0: gather #0"), std::string::npos) << gather;
        EXPECT_GE(took, absl::Milliseconds(900));
        EXPECT_LE(took, absl::Seconds(3));
        const absl::Time again = absl::Now();
        const absl::Status next = pg.AllToAll(in.data(), out.data(), 50)->Wait();
        EXPECT_EQ(next.code(), absl::StatusCode::kDeadlineExceeded) << next;
        EXPECT_NE(next.message().find("failed earlier"), std::string::npos) << next;
        EXPECT_LE(absl::Now() - again, absl::Milliseconds(200));
        root_done.Notify();
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace ringside
