// Tests of the parameter-server shard as the coordinator of its parts, without
// sockets: creation, BSP / SSP / ASP steps against the closed-form SGD answer, rejected
// input, non-finite gradients, faults (bounded waits that name the culprit) and pulls
// the protocol does not allow. Each part has its own test file too (membership_test,
// shard_chunk_test, ordered_sum_test, barrier_table_test, step_records_test), which
// also holds the shard-level tests of that part's concern.
#include "ps_server/shard.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard_test_util.h"

namespace ringside {
namespace shard_test {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------
// Creation and registration.

TEST(ShardCreateTest, RejectsBadOptions) {
  PsShardOptions o = Options(2, Bsp(), Hyper(0.1f));
  o.num_workers = 0;
  EXPECT_EQ(Shard::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(2, Bsp(), Hyper(0.1f));
  o.shard = 2;
  EXPECT_EQ(Shard::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(2, Bsp(), Hyper(0.1f));
  o.chunk_bytes = 6;
  EXPECT_EQ(Shard::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(2, Bsp(), Hyper(-0.1f));
  EXPECT_EQ(Shard::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(2, Bsp(), Hyper(0.1f, /*momentum=*/1.0f));
  EXPECT_EQ(Shard::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Shard::Create(Options(2, Bsp(), Hyper(0.1f))).ok());
}

// ---------------------------------------------------------------------------------
// BSP.

TEST(ShardBspTest, SumsTheWorkersGradientsChunkByChunk) {
  const SgdHyper hyper = Hyper(0.5f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  const std::vector<float> p0 = InitialParams(kSliceSize);
  const std::vector<float> g0 = Gradient(kSliceSize, 0, 0);
  const std::vector<float> g1 = Gradient(kSliceSize, 1, 0);

  // Both workers start from worker 0's parameters.
  for (int w = 0; w < 2; ++w) {
    absl::StatusOr<std::vector<float>> start = ServeSlice(*shard, w, 0);
    ASSERT_TRUE(start.ok()) << start.status();
    EXPECT_EQ(*start, p0);
  }

  // Worker 0 pushes everything; nothing of step 1 is ready for it, and worker 1, who
  // has not pushed step 0, may not ask for step 1 at all.
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, g0).ok());
  for (int64_t k = 0; k < kNumChunks; ++k) {
    EXPECT_FALSE(Ready(*shard, 0, 1, k)) << "chunk " << k;
    EXPECT_TRUE(Refused(*shard, 1, 1, k)) << "chunk " << k;
  }
  // Worker 1 pushes chunk 1 only: exactly that chunk is updated (pipelining).
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 1, g1).ok());
  EXPECT_FALSE(Ready(*shard, 0, 1, 0));
  EXPECT_TRUE(Ready(*shard, 0, 1, 1));
  EXPECT_FALSE(Ready(*shard, 0, 1, 2));
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 0, g1).ok());
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 2, g1).ok());

  // p1 = p0 - lr * (g0 + g1): the workers' gradients are summed, not averaged again.
  std::vector<double> want = ToDouble(p0);
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  for (int w = 0; w < 2; ++w) {
    for (int64_t k = 0; k < kNumChunks; ++k) EXPECT_TRUE(Ready(*shard, w, 1, k));
    absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, w, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(*got, want);
  }
  // The step-0 parameters are gone.
  ps::Chunk chunk;
  EXPECT_EQ(shard->ServeIfReady(0, 0, ps::PARAMS, 0, &chunk).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ShardBspTest, MomentumAndWeightDecayOverTwoSteps) {
  const SgdHyper hyper = Hyper(0.1f, /*momentum=*/0.9f, /*weight_decay=*/0.01f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  std::vector<double> buf(kSliceSize, 0.0);
  for (int64_t step = 0; step < 2; ++step) {
    // Worker 1 first this time: the order of arrival does not matter.
    ASSERT_TRUE(PushSlice(*shard, 1, step, ps::GRADIENTS, Gradient(kSliceSize, 1, step)).ok());
    ASSERT_TRUE(PushSlice(*shard, 0, step, ps::GRADIENTS, Gradient(kSliceSize, 0, step)).ok());
    SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, step), &want, &buf);
    for (int w = 0; w < 2; ++w) {
      absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, w, step + 1);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectNear(*got, want);
    }
    // The carried momentum is the optimizer state a checkpoint pulls.
    absl::StatusOr<std::vector<float>> state =
        ServeSlice(*shard, 0, step + 1, ps::OPTIMIZER_STATE);
    ASSERT_TRUE(state.ok()) << state.status();
    ExpectNear(*state, buf);
  }
}

