// Membership alone (registration, sessions, clocks, goodbye, lost and rejoining
// workers), then the shard's registration, goodbye and WaitUntilDone through it.
#include "ps_server/membership.h"

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard.h"
#include "ps_server/shard_test_util.h"

namespace ringside {
namespace shard_test {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------
// Membership alone.

TEST(MembershipTest, RegistrationDrawsASessionAndRefusesATakenId) {
  Membership m(2, /*elastic=*/false);
  EXPECT_FALSE(m.any_registered());
  EXPECT_EQ(m.CheckWorker(2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.CheckWorker(0).code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<bool> rejoin = m.Register(0);
  ASSERT_TRUE(rejoin.ok()) << rejoin.status();
  EXPECT_FALSE(*rejoin);
  EXPECT_TRUE(m.any_registered());
  const uint64_t session = m.session(0);
  EXPECT_NE(session, 0u);
  EXPECT_EQ(m.Register(0).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(m.session(0), session);  // The first holder keeps it.
  EXPECT_TRUE(m.CheckSession(0, session).ok());
  EXPECT_EQ(m.CheckSession(0, session + 1).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(m.CheckSession(1, 0).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MembershipTest, ClocksMoveWhenAPushIsCompleteAndGoodbyeWaitsForIt) {
  Membership m(2, /*elastic=*/false);
  ASSERT_TRUE(m.Register(0).ok());
  ASSERT_TRUE(m.Register(1).ok());
  m.StartAt(3);
  EXPECT_TRUE(m.CheckPush(0, 3).ok());
  EXPECT_EQ(m.CheckPush(0, 4).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(m.ChunkPushed(0, 3, 2));
  EXPECT_EQ(m.Goodbye(0).code(), absl::StatusCode::kFailedPrecondition);  // Mid-push.
  EXPECT_TRUE(m.ChunkPushed(0, 3, 2));
  EXPECT_EQ(m.clocks()[0], 4);
  EXPECT_EQ(m.MinClock(), 3);
  EXPECT_TRUE(m.Goodbye(0).ok());
  EXPECT_EQ(m.Goodbye(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.CheckSession(0, m.session(0)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(m.AllGone());
  EXPECT_TRUE(m.Goodbye(1).ok());
  EXPECT_TRUE(m.AllGone());
}

TEST(MembershipTest, ElasticLossRegistrationAgainAndRejoin) {
  Membership m(3, /*elastic=*/true);
  for (int w = 0; w < 3; ++w) ASSERT_TRUE(m.Register(w).ok());
  m.StartAt(0);
  const uint64_t old_session = m.session(1);
  EXPECT_TRUE(m.ToDrop({1}, old_session + 1).empty());  // A stale stream drops nobody.
  const std::vector<int> dropped = m.ToDrop({1}, old_session);
  EXPECT_EQ(dropped, std::vector<int>{1});
  EXPECT_EQ(m.LostWith(dropped), std::vector<int>{1});
  m.MarkLost(dropped);
  EXPECT_EQ(m.live(), 2);
  EXPECT_TRUE(m.ToDrop({1}, 0).empty());  // Dropped already.
  EXPECT_EQ(m.CheckSession(1, old_session).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.CheckPush(1, 0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.CheckPull(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.CountingIn(4), 2);
  // Registered again: joining until its first pull.
  absl::StatusOr<bool> rejoin = m.Register(1);
  ASSERT_TRUE(rejoin.ok()) << rejoin.status();
  EXPECT_TRUE(*rejoin);
  EXPECT_TRUE(m.CheckSession(1, m.session(1)).ok());
  EXPECT_THAT(m.CheckPull(1).message(), HasSubstr("has not rejoined"));
  EXPECT_EQ(m.RejoinOf(1, 5), Membership::Rejoin::kJoin);
  m.Rejoined(1, 5);
  EXPECT_EQ(m.live(), 3);
  EXPECT_EQ(m.CountingIn(4), 2);
  EXPECT_EQ(m.CountingIn(5), 3);
  EXPECT_FALSE(m.TakesPart(1, 5));
  EXPECT_TRUE(m.TakesPart(1, 6));
  EXPECT_EQ(m.StartOf(1, 0), 5);
  EXPECT_EQ(m.StartOf(0, 2), 2);
  // Pushed nothing since: it may move to a later step, not to an earlier one.
  EXPECT_EQ(m.RejoinOf(1, 7), Membership::Rejoin::kMove);
  EXPECT_EQ(m.RejoinOf(1, 4), Membership::Rejoin::kNone);
  EXPECT_EQ(m.RejoinOf(0, 7), Membership::Rejoin::kNone);
}

TEST(MembershipTest, WithoutElasticityALostWorkerCannotRegisterAgain) {
  Membership m(2, /*elastic=*/false);
  ASSERT_TRUE(m.Register(1).ok());
  m.MarkLost(m.ToDrop({1}, 0));
  EXPECT_EQ(m.Register(1).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(m.RejoinOf(1, 3), Membership::Rejoin::kNone);
}

TEST(MembershipTest, WhereAreNamesTheKnownAddresses) {
  Membership m(3, /*elastic=*/false);
  m.NotePeer(1, "ipv4:10.0.0.2:51234");
  EXPECT_EQ(m.WhereAre({0, 1}), " (worker 1 at ipv4:10.0.0.2:51234)");
  EXPECT_EQ(m.WhereAre({0, 2}), "");
}

// ---------------------------------------------------------------------------------
// Through the shard: registration, goodbye, done.

TEST(ShardRegisterTest, ReportsLayoutAndInitialisation) {
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(Options(3, Ssp(3), Hyper(0.1f)));
  ASSERT_TRUE(shard.ok()) << shard.status();
  ps::RegisterResponse r;
  ASSERT_TRUE((*shard)->Register(Registration(1, 3), &r).ok());
  EXPECT_EQ(r.shard(), kShard);
  EXPECT_EQ(r.num_shards(), kNumShards);
  EXPECT_EQ(r.offset(), kSliceOffset);
  EXPECT_EQ(r.size(), kSliceSize);
  EXPECT_EQ(r.chunk_floats(), kChunkFloats);
  EXPECT_EQ(r.sync(), "ssp");
  EXPECT_EQ(r.staleness(), 3);
  EXPECT_FALSE(r.initialized());
  EXPECT_EQ((*shard)->num_chunks(), kNumChunks);
  EXPECT_EQ((*shard)->slice().offset, kSliceOffset);
  EXPECT_EQ((*shard)->slice().size, kSliceSize);

  const uint64_t session1 = r.session();
  EXPECT_NE(session1, 0u);
  ASSERT_TRUE((*shard)->Register(Registration(0, 3), &r).ok());
  EXPECT_FALSE(r.initialized());
  EXPECT_NE(r.session(), session1);  // Drawn per registration.
  Initialise(**shard, /*step=*/7);
  // A worker that registers after the start learns where training stands.
  ASSERT_TRUE((*shard)->Register(Registration(2, 3), &r).ok());
  EXPECT_TRUE(r.initialized());
  EXPECT_EQ(r.step(), 7);
  // Sessions: only the holder's passes.
  EXPECT_TRUE((*shard)->CheckSession(1, session1).ok());
  EXPECT_EQ((*shard)->CheckSession(1, session1 + 1).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*shard)->CheckSession(1, 0).code(), absl::StatusCode::kPermissionDenied);
}

// A second registration of a registered id is refused; the first holder keeps its id,
// its session and its place in training.
TEST(ShardRegisterTest, RefusesDuplicateWorkerIdsLeavingTheFirstHolderAlone) {
  absl::StatusOr<std::unique_ptr<Shard>> created = Shard::Create(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_TRUE(created.ok()) << created.status();
  Shard& shard = **created;
  ps::RegisterResponse first, r0, dup;
  ASSERT_TRUE(shard.Register(Registration(0, 2), &r0).ok());
  ASSERT_TRUE(shard.Register(Registration(1, 2), &first).ok());
  Initialise(shard);
  const absl::Status s = shard.Register(Registration(1, 2), &dup);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(), "worker id 1 is registered already");
  EXPECT_EQ(dup.session(), 0u);  // Nothing was handed out.
  EXPECT_TRUE(shard.CheckSession(1, first.session()).ok());
  // The first holder trains on: a full step.
  ASSERT_TRUE(PushSlice(shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  ASSERT_TRUE(PushSlice(shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(Hyper(0.5f), SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  absl::StatusOr<std::vector<float>> got = ServeSlice(shard, 1, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
  EXPECT_TRUE(shard.health().ok());
}

TEST(ShardRegisterTest, RejectsMismatchedWorkersAndStaysUsable) {
  absl::StatusOr<std::unique_ptr<Shard>> created = Shard::Create(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_TRUE(created.ok()) << created.status();
  Shard& shard = **created;
  ps::RegisterResponse r;

  ps::RegisterRequest bad = Registration(2, 2);
  EXPECT_EQ(shard.Register(bad, &r).code(), absl::StatusCode::kInvalidArgument);
  bad = Registration(-1, 2);
  EXPECT_EQ(shard.Register(bad, &r).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shard.Register(bad, &r).message(), "unknown worker id -1");
  // Every mismatch gets the same reply, which tells the caller nothing of the shard's
  // configuration (the shard's operator reads the differences on its stderr).
  bad = Registration(0, 3);
  absl::Status s = shard.Register(bad, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "configuration mismatch");
  bad = Registration(0, 2);
  bad.mutable_config()->set_lr(0.5f);
  s = shard.Register(bad, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "configuration mismatch");
  bad = Registration(0, 2);
  bad.set_model("mlp:9-9");
  s = shard.Register(bad, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "configuration mismatch");
  EXPECT_EQ(r.session(), 0u);
  // Fewer parameters than shards cannot be sharded.
  bad = Registration(0, 2, /*num_params=*/1);
  EXPECT_EQ(shard.Register(bad, &r).code(), absl::StatusCode::kInvalidArgument);

  // None of that fixed the layout: the first valid registration does.
  ASSERT_TRUE(shard.Register(Registration(0, 2), &r).ok());
  EXPECT_EQ(r.size(), kSliceSize);
  // A second worker with a different model size is refused.
  bad = Registration(1, 2, kNumParams + 1);
  EXPECT_EQ(shard.Register(bad, &r).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard.Register(bad, &r).message(), "configuration mismatch");
  // Unregistered worker 1 may not push yet.
  Initialise(shard);
  EXPECT_EQ(PushSlice(shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard.CheckWorker(1).code(), absl::StatusCode::kFailedPrecondition);

  // After all of it, a full step works.
  ASSERT_TRUE(shard.Register(Registration(1, 2), &r).ok());
  EXPECT_TRUE(shard.CheckWorker(1).ok());
  ASSERT_TRUE(PushSlice(shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  ASSERT_TRUE(PushSlice(shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(Hyper(0.5f), SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  absl::StatusOr<std::vector<float>> got = ServeSlice(shard, 1, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
  EXPECT_TRUE(shard.health().ok());
}

TEST(ShardDoneTest, WaitUntilDoneReturnsOnceEveryWorkerSaidGoodbye) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.1f)));
  ASSERT_NE(shard, nullptr);
  auto done = std::async(std::launch::async, [&] { return shard->WaitUntilDone(); });
  ASSERT_TRUE(shard->Goodbye(0).ok());
  EXPECT_EQ(shard->Goodbye(0).code(), absl::StatusCode::kFailedPrecondition);  // Once.
  EXPECT_EQ(shard->Goodbye(7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(done.wait_for(std::chrono::milliseconds(150)), std::future_status::timeout);
  ASSERT_TRUE(shard->Goodbye(1).ok());
  ASSERT_EQ(done.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
  EXPECT_TRUE(done.get().ok());
  EXPECT_TRUE(shard->health().ok());
}

TEST(ShardProtocolTest, GoodbyeInTheMiddleOfAPushIsRefused) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 2, Gradient(kSliceSize, 1, 0)).ok());
  absl::Status s = shard->Goodbye(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "worker 1 said goodbye in the middle of pushing step 0");
  EXPECT_TRUE(shard->health().ok());
  // It finishes the step and then may leave.
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 1, Gradient(kSliceSize, 1, 0)).ok());
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 0, Gradient(kSliceSize, 1, 0)).ok());
  EXPECT_TRUE(shard->Goodbye(1).ok());
}

}  // namespace
}  // namespace shard_test
}  // namespace ringside
