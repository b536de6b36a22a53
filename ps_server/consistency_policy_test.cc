// The consistency policies alone, against closed forms: what each push does to a
// chunk, which pushes release which pulls, the SSP bound K, and who is late.
#include "ps_server/consistency_policy.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::unique_ptr<ConsistencyPolicy> Policy(SyncMode mode, int workers, int staleness = 0) {
  return ConsistencyPolicy::Create(SyncPolicy{mode, staleness}, workers);
}

// Pushes worker w's gradient of `step` for chunk 0; fails the test on an error.
PushAction MustPush(const ConsistencyPolicy& p, int w, int64_t step, ChunkClock* clock) {
  absl::StatusOr<PushAction> a = p.OnPush(w, step, 0, clock);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : PushAction{};
}

// ---------------------------------------------------------------------------------
// BSP.

TEST(BspPolicyTest, SumsTheStepsPushesAndTheNthStepsAndReleasesTheChunk) {
  constexpr int kWorkers = 3;
  constexpr int64_t kStart = 5;
  std::unique_ptr<ConsistencyPolicy> p = Policy(SyncMode::kBsp, kWorkers);
  EXPECT_TRUE(p->sums_pushes());
  EXPECT_TRUE(p->replies_borrow());
  EXPECT_EQ(p->StepsNeeded(kStart + 1), ConsistencyPolicy::kNoNeed);
  ChunkClock clock(kWorkers, kStart);
  // The start parameters are served; the next step's are not.
  EXPECT_EQ(p->ReleaseOf(clock, kStart), ChunkRelease::kNow);
  EXPECT_EQ(p->ReleaseOf(clock, kStart + 1), ChunkRelease::kWait);

  // Workers 2, 0, 1 push step 5: the first overwrites the accumulator, the second
  // adds, the third adds and steps.
  PushAction a = MustPush(*p, 2, kStart, &clock);
  EXPECT_TRUE(a.sum && a.first && !a.complete);
  EXPECT_EQ(p->ReleaseOf(clock, kStart + 1), ChunkRelease::kWait);
  a = MustPush(*p, 0, kStart, &clock);
  EXPECT_TRUE(a.sum && !a.first && !a.complete);
  EXPECT_EQ(p->ReleaseOf(clock, kStart + 1), ChunkRelease::kWait);
  EXPECT_EQ(clock.version, kStart);
  a = MustPush(*p, 1, kStart, &clock);
  EXPECT_TRUE(a.sum && !a.first && a.complete);
  EXPECT_EQ(a.scale, 1.0f);
  EXPECT_EQ(clock.version, kStart + 1);
  EXPECT_EQ(clock.summed, 0);
  EXPECT_THAT(clock.pushed, ElementsAre(kStart, kStart, kStart));
  // The update released step 6 to everyone; step 5 is gone for good.
  EXPECT_EQ(p->ReleaseOf(clock, kStart + 1), ChunkRelease::kNow);
  EXPECT_EQ(p->ReleaseOf(clock, kStart), ChunkRelease::kStale);
  EXPECT_EQ(p->ReleaseOf(clock, kStart + 2), ChunkRelease::kWait);

  // The next step starts a new sum.
  a = MustPush(*p, 1, kStart + 1, &clock);
  EXPECT_TRUE(a.sum && a.first && !a.complete);
}

TEST(BspPolicyTest, RefusesADuplicateAndAStepTheChunkIsNotAtWithoutChangingIt) {
  std::unique_ptr<ConsistencyPolicy> p = Policy(SyncMode::kBsp, 2);
  ChunkClock clock(2, 0);
  MustPush(*p, 0, 0, &clock);
  const ChunkClock before = clock;
  absl::StatusOr<PushAction> again = p->OnPush(0, 0, 7, &clock);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.status().message(), "worker 0 pushed chunk 7 of step 0 twice");
  absl::StatusOr<PushAction> ahead = p->OnPush(1, 1, 7, &clock);
  EXPECT_EQ(ahead.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ahead.status().message(), "worker 1 pushed step 1 but chunk 7 is at step 0");
  EXPECT_EQ(clock.version, before.version);
  EXPECT_EQ(clock.summed, before.summed);
  EXPECT_EQ(clock.pushed, before.pushed);
  // The missing push still completes the step.
  EXPECT_TRUE(MustPush(*p, 1, 0, &clock).complete);
}

TEST(BspPolicyTest, OneWorkerStepsEveryPushAtOnce) {
  std::unique_ptr<ConsistencyPolicy> p = Policy(SyncMode::kBsp, 1);
  EXPECT_FALSE(p->sums_pushes());
  ChunkClock clock(1, 0);
  for (int64_t s = 0; s < 3; ++s) {
    EXPECT_EQ(p->ReleaseOf(clock, s + 1), ChunkRelease::kWait);
    const PushAction a = MustPush(*p, 0, s, &clock);
    EXPECT_FALSE(a.sum);
    EXPECT_EQ(a.scale, 1.0f);
    EXPECT_EQ(p->ReleaseOf(clock, s + 1), ChunkRelease::kNow);
  }
}

