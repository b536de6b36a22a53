// StepRecords alone (when a record closes, what the totals count), then the shard's
// step records and statistics through it.
#include "ps_server/step_records.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard.h"
#include "ps_server/shard_test_util.h"

namespace ringside {
namespace shard_test {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------
// StepRecords alone.

TEST(StepRecordsTest, ARecordClosesOnceEveryWorkerPushedAndWasServed) {
  StepRecords records(1, nullptr, nullptr);
  records.CountPush(5, 100, 2, {}, {});
  records.CountPush(5, 50, 1, {}, {});
  records.PushDone(5, 1);
  records.MaybeFinish(5, 2, 3);
  EXPECT_EQ(records.OpenSteps(), std::vector<int64_t>{5});
  records.PushDone(5, 0);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(records.OpenSteps(), std::vector<int64_t>{5});
    records.CountServedBytes(10);
    records.CountServed(5, 10);
    records.MaybeFinish(5, 2, 3);
  }
  EXPECT_TRUE(records.OpenSteps().empty());
  const ps::ShardStats& totals = records.totals();
  EXPECT_EQ(totals.shard(), 1);
  EXPECT_EQ(totals.steps_completed(), 1);
  EXPECT_EQ(totals.bytes_in(), 150);
  EXPECT_EQ(totals.bytes_out(), 60);
  EXPECT_EQ(totals.max_queue_depth(), 2);
  EXPECT_EQ(totals.last_step().step(), 5);
  EXPECT_EQ(totals.last_step().late_worker(), 0);
  EXPECT_EQ(totals.last_step().live_workers(), 2);
  EXPECT_EQ(totals.last_step().bytes_sent(), 60);
}

TEST(StepRecordsTest, FewerExpectedWorkersCloseARecordSooner) {
  StepRecords records(0, nullptr, nullptr);
  records.CountPush(0, 8, 1, {}, {});
  records.PushDone(0, 0);
  records.CountServed(0, 4);
  records.MaybeFinish(0, 2, 1);
  EXPECT_EQ(records.OpenSteps(), std::vector<int64_t>{0});
  records.MaybeFinish(0, 1, 1);  // Elastic PS: the other worker was lost.
  EXPECT_TRUE(records.OpenSteps().empty());
  EXPECT_EQ(records.totals().last_step().live_workers(), 1);
  records.MaybeFinish(7, 0, 1);  // No record: nothing.
  EXPECT_EQ(records.totals().steps_completed(), 1);
}

TEST(StepRecordsTest, InitialisationAndOtherPullsCountOnlyInTheTotals) {
  StepRecords records(0, nullptr, nullptr);
  records.CountInit(7);
  records.CountServedBytes(5);
  EXPECT_TRUE(records.OpenSteps().empty());
  EXPECT_EQ(records.totals().bytes_in(), 7);
  EXPECT_EQ(records.totals().bytes_out(), 5);
  EXPECT_EQ(records.totals().steps_completed(), 0);
}

// ---------------------------------------------------------------------------------
// Statistics.

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(ShardStatsTest, StepRecordsCountTheWireBytesOfPushesAndPulls) {
  const std::string path = TempPath("shard_stats.jsonl");
  absl::StatusOr<std::unique_ptr<MetricsWriter>> writer = MetricsWriter::Open(path, false);
  ASSERT_TRUE(writer.ok()) << writer.status();
  constexpr int kWorkers = 2;
  PsShardOptions options = Options(kWorkers, Bsp(), Hyper(0.5f));
  options.metrics = writer->get();
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);