TEST(ShardBspTest, ResumesFromPushedParamsAndOptimizerState) {
  const SgdHyper hyper = Hyper(0.1f, /*momentum=*/0.5f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  constexpr int64_t kResume = 5;
  std::vector<float> m0(kSliceSize);
  for (int64_t i = 0; i < kSliceSize; ++i) m0[i] = 0.5f - 0.125f * static_cast<float>(i);
  ASSERT_TRUE(PushSlice(*shard, 0, kResume, ps::OPTIMIZER_STATE, m0).ok());
  Initialise(*shard, kResume);

  absl::StatusOr<std::vector<float>> start = ServeSlice(*shard, 1, kResume);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(*start, InitialParams(kSliceSize));
  // Steps before the resume point are not the shard's.
  EXPECT_EQ(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).code(),
            absl::StatusCode::kFailedPrecondition);

  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(PushSlice(*shard, w, kResume, ps::GRADIENTS, Gradient(kSliceSize, w, kResume)).ok());
  }
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  std::vector<double> buf = ToDouble(m0);
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, kResume), &want, &buf);
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, kResume + 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
  absl::StatusOr<std::vector<float>> state = ServeSlice(*shard, 0, kResume + 1, ps::OPTIMIZER_STATE);
  ASSERT_TRUE(state.ok()) << state.status();
  ExpectNear(*state, buf);
}

// Threads as workers, over worker counts x slice sizes x chunk sizes: every worker
// pushes, then blocks in Serve for the next step's parameters, for three steps of SGD
// with momentum. Every worker must see the closed-form parameters of every step.
class ShardBspThreadsTest
    : public ::testing::TestWithParam<std::tuple<int, int64_t, int64_t>> {};