TEST(BspPolicyTest, TheLateAreThoseWhoDidNotPushTheChunkOfTheStepBefore) {
  std::unique_ptr<ConsistencyPolicy> p = Policy(SyncMode::kBsp, 4);
  ChunkClock clock(4, 0);
  // The shard's clocks do not matter to BSP: the chunk's pushes do.
  const std::vector<int64_t> clocks = {0, 0, 0, 0};
  EXPECT_THAT(p->LateWorkers(1, clocks, clock), ElementsAre(0, 1, 2, 3));
  MustPush(*p, 0, 0, &clock);
  MustPush(*p, 2, 0, &clock);
  const std::vector<int> late = p->LateWorkers(1, clocks, clock);
  EXPECT_THAT(late, ElementsAre(1, 3));
  EXPECT_EQ(p->LateReason(0, 1, late, absl::Seconds(5)),
            "worker(s) 1, 3 did not push step 0 within 5s");
  MustPush(*p, 1, 0, &clock);
  MustPush(*p, 3, 0, &clock);
  EXPECT_THAT(p->LateWorkers(1, clocks, clock), IsEmpty());
  EXPECT_THAT(p->LateWorkers(2, clocks, clock), ElementsAre(0, 1, 2, 3));
}

// ---------------------------------------------------------------------------------
// SSP(K) and ASP.

class SspPolicyTest : public ::testing::TestWithParam<int> {};

