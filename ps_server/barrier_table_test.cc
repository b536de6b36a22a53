// BarrierTable alone (names, numbers, sums in worker-id order, who takes part, a
// restarted worker), then the shard's barriers through it.
#include "ps_server/barrier_table.h"

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/membership.h"
#include "ps_server/shard.h"
#include "ps_server/shard_test_util.h"

namespace ringside {
namespace shard_test {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------
// BarrierTable alone.

// Every worker takes part.
const auto kEveryone = [](int, int64_t) { return true; };

TEST(BarrierTableTest, SumsInWorkerIdOrderWhateverTheArrivalOrder) {
  BarrierTable table(3);
  // 1e16 + 1 loses the 1: only the id order gives 0 + 1e16 + 1 - 1e16 = 0.
  absl::StatusOr<std::string> key = table.Enter(2, "eval/0", {-1e16}, 0, kFromStart);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(table.Missing(*key, kEveryone), (std::vector<int>{0, 1}));
  ASSERT_TRUE(table.Enter(1, "eval/0", {1.0}, 0, kFromStart).ok());
  ASSERT_TRUE(table.Enter(0, "eval/0", {1e16}, 0, kFromStart).ok());
  EXPECT_TRUE(table.Missing(*key, kEveryone).empty());
  for (int w = 0; w < 3; ++w) {
    EXPECT_EQ(table.open(), 1u);
    EXPECT_EQ(table.Leave(*key), std::vector<double>{((0.0 + 1e16) + 1.0) + -1e16});
  }
  EXPECT_EQ(table.open(), 0u);  // Everybody read it: forgotten.
}

TEST(BarrierTableTest, RefusedEntriesChangeNothing) {
  BarrierTable table(2);
  EXPECT_EQ(table.Enter(0, "lunch/0", {}, 0, kFromStart).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Enter(0, "eval/1", {}, 0, kFromStart).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::string> key = table.Enter(0, "eval/0", {1.0, 2.0}, 0, kFromStart);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(table.Enter(1, "eval/0", {1.0}, 0, kFromStart).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Missing(*key, kEveryone), std::vector<int>{1});
  ASSERT_TRUE(table.Enter(0, "end", {}, 0, kFromStart).ok());
  EXPECT_EQ(table.Enter(0, "end", {}, 0, kFromStart).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Worker 1's next barrier is still number 0.
  EXPECT_TRUE(table.Enter(1, "checkpoint/0", {3.0, 4.0}, 0, kFromStart).ok());
}

TEST(BarrierTableTest, MissingListsOnlyTheWorkersThatTakePart) {
  BarrierTable table(3);
  absl::StatusOr<std::string> key = table.Enter(0, "eval/0", {}, 4, kFromStart);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(table.Missing(*key, [](int w, int64_t position) { return w != 2 && position == 4; }),
            std::vector<int>{1});
}

TEST(BarrierTableTest, ARestartedWorkerJoinsTheBarrierTheOthersAreAt) {
  BarrierTable table(2);
  // Barrier 0 began at step 0, barrier 1 at step 4.
  for (const char* name : {"eval/0", "checkpoint/1"}) {
    const int64_t position = std::string(name) == "eval/0" ? 0 : 4;
    absl::StatusOr<std::string> key;
    for (int w = 0; w < 2; ++w) key = table.Enter(w, name, {1.0}, position, kFromStart);
    ASSERT_TRUE(key.ok()) << key.status();
    for (int w = 0; w < 2; ++w) table.Leave(*key);
  }
  absl::StatusOr<std::string> key0 = table.Enter(0, "eval/2", {1.0}, 8, kFromStart);
  ASSERT_TRUE(key0.ok()) << key0.status();
  table.Restart(1);
  // Worker 1 restarted and rejoined at step 4: the barriers begun at or before step 4
  // (two) are behind it, so its own barrier 0 is the job's barrier 2, where worker 0
  // waits.
  absl::StatusOr<std::string> key1 = table.Enter(1, "eval/0", {2.0}, 8, 4);
  ASSERT_TRUE(key1.ok()) << key1.status();
  EXPECT_EQ(*key1, *key0);
  EXPECT_EQ(table.Leave(*key0), std::vector<double>{3.0});
}

// ---------------------------------------------------------------------------------
// Barriers.

TEST(ShardBarrierTest, EveryWorkerGetsTheElementWiseSums) {
  constexpr int kWorkers = 3;
  std::unique_ptr<Shard> shard = NewShard(Options(kWorkers, Bsp(), Hyper(0.1f)));
  ASSERT_NE(shard, nullptr);
  for (int round = 0; round < 2; ++round) {
    // The workers' successive barriers.
    std::vector<absl::StatusOr<std::vector<double>>> got(kWorkers);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w) {
      threads.emplace_back([&, w] {
        got[w] = shard->Barrier(w, absl::StrCat("eval/", round), {1.0 * w, 10.0 * w + round, 0.5});
      });
    }
    for (std::thread& t : threads) t.join();
    for (int w = 0; w < kWorkers; ++w) {
      ASSERT_TRUE(got[w].ok()) << got[w].status();
      EXPECT_EQ(*got[w], (std::vector<double>{3.0, 30.0 + 3 * round, 1.5})) << "worker " << w;
    }
  }
  // No values at all is a plain rendezvous.
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<std::vector<double>>> got(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] { got[w] = shard->Barrier(w, "end", {}); });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(got[w].ok()) << got[w].status();
    EXPECT_TRUE(got[w]->empty());
  }
}

TEST(ShardBarrierTest, RejectsUnknownWorkers) {
  absl::StatusOr<std::unique_ptr<Shard>> created = Shard::Create(Options(2, Bsp(), Hyper(0.1f)));
  ASSERT_TRUE(created.ok());
  // Before any registration, and for ids outside the job.
  EXPECT_EQ((*created)->Barrier(0, "b", {1}).status().code(), absl::StatusCode::kInvalidArgument);
  ps::RegisterResponse r;
  ASSERT_TRUE((*created)->Register(Registration(0, 2), &r).ok());
  EXPECT_EQ((*created)->Barrier(2, "b", {1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*created)->Barrier(1, "b", {1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*created)->health().ok());
}

TEST(ShardBarrierTest, MissingWorkerAbortsTheJobNamingIt) {
  constexpr int kWorkers = 3;
  PsShardOptions options = Options(kWorkers, Bsp(), Hyper(0.1f));
  options.timeout = kShortTimeout;
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);
  const absl::Time start = absl::Now();
  std::vector<absl::StatusOr<std::vector<double>>> got(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] { got[w] = shard->Barrier(w, "eval/0", {1.0}); });
  }
  for (std::thread& t : threads) t.join();
  const absl::Duration elapsed = absl::Now() - start;
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(got[w].status().code(), absl::StatusCode::kAborted) << got[w].status();
    EXPECT_THAT(got[w].status().message(), HasSubstr("worker(s) 2 did not reach barrier 'eval/0'"));
  }
  EXPECT_GE(elapsed, kShortTimeout);
  EXPECT_LT(elapsed, kPrompt);
  EXPECT_EQ(shard->health().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(shard->health().message(), HasSubstr("worker(s) 2"));
  // The late worker is told too, at once.
  EXPECT_EQ(shard->Barrier(2, "eval/0", {1.0}).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(shard->WaitUntilDone().code(), absl::StatusCode::kAborted);
}

// The protocol's barrier names, through the shard.

TEST(ShardProtocolTest, MadeUpBarriersFailAtOnceAndChangeNothing) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  const absl::Time start = absl::Now();
  absl::Status s = shard->Barrier(0, "foo", {1.0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "worker 0: 'foo' is not a barrier of the protocol (end, eval/N, checkpoint/N)");
  EXPECT_EQ(shard->Barrier(0, "eval/x", {1.0}).status().code(), absl::StatusCode::kInvalidArgument);
  s = shard->Barrier(1, "eval/3", {1.0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "worker 1 entered barrier 'eval/3', its next barrier is number 0");
  EXPECT_LT(absl::Now() - start, kPrompt);
  EXPECT_TRUE(shard->health().ok());
  // The real barrier 0 sums only what the real calls bring.
  std::vector<absl::StatusOr<std::vector<double>>> got(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] { got[w] = shard->Barrier(w, "checkpoint/0", {1.0 + w}); });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(got[w].ok()) << got[w].status();
    EXPECT_EQ(*got[w], std::vector<double>{3.0});
  }
  EXPECT_TRUE(shard->health().ok());
}

}  // namespace
}  // namespace shard_test
}  // namespace ringside