TEST_P(ShardBspThreadsTest, EveryWorkerSeesTheClosedFormAfterEveryStep) {
  const auto [num_workers, num_params, chunk_bytes] = GetParam();
  const SgdHyper hyper = Hyper(0.05f, /*momentum=*/0.9f);
  PsShardOptions options = Options(num_workers, Bsp(), hyper);
  options.shard = 0;
  options.num_shards = 1;
  options.chunk_bytes = chunk_bytes;
  std::unique_ptr<Shard> shard = NewShard(options, num_params);
  ASSERT_NE(shard, nullptr);
  ASSERT_EQ(shard->slice().size, num_params);
  ASSERT_EQ(shard->num_chunks(), NumChunks(num_params, chunk_bytes / 4));
  Initialise(*shard);

  constexpr int64_t kSteps = 3;
  std::vector<int> everyone;
  for (int w = 0; w < num_workers; ++w) everyone.push_back(w);
  std::vector<std::vector<double>> want(kSteps + 1);
  want[0] = ToDouble(InitialParams(num_params));
  std::vector<double> buf(num_params, 0.0);
  for (int64_t s = 0; s < kSteps; ++s) {
    want[s + 1] = want[s];
    SgdStep(hyper, SumOfGradients(num_params, everyone, s), &want[s + 1], &buf);
  }

  std::vector<std::vector<std::vector<float>>> got(num_workers);
  std::vector<absl::Status> status(num_workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < num_workers; ++w) {
    threads.emplace_back([&, w] {
      for (int64_t s = 0; s < kSteps; ++s) {
        absl::Status st = PushSlice(*shard, w, s, ps::GRADIENTS, Gradient(num_params, w, s));
        if (!st.ok()) {
          status[w] = st;
          return;
        }
        absl::StatusOr<std::vector<float>> params = ServeSlice(*shard, w, s + 1);
        if (!params.ok()) {
          status[w] = params.status();
          return;
        }
        got[w].push_back(*std::move(params));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < num_workers; ++w) {
    SCOPED_TRACE(absl::StrCat("worker ", w));
    ASSERT_TRUE(status[w].ok()) << status[w];
    ASSERT_EQ(got[w].size(), kSteps);
    for (int64_t s = 0; s < kSteps; ++s) {
      SCOPED_TRACE(absl::StrCat("step ", s + 1));
      ExpectNear(got[w][s], want[s + 1]);
    }
  }
  EXPECT_TRUE(shard->health().ok());
}

INSTANTIATE_TEST_SUITE_P(
    WorkersSizesChunks, ShardBspThreadsTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       ::testing::Values(int64_t{1}, int64_t{5}, int64_t{11}),
                       ::testing::Values(int64_t{4}, int64_t{16})),
    [](const ::testing::TestParamInfo<std::tuple<int, int64_t, int64_t>>& info) {
      return absl::StrCat(std::get<0>(info.param), "workers_", std::get<1>(info.param),
                          "floats_", std::get<2>(info.param), "bytechunks");
    });

// ---------------------------------------------------------------------------------
// ASP and SSP.

TEST(ShardAspTest, AppliesEachPushAtOnceScaledByTheWorkerCount) {
  const SgdHyper hyper = Hyper(0.25f);
  constexpr int kWorkers = 2;
  std::unique_ptr<Shard> shard = NewShard(Options(kWorkers, Asp(), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));

  // Worker 0 pushes step 0: applied at once as p -= lr * N * g0, and worker 0 may go on
  // without worker 1.
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  SgdStep(hyper, SumOfGradients(kSliceSize, {0}, 0, kWorkers), &want, nullptr);
  for (int64_t k = 0; k < kNumChunks; ++k) EXPECT_TRUE(Ready(*shard, 0, 1, k));
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);

  // Worker 0 runs two more steps ahead of worker 1.
  for (int64_t s = 1; s < 3; ++s) {
    ASSERT_TRUE(PushSlice(*shard, 0, s, ps::GRADIENTS, Gradient(kSliceSize, 0, s)).ok());
    SgdStep(hyper, SumOfGradients(kSliceSize, {0}, s, kWorkers), &want, nullptr);
  }
  got = ServeSlice(*shard, 0, 3);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);

  // Worker 1's stale step-0 gradient lands on whatever the parameters are now.
  ASSERT_TRUE(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  SgdStep(hyper, SumOfGradients(kSliceSize, {1}, 0, kWorkers), &want, nullptr);
  got = ServeSlice(*shard, 1, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);

  // A push of a step that is not the worker's current one is refused, and changes
  // nothing.
  EXPECT_EQ(PushSlice(*shard, 1, 5, ps::GRADIENTS, Gradient(kSliceSize, 1, 5)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).code(),
            absl::StatusCode::kFailedPrecondition);
  got = ServeSlice(*shard, 1, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
}

TEST(ShardSspTest, ServesOnlyWithinTheStalenessBound) {
  const SgdHyper hyper = Hyper(0.25f);
  constexpr int kWorkers = 2;
  std::unique_ptr<Shard> shard = NewShard(Options(kWorkers, Ssp(1), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));

  // Worker 0 pushes step 0 (applied at once, scaled by N) and may start step 1: the
  // slowest worker has pushed 0 >= 1 - 1 steps.
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  SgdStep(hyper, SumOfGradients(kSliceSize, {0}, 0, kWorkers), &want, nullptr);
  for (int64_t k = 0; k < kNumChunks; ++k) EXPECT_TRUE(Ready(*shard, 0, 1, k));
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);

  // After its step 1, worker 0 would start step 2 while worker 1 pushed 0 < 2 - 1.
  ASSERT_TRUE(PushSlice(*shard, 0, 1, ps::GRADIENTS, Gradient(kSliceSize, 0, 1)).ok());
  SgdStep(hyper, SumOfGradients(kSliceSize, {0}, 1, kWorkers), &want, nullptr);
  for (int64_t k = 0; k < kNumChunks; ++k) EXPECT_FALSE(Ready(*shard, 0, 2, k));

  // A blocked Serve is released by the slow worker's push. A partial push (two of
  // three chunks) does not count as a pushed step.
  std::future<absl::StatusOr<std::vector<float>>> waiting =
      std::async(std::launch::async, [&] { return ServeSlice(*shard, 0, 2); });
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 2, Gradient(kSliceSize, 1, 0)).ok());
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 1, Gradient(kSliceSize, 1, 0)).ok());
  EXPECT_FALSE(Ready(*shard, 0, 2, 0));
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 0, Gradient(kSliceSize, 1, 0)).ok());
  SgdStep(hyper, SumOfGradients(kSliceSize, {1}, 0, kWorkers), &want, nullptr);
  ASSERT_EQ(waiting.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
  got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
  for (int64_t k = 0; k < kNumChunks; ++k) EXPECT_TRUE(Ready(*shard, 0, 2, k));
  // Step 3 is not worker 0's to ask for before it pushed step 2.
  EXPECT_TRUE(Refused(*shard, 0, 3, 0));
  // The slow worker itself is never held back.
  EXPECT_TRUE(Ready(*shard, 1, 1, 0));
}