TEST_P(SspPolicyTest, EveryPushStepsAtOnceWithTheOneOverNUndone) {
  const int k = GetParam();
  constexpr int kWorkers = 3;
  std::unique_ptr<ConsistencyPolicy> p = Policy(SyncMode::kSsp, kWorkers, k);
  EXPECT_FALSE(p->sums_pushes());
  EXPECT_FALSE(p->replies_borrow());
  ChunkClock clock(kWorkers, 0);
  for (int64_t s = 0; s < 3; ++s) {
    const PushAction a = MustPush(*p, 0, s, &clock);
    EXPECT_FALSE(a.sum);
    EXPECT_EQ(a.scale, static_cast<float>(kWorkers));
    EXPECT_EQ(clock.version, 0);  // Not a BSP step count.
    // The chunk never holds a pull back; the clocks do.
    EXPECT_EQ(p->ReleaseOf(clock, s + 10), ChunkRelease::kNow);
  }
  EXPECT_EQ(p->OnPush(0, 2, 0, &clock).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A pull of step s is served iff every worker pushed s - K steps; the late are those
// below, for every clock vector over 0..3 of three workers and steps 0..6.
TEST_P(SspPolicyTest, ServesAPullOfStepSOnceEveryWorkerPushedSMinusKSteps) {
  const int k = GetParam();
  std::unique_ptr<ConsistencyPolicy> p = Policy(SyncMode::kSsp, 3, k);
  const ChunkClock chunk(3, 0);
  for (int c0 = 0; c0 <= 3; ++c0) {
    for (int c1 = 0; c1 <= 3; ++c1) {
      for (int c2 = 0; c2 <= 3; ++c2) {
        const std::vector<int64_t> clocks = {c0, c1, c2};
        for (int64_t s = 0; s <= 6; ++s) {
          SCOPED_TRACE(absl::StrCat("clocks ", c0, c1, c2, " step ", s));
          const int64_t slowest = std::min({c0, c1, c2});
          EXPECT_EQ(slowest >= p->StepsNeeded(s), s - slowest <= k);
          std::vector<int> want;
          for (int w = 0; w < 3; ++w) {
            if (s - clocks[w] > k) want.push_back(w);
          }
          EXPECT_EQ(p->LateWorkers(s, clocks, chunk), want);
        }
      }
    }
  }
  EXPECT_EQ(p->LateReason(0, 7, std::vector<int>{1}, absl::Seconds(2)),
            absl::StrCat("worker(s) 1 stayed more than ", k, " steps behind worker 0 for 2s"));
}

// A fast worker that runs whenever the policy lets it, against a slow one that
// pushes only when the fast one is blocked: the fast one's lead (the step it starts
// minus the slow one's pushed steps) reaches K and never exceeds it.
TEST_P(SspPolicyTest, AFastWorkerLeadsASlowOneByAtMostK) {
  const int k = GetParam();
  std::unique_ptr<ConsistencyPolicy> p = Policy(SyncMode::kSsp, 2, k);
  std::vector<int64_t> clocks = {0, 0};  // Worker 0 fast, worker 1 slow.
  int64_t max_lead = 0;
  for (int round = 0; round < 40; ++round) {
    const int64_t next = clocks[0];  // The step the fast worker wants to start.
    if (std::min(clocks[0], clocks[1]) >= p->StepsNeeded(next)) {
      max_lead = std::max(max_lead, next - clocks[1]);
      ++clocks[0];
    } else {
      EXPECT_THAT(p->LateWorkers(next, clocks, ChunkClock(2, 0)), ElementsAre(1));
      ++clocks[1];
    }
  }
  EXPECT_EQ(max_lead, k);
}

INSTANTIATE_TEST_SUITE_P(K, SspPolicyTest, ::testing::Values(0, 1, 2, 5));

TEST(AspPolicyTest, NothingWaitsAndEveryPushStepsAtOnce) {
  constexpr int kWorkers = 4;
  std::unique_ptr<ConsistencyPolicy> p = Policy(SyncMode::kAsp, kWorkers);
  EXPECT_FALSE(p->sums_pushes());
  EXPECT_FALSE(p->replies_borrow());
  EXPECT_EQ(p->StepsNeeded(1000), ConsistencyPolicy::kNoNeed);
  ChunkClock clock(kWorkers, 0);
  const PushAction a = MustPush(*p, 3, 0, &clock);
  EXPECT_FALSE(a.sum);
  EXPECT_EQ(a.scale, static_cast<float>(kWorkers));
  EXPECT_EQ(p->ReleaseOf(clock, 1000), ChunkRelease::kNow);
  // Nobody is held back; if a pull waits anyway, those who did not push step - 1.
  const std::vector<int64_t> clocks = {3, 1, 2, 0};
  EXPECT_THAT(p->LateWorkers(2, clocks, clock), ElementsAre(1, 3));
  EXPECT_EQ(p->LateReason(0, 2, std::vector<int>{1, 3}, absl::Seconds(1)),
            "worker(s) 1, 3 did not push step 1 within 1s");
  EXPECT_EQ(p->LateReason(0, 2, {}, absl::Seconds(1)), "worker(s) ? did not push step 1 within 1s");
}

TEST(ConsistencyPolicyTest, CarriesItsParsedPolicy) {
  std::unique_ptr<ConsistencyPolicy> p = Policy(SyncMode::kSsp, 3, 4);
  EXPECT_EQ(p->sync().mode, SyncMode::kSsp);
  EXPECT_EQ(p->sync().staleness, 4);
  EXPECT_EQ(p->num_workers(), 3);
}

// ---------------------------------------------------------------------------------
// Parsing --ps_sync.

TEST(ParseSyncPolicyTest, AcceptsBspAspAndSspWithBound) {
  absl::StatusOr<SyncPolicy> bsp = ParseSyncPolicy("bsp");
  ASSERT_TRUE(bsp.ok()) << bsp.status();
  EXPECT_EQ(bsp->mode, SyncMode::kBsp);

  absl::StatusOr<SyncPolicy> asp = ParseSyncPolicy("asp");
  ASSERT_TRUE(asp.ok()) << asp.status();
  EXPECT_EQ(asp->mode, SyncMode::kAsp);

  absl::StatusOr<SyncPolicy> ssp0 = ParseSyncPolicy("ssp:0");
  ASSERT_TRUE(ssp0.ok()) << ssp0.status();
  EXPECT_EQ(ssp0->mode, SyncMode::kSsp);
  EXPECT_EQ(ssp0->staleness, 0);

  absl::StatusOr<SyncPolicy> ssp3 = ParseSyncPolicy("ssp:3");
  ASSERT_TRUE(ssp3.ok()) << ssp3.status();
  EXPECT_EQ(ssp3->mode, SyncMode::kSsp);
  EXPECT_EQ(ssp3->staleness, 3);
}

TEST(ParseSyncPolicyTest, RejectsEverythingElse) {
  for (const std::string text :
       {"ssp", "ssp:", "ssp:-1", "ssp:x", "ssp:1x", "foo", "", "BSP", "bsp:1", "asp:2"}) {
    absl::StatusOr<SyncPolicy> p = ParseSyncPolicy(text);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << "'" << text << "'";
  }
}

TEST(ParseSyncPolicyTest, ModeNamesRoundTrip) {
  EXPECT_EQ(SyncModeName(SyncMode::kBsp), "bsp");
  EXPECT_EQ(SyncModeName(SyncMode::kSsp), "ssp");
  EXPECT_EQ(SyncModeName(SyncMode::kAsp), "asp");
  EXPECT_EQ(ParseSyncPolicy(SyncModeName(SyncMode::kAsp))->mode, SyncMode::kAsp);
}

TEST(ParseSyncPolicyTest, TextRoundTrips) {
  for (const std::string text : {"bsp", "asp", "ssp:0", "ssp:3", "ssp:12"}) {
    absl::StatusOr<SyncPolicy> p = ParseSyncPolicy(text);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(SyncPolicyText(*p), text);
  }
}

}  // namespace
}  // namespace ringside