  int64_t total_in = 0;
  int64_t total_out = 0;
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::PARAMS, InitialParams(kSliceSize), &total_in).ok());
  // Start-up pulls count in the totals but belong to no step.
  for (int w = 0; w < kWorkers; ++w) ASSERT_TRUE(ServeSlice(*shard, w, 0, ps::PARAMS, &total_out).ok());
  EXPECT_EQ(shard->Stats().steps_completed(), 0);

  constexpr int64_t kSteps = 2;
  std::vector<int64_t> step_in(kSteps, 0), step_out(kSteps, 0);
  for (int64_t s = 0; s < kSteps; ++s) {
    // Two streams in flight during the step.
    shard->StreamStarted();
    shard->StreamStarted();
    // Step 0 in worker order, step 1 in reverse: the last complete push is late_worker.
    for (int i = 0; i < kWorkers; ++i) {
      const int w = s % 2 == 0 ? i : kWorkers - 1 - i;
      ASSERT_TRUE(PushSlice(*shard, w, s, ps::GRADIENTS, Gradient(kSliceSize, w, s), &step_in[s]).ok());
    }
    shard->StreamEnded();
    shard->StreamEnded();
    // All pushed, but the step is complete only when every chunk went back to everyone.
    ASSERT_TRUE(ServeSlice(*shard, 0, s + 1, ps::PARAMS, &step_out[s]).ok());
    EXPECT_EQ(shard->Stats().steps_completed(), s);
    ASSERT_TRUE(ServeSlice(*shard, 1, s + 1, ps::PARAMS, &step_out[s]).ok());
    const ps::ShardStats stats = shard->Stats();
    EXPECT_EQ(stats.steps_completed(), s + 1);
    const StepMetrics& last = stats.last_step();
    EXPECT_EQ(last.step(), s);
    EXPECT_EQ(last.rank(), kShard);
    EXPECT_EQ(last.role(), "server");
    EXPECT_EQ(last.bytes_received(), step_in[s]);
    EXPECT_EQ(last.bytes_sent(), step_out[s]);
    EXPECT_EQ(last.queue_depth(), 2);
    EXPECT_GE(last.wait_ms(), 0);
    EXPECT_EQ(last.late_worker(), s % 2 == 0 ? kWorkers - 1 : 0);
    EXPECT_GE(last.step_ms(), 0);
    total_in += step_in[s];
    total_out += step_out[s];
  }
  // Wire sizes differ between steps (step 0 is not on the wire in proto3): the shard
  // counts what it was told, per step.
  EXPECT_NE(step_in[0], step_in[1]);
  // By hand, step 0: chunks at offsets 0, 4, 8 carry 16, 16, 12 payload bytes, each
  // with a 2-byte data header, offsets 4 and 8 take 2 bytes, worker 1's id 2 bytes per
  // chunk (zeros are not on the wire): 18 + 20 + 16 = 54 for worker 0, 60 for worker 1.
  EXPECT_EQ(step_in[0], 114);
  EXPECT_EQ(step_in[1], 114 + 2 * kWorkers * kNumChunks);  // Plus the step field.
  const ps::ShardStats stats = shard->Stats();
  EXPECT_EQ(stats.shard(), kShard);
  EXPECT_EQ(stats.bytes_in(), total_in);
  EXPECT_EQ(stats.bytes_out(), total_out);
  EXPECT_EQ(stats.max_queue_depth(), 2);

  // The same records went to the metrics file, one line per step.
  shard.reset();
  ASSERT_TRUE((*writer)->Close().ok());
  std::ifstream in(path);
  std::vector<StepMetrics> records;
  for (std::string line; std::getline(in, line);) {
    StepMetrics m;
    ASSERT_TRUE(FromJsonLine(line, &m).ok()) << line;
    records.push_back(m);
  }
  ASSERT_EQ(records.size(), kSteps);
  for (int64_t s = 0; s < kSteps; ++s) {
    EXPECT_EQ(records[s].step(), s);
    EXPECT_EQ(records[s].role(), "server");
    EXPECT_EQ(records[s].bytes_received(), step_in[s]);
    EXPECT_EQ(records[s].bytes_sent(), step_out[s]);
  }
}

}  // namespace
}  // namespace shard_test
}  // namespace ringside
