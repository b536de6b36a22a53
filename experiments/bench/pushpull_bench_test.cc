#include "experiments/bench/pushpull_bench.h"

#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "experiments/sys/sys.h"
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

// With options.server set, the loop runs against that shard (here `bench
// pushpull-server`'s function on a thread, as calibrate runs it in another node) and
// says goodbye at the end, so the shard's serving returns OK.
TEST(PushPullsBeside, UsesTheShardAtTheGivenAddress) {
  absl::StatusOr<ReservedPort> port = ReserveFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  PushPullBenchOptions o;
  o.bytes = 64 << 10;
  o.transport = kPsTransportTcp;
  o.server = absl::StrCat("127.0.0.1:", port->port());
  absl::Status served;
  std::thread shard([&]() { served = RunPushPullBenchServer(o, o.server); });
  absl::StatusOr<PushPullLoad> load = PushPullsBeside(o, []() {
    absl::SleepFor(absl::Milliseconds(200));
    return absl::OkStatus();
  });
  shard.join();
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_GE(load->push_pulls, 1);
  EXPECT_TRUE(served.ok()) << served;
}

// `bench pushpull-beside`'s line reads back as written; anything else is refused.
TEST(PushPullsBesideLine, ReadsBackWhatWasWritten) {
  PushPullLoad load;
  load.push_pulls = 51;
  load.seconds = 6.375;
  const std::string line = FormatPushPullsBeside(load, 455.25);
  EXPECT_EQ(line, "push_pulls=51 seconds=6.375000 mean_step_ms=455.250000");
  PushPullLoad back;
  double step_ms = 0;
  ASSERT_TRUE(ParsePushPullsBeside(line + "\n", &back, &step_ms).ok());
  EXPECT_EQ(back.push_pulls, 51);
  EXPECT_DOUBLE_EQ(back.seconds, 6.375);
  EXPECT_DOUBLE_EQ(step_ms, 455.25);
  EXPECT_EQ(ParsePushPullsBeside("push_pulls=3 seconds=x mean_step_ms=1", &back, &step_ms).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParsePushPullsBeside("", &back, &step_ms).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringside
