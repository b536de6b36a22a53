#include "experiments/bench/pushpull_bench.h"

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// While `beside` sleeps, the loop keeps pushing and pulling against the shard in this
// process, over either transport; the count is of push-pulls done in that window.
TEST(PushPullsBeside, CountsThePushPullsDoneWhileBesideRan) {
  for (const char* transport : {kPsTransportGrpc, kPsTransportTcp}) {
    PushPullBenchOptions o;
    o.bytes = 64 << 10;
    o.transport = transport;
    absl::StatusOr<PushPullLoad> load = PushPullsBeside(o, []() {
      absl::SleepFor(absl::Milliseconds(300));
      return absl::OkStatus();
    });
    ASSERT_TRUE(load.ok()) << transport << ": " << load.status();
    EXPECT_GE(load->seconds, 0.3) << transport;
    EXPECT_LT(load->seconds, 10) << transport;
    EXPECT_GE(load->push_pulls, 1) << transport;
  }
}

// `beside`'s failure is the call's, and the shard and loop still wind down.
TEST(PushPullsBeside, ReturnsBesidesError) {
  PushPullBenchOptions o;
  o.bytes = 4 << 10;
  absl::StatusOr<PushPullLoad> load =
      PushPullsBeside(o, []() { return absl::DataLossError("the compute failed"); });
  EXPECT_EQ(load.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(load.status().message(), ::testing::HasSubstr("the compute failed"));
}

}  // namespace
}  // namespace ringside