TEST(ShardSspTest, ZeroStalenessWaitsForEveryWorkersPush) {
  const SgdHyper hyper = Hyper(0.5f);
  constexpr int kWorkers = 3;
  std::unique_ptr<Shard> shard = NewShard(Options(kWorkers, Ssp(0), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  for (int w = 0; w < kWorkers; ++w) {
    // The start (step 0) is always served.
    EXPECT_TRUE(Ready(*shard, w, 0, 0));
  }
  for (int w = 0; w < kWorkers; ++w) {
    if (w > 0) {
      EXPECT_FALSE(Ready(*shard, 0, 1, 0)) << "after " << w << " pushes";
    }
    ASSERT_TRUE(PushSlice(*shard, w, 0, ps::GRADIENTS, Gradient(kSliceSize, w, 0)).ok());
    SgdStep(hyper, SumOfGradients(kSliceSize, {w}, 0, kWorkers), &want, nullptr);
  }
  for (int w = 0; w < kWorkers; ++w) {
    absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, w, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(*got, want);
  }
}

// ---------------------------------------------------------------------------------
// Rejected input: the right code, no side effect, and the shard goes on working.

TEST(ShardErrorsTest, RejectedChunksLeaveTheShardWorking) {
  const SgdHyper hyper = Hyper(0.5f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  const std::vector<float> g0 = Gradient(kSliceSize, 0, 0);
  const std::vector<float> g1 = Gradient(kSliceSize, 1, 0);
  const std::vector<float> junk(2 * kChunkFloats, 1000.0f);
  // Chunk 1, a full one; chunk 0 (offset 0) is the short one.
  const int64_t full = ChunkOf(kSliceSize, kChunkFloats, 1).offset;
  ASSERT_EQ(ChunkOf(kSliceSize, kChunkFloats, 0).size, kChunkFloats - 1);

  auto accept = [&](ps::Chunk chunk) {
    const absl::StatusOr<int64_t> checked = shard->CheckChunk(chunk, -1);
    absl::Status s = shard->Accept(&chunk, static_cast<int64_t>(chunk.ByteSizeLong()));
    // CheckChunk and Accept agree on malformed chunks.
    if (!checked.ok()) {
      EXPECT_EQ(checked.status().code(), s.code()) << s;
    }
    return s.code();
  };
  using absl::StatusCode;
  // Unknown workers.
  EXPECT_EQ(accept(MakeChunk(2, 0, ps::GRADIENTS, full, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(-1, 0, ps::GRADIENTS, full, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  // Payload not the chunk's exact length: short, long (bigger than a chunk), empty, and
  // a full-size payload on the short chunk.
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, full, junk.data(), kChunkFloats - 1)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, full, junk.data(), 2 * kChunkFloats)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, full, junk.data(), 0)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, 0, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  {
    ps::Chunk odd = MakeChunk(0, 0, ps::GRADIENTS, full, junk.data(), kChunkFloats);
    odd.mutable_data()->push_back('x');  // Not even whole floats.
    EXPECT_EQ(accept(odd), StatusCode::kInvalidArgument);
  }
  // Offsets off the grid (2; 4 is where a start-aligned grid would have chunk 1) or
  // outside the slice.
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, 2, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, 4, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, kSliceSize, junk.data(), kChunkFloats)),
            StatusCode::kOutOfRange);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, 100, junk.data(), kChunkFloats)),
            StatusCode::kOutOfRange);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, -4, junk.data(), kChunkFloats)),
            StatusCode::kOutOfRange);
  // Negative step, unknown kind.
  EXPECT_EQ(accept(MakeChunk(0, -1, ps::GRADIENTS, full, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, static_cast<ps::TensorKind>(7), full, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  // A chunk of worker 1 in worker 0's stream.
  EXPECT_EQ(shard->CheckChunk(MakeChunk(1, 0, ps::GRADIENTS, full, g1.data() + full, kChunkFloats), 0)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  // Only worker 0 sets parameters or optimizer state.
  EXPECT_EQ(accept(MakeChunk(1, 0, ps::PARAMS, full, junk.data(), kChunkFloats)),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(accept(MakeChunk(1, 0, ps::OPTIMIZER_STATE, full, junk.data(), kChunkFloats)),
            StatusCode::kPermissionDenied);
  // Chunks that do not exist.
  {
    ps::Chunk out;
    EXPECT_EQ(shard->ServeIfReady(0, 0, ps::PARAMS, kNumChunks, &out).status().code(),
              StatusCode::kOutOfRange);
    EXPECT_EQ(shard->ServeIfReady(0, 0, ps::PARAMS, -1, &out).status().code(),
              StatusCode::kOutOfRange);
  }
  // A step ahead of the shard.
  EXPECT_EQ(accept(MakeChunk(0, 1, ps::GRADIENTS, full, junk.data(), kChunkFloats)),
            StatusCode::kFailedPrecondition);
  // The same chunk twice: the second is refused, not added again.
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 0, g0).ok());
  EXPECT_EQ(PushChunk(*shard, 0, 0, ps::GRADIENTS, 0, g0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, 0, junk.data(), kChunkFloats - 1)),
            StatusCode::kFailedPrecondition);
  EXPECT_FALSE(Ready(*shard, 0, 1, 0));
  EXPECT_TRUE(shard->health().ok());

  // The valid step completes with exactly the valid gradients.
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 1, g0).ok());
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 2, g0).ok());
  ASSERT_TRUE(PushSlice(*shard, 1, 0, ps::GRADIENTS, g1).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  for (int w = 0; w < 2; ++w) {
    absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, w, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(*got, want);
  }

  // Once training started: a repeated push of a finished step and a late
  // initialisation are refused; step 1 still completes.
  EXPECT_EQ(PushChunk(*shard, 1, 0, ps::GRADIENTS, 0, g1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(PushChunk(*shard, 0, 0, ps::PARAMS, 0, std::vector<float>(kSliceSize, 1000.0f)).code(),
            StatusCode::kFailedPrecondition);
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(PushSlice(*shard, w, 1, ps::GRADIENTS, Gradient(kSliceSize, w, 1)).ok());
  }
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, 1), &want, nullptr);
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 1, 2);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
  EXPECT_TRUE(shard->health().ok());
}

TEST(ShardErrorsTest, GradientsBeforeInitialisationAreRefused) {
  const SgdHyper hyper = Hyper(0.5f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  const std::vector<float> g0 = Gradient(kSliceSize, 0, 0);
  absl::Status s = PushSlice(*shard, 0, 0, ps::GRADIENTS, g0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("initialised"));
  // Nothing is served before initialisation.
  EXPECT_FALSE(Ready(*shard, 1, 0, 0));
  // A partial initialisation is not one either.
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::PARAMS, 0, InitialParams(kSliceSize)).ok());
  EXPECT_FALSE(Ready(*shard, 1, 0, 0));
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::PARAMS, 1, InitialParams(kSliceSize)).ok());
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::PARAMS, 2, InitialParams(kSliceSize)).ok());
  EXPECT_TRUE(Ready(*shard, 1, 0, 0));

  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(PushSlice(*shard, w, 0, ps::GRADIENTS, Gradient(kSliceSize, w, 0)).ok());
  }
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
}

// A PARAMS chunk sent again does not count as another chunk of the initialisation.
TEST(ShardErrorsTest, RepeatedInitialisationChunkDoesNotCompleteIt) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::PARAMS, 0, InitialParams(kSliceSize)).ok());
  }
  EXPECT_FALSE(Ready(*shard, 1, 0, 2));
}

// A worker may not start pushing step t + 1 before its push of step t is complete.
TEST(ShardErrorsTest, PushOfTheNextStepBeforeFinishingThisOneIsRefused) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  const std::vector<float> g0 = Gradient(kSliceSize, 0, 0);
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 0, g0).ok());
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 1, g0).ok());
  ASSERT_TRUE(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  absl::Status s = PushChunk(*shard, 0, 1, ps::GRADIENTS, 0, Gradient(kSliceSize, 0, 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  // Finishing step 0 still works and gives the closed form.
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 2, g0).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(Hyper(0.5f), SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
}

// ---------------------------------------------------------------------------------
// Faults: bounded waits, errors that name the culprit.

TEST(ShardFaultTest, BspTimeoutNamesTheWorkerThatDidNotPush) {
  PsShardOptions options = Options(2, Bsp(), Hyper(0.1f));
  options.timeout = kShortTimeout;
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  const absl::Time start = absl::Now();
  ps::Chunk chunk;
  absl::Status s = shard->Serve(0, 1, ps::PARAMS, 0, &chunk);
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker(s) 1 did not push step 0"));
  EXPECT_GE(elapsed, kShortTimeout);
  EXPECT_LT(elapsed, kPrompt);
  EXPECT_EQ(shard->health().code(), absl::StatusCode::kAborted);
  // Everyone else is refused from now on, at once.
  EXPECT_EQ(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(shard->ServeIfReady(1, 1, ps::PARAMS, 0, &chunk).status().code(),
            absl::StatusCode::kAborted);
  ps::RegisterResponse r;
  EXPECT_EQ(shard->Register(Registration(1, 2), &r).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(shard->WaitUntilDone().code(), absl::StatusCode::kAborted);
}

TEST(ShardFaultTest, SspTimeoutNamesTheStraggler) {
  PsShardOptions options = Options(2, Ssp(0), Hyper(0.1f));
  options.timeout = kShortTimeout;
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  ps::Chunk chunk;
  absl::Status s = shard->Serve(0, 1, ps::PARAMS, 0, &chunk);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker(s) 1 stayed more than 0 steps behind worker 0"));
}

TEST(ShardFaultTest, MissingInitialisationTimesOutNamingWorker0) {
  PsShardOptions options = Options(2, Bsp(), Hyper(0.1f));
  options.timeout = kShortTimeout;
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);
  ps::Chunk chunk;
  absl::Status s = shard->Serve(1, 0, ps::PARAMS, 0, &chunk);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker 0 did not initialise"));
}

TEST(ShardFaultTest, LostWorkerReleasesEveryBlockedCall) {
  // A long timeout: only the loss may release the waits.
  PsShardOptions options = Options(2, Bsp(), Hyper(0.1f));
  options.timeout = absl::Seconds(30);
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());

  auto serve = std::async(std::launch::async, [&] {
    ps::Chunk chunk;
    return shard->Serve(0, 1, ps::PARAMS, 0, &chunk);
  });
  auto barrier = std::async(std::launch::async,
                            [&] { return shard->Barrier(0, "eval/0", {1.0}).status(); });
  auto done = std::async(std::launch::async, [&] { return shard->WaitUntilDone(); });
  EXPECT_EQ(serve.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);

  const absl::Time start = absl::Now();
  shard->WorkerLost(1, "its stream broke during step 0");
  for (auto* f : {&serve, &barrier, &done}) {
    ASSERT_EQ(f->wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
    absl::Status s = f->get();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_THAT(s.message(), HasSubstr("worker 1 lost: its stream broke during step 0"));
  }
  EXPECT_LT(absl::Now() - start, kPrompt);
  EXPECT_EQ(shard->health().code(), absl::StatusCode::kAborted);
  // The first reason sticks.
  shard->WorkerLost(0, "something else");
  EXPECT_THAT(shard->health().message(), HasSubstr("worker 1 lost"));
}

// ---------------------------------------------------------------------------------
// Non-finite gradients: refused with the worker, the step and the element range, and
// nothing of them applied, on each path a push takes.

TEST(ShardNonFiniteTest, RefusesNaNAndInfPushesAndAppliesNothing) {
  for (SyncPolicy sync : {Bsp(), Asp()}) {
    SCOPED_TRACE(SyncPolicyText(sync));
    std::unique_ptr<Shard> shard = NewShard(Options(3, sync, Hyper(0.5f, 0.9f)));
    ASSERT_NE(shard, nullptr);
    Initialise(*shard);
    const ps::ShardStats before = shard->Stats();
    // Worker 2 (BSP: ahead of its turn, would be parked) pushes a NaN in chunk 1, whose
    // floats are [3, 7) of the slice, [13, 17) of the parameters.
    std::vector<float> g = Gradient(kSliceSize, 2, 0);
    g[5] = std::nanf("");
    absl::Status s = PushChunk(*shard, 2, 0, ps::GRADIENTS, 1, g);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "worker 2 pushed a non-finite gradient in step 0: elements [13, 17) of the "
              "parameters (first at 15: nan); push refused, nothing applied");
    // Worker 0 (its turn, summed in place / stepped at once) pushes an infinity.
    g = Gradient(kSliceSize, 0, 0);
    g[3] = -INFINITY;
    s = PushChunk(*shard, 0, 0, ps::GRADIENTS, 1, g);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("worker 0 pushed a non-finite gradient in step 0: "
                                       "elements [13, 17) of the parameters (first at 13: -inf)"));
    // Nothing changed: the parameters, the statistics, the health.
    absl::StatusOr<std::vector<float>> params = ServeSlice(*shard, 1, 0);
    ASSERT_TRUE(params.ok()) << params.status();
    EXPECT_EQ(*params, InitialParams(kSliceSize));
    EXPECT_EQ(shard->Stats().bytes_in(), before.bytes_in());
    EXPECT_EQ(shard->Stats().steps_completed(), 0);
    EXPECT_TRUE(shard->health().ok());
    // The same workers' finite pushes of the step are taken as if nothing happened.
    for (int w : {2, 1, 0}) {
      ASSERT_TRUE(PushSlice(*shard, w, 0, ps::GRADIENTS, Gradient(kSliceSize, w, 0)).ok());
    }
    std::vector<double> want = ToDouble(InitialParams(kSliceSize));
    std::vector<double> carried(kSliceSize, 0.0);
    if (sync.mode == SyncMode::kBsp) {
      SgdStep(Hyper(0.5f, 0.9f), SumOfGradients(kSliceSize, {0, 1, 2}, 0), &want, &carried);
    } else {
      for (int w : {2, 1, 0}) {  // Each push its own step, with the 1/N undone.
        SgdStep(Hyper(0.5f, 0.9f), SumOfGradients(kSliceSize, {w}, 0, 3.0), &want, &carried);
      }
    }
    params = ServeSlice(*shard, 0, 1);
    ASSERT_TRUE(params.ok()) << params.status();
    ExpectNear(*params, want);
  }
}

// ---------------------------------------------------------------------------------
// Calls the protocol does not allow fail that call at once, blame nobody and change
// nothing.

TEST(ShardProtocolTest, PullOfAFutureStepFailsAtOnceAndTheJobGoesOn) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 1, 5);
  EXPECT_LT(absl::Now() - start, kPrompt);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(got.status().message(),
            "worker 1 asked for the parameters of step 5 (chunk 0), but has pushed that chunk "
            "only for no step");
  // Step 1 while step 0 is not pushed: the same.
  ASSERT_TRUE(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  got = ServeSlice(*shard, 1, 2);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(got.status().message(), HasSubstr("but has pushed that chunk only through step 0"));
  EXPECT_TRUE(shard->health().ok());
  EXPECT_EQ(shard->Stats().steps_completed(), 0);
  // The step completes as usual.
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(Hyper(0.5f), SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  for (int w : {0, 1}) {
    got = ServeSlice(*shard, w, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(*got, want);
  }
}

}  // namespace
}  // namespace shard_test
}  // namespace ringside
