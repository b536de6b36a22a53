#include "common/metrics.h"

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringside {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(MetricsTest, JsonLinesRoundTripWithPlainNumbers) {
  const std::string path = TempPath("m.jsonl");
  auto writer = MetricsWriter::Open(path, false);
  ASSERT_TRUE(writer.ok());
  StepMetrics m;
  m.set_step(123456789012LL);
  m.set_rank(3);
  m.set_role("wor\"ker");
  m.set_forward_ms(1.25);
  m.set_loss(0.5f);
  m.set_bytes_sent(1LL << 40);
  ASSERT_TRUE((*writer)->Write(m).ok());
  m.set_step(2);
  ASSERT_TRUE((*writer)->Write(m).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_FALSE((*writer)->Write(m).ok());

  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 2u);
  // 64-bit integers are JSON numbers, not strings; every field is present.
  EXPECT_NE(lines[0].find("\"step\":123456789012,"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"wait_ms\":0,"), std::string::npos) << lines[0];
  StepMetrics back;
  ASSERT_TRUE(FromJsonLine(lines[0], &back).ok());
  EXPECT_EQ(back.step(), 123456789012LL);
  EXPECT_EQ(back.role(), "wor\"ker");
  EXPECT_EQ(back.forward_ms(), 1.25);
  EXPECT_EQ(back.bytes_sent(), 1LL << 40);
}

TEST(MetricsTest, AppendKeepsEarlierRecords) {
  const std::string path = TempPath("a.jsonl");
  for (int round = 0; round < 2; ++round) {
    auto writer = MetricsWriter::Open(path, /*append=*/round > 0);
    ASSERT_TRUE(writer.ok());
    StepMetrics m;
    m.set_step(round);
    ASSERT_TRUE((*writer)->Write(m).ok());
  }
  EXPECT_EQ(Lines(path).size(), 2u);
}

// A restarted attempt resumes at its checkpoint's step: the records a failed attempt
// wrote past it (and a line a kill cut short) go, the earlier ones stay.
TEST(MetricsTest, OpenResumedDropsStepsPastTheCheckpoint) {
  const std::string path = TempPath("r.jsonl");
  {
    auto writer = MetricsWriter::Open(path, false);
    ASSERT_TRUE(writer.ok());
    for (int step = 0; step < 7; ++step) {
      StepMetrics m;
      m.set_step(step);
      ASSERT_TRUE((*writer)->Write(m).ok());
    }
  }
  { std::ofstream(path, std::ios::app) << "{\"step\":7,\"ra"; }  // Cut short by a kill.
  auto writer = MetricsWriter::OpenResumed(path, 5);
  ASSERT_TRUE(writer.ok()) << writer.status();
  StepMetrics m;
  m.set_step(5);
  ASSERT_TRUE((*writer)->Write(m).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  std::vector<int64_t> steps;
  for (const std::string& line : Lines(path)) {
    StepMetrics back;
    ASSERT_TRUE(FromJsonLine(line, &back).ok()) << line;
    steps.push_back(back.step());
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  // A missing file is created.
  EXPECT_TRUE(MetricsWriter::OpenResumed(TempPath("new.jsonl"), 3).ok());
}

TEST(MetricsTest, ReadMetricsFileReadsWhatTheWriterWrote) {
  const std::string path = TempPath("read.jsonl");
  {
    auto writer = MetricsWriter::Open(path, /*append=*/false);
    ASSERT_TRUE(writer.ok());
    for (int step = 0; step < 3; ++step) {
      StepMetrics m;
      m.set_step(step);
      m.set_step_ms(1.5 * step);
      ASSERT_TRUE((*writer)->Write(m).ok());
    }
    ASSERT_TRUE((*writer)->Close().ok());
  }
  // A kill cut the last line short: dropped.
  std::ofstream(path, std::ios::app) << "{\"step\":3,\"epo";
  absl::StatusOr<std::vector<StepMetrics>> records = ReadMetricsFile(path);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[2].step(), 2);
  EXPECT_DOUBLE_EQ((*records)[2].step_ms(), 3.0);
  // A bad line followed by good ones is corruption, named with its line.
  std::ofstream(path, std::ios::app) << "\n{\"step\":4}\n";
  records = ReadMetricsFile(path);
  EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(records.status().message().find("read.jsonl:4"), std::string::npos) << records.status();
  EXPECT_EQ(ReadMetricsFile(TempPath("missing.jsonl")).status().code(), absl::StatusCode::kNotFound);
}

std::vector<int64_t> Steps(const std::string& path) {
  std::vector<int64_t> steps;
  for (const std::string& line : Lines(path)) {
    StepMetrics back;
    EXPECT_TRUE(FromJsonLine(line, &back).ok()) << line;
    steps.push_back(back.step());
  }
  return steps;
}

// Each record is in the file when Write returns (a kill after a checkpoint loses none
// of the steps before it).
TEST(MetricsTest, EveryRecordReachesTheFileAtOnce) {
  const std::string path = TempPath("flushed.jsonl");
  auto writer = MetricsWriter::Open(path, false);
  ASSERT_TRUE(writer.ok());
  for (int step = 0; step < 3; ++step) {
    StepMetrics m;
    m.set_step(step);
    ASSERT_TRUE((*writer)->Write(m).ok());
    EXPECT_EQ(Lines(path).size(), static_cast<size_t>(step + 1));
  }
}

// A writer opened to append without knowing where its run resumes (a PS shard): its
// first record's step decides what a killed attempt left that this run repeats.
TEST(MetricsTest, AppendDropsWhatTheFirstRecordRepeats) {
  const std::string path = TempPath("shard.jsonl");
  {
    auto writer = MetricsWriter::Open(path, false);
    ASSERT_TRUE(writer.ok());
    for (int step = 0; step < 9; ++step) {
      StepMetrics m;
      m.set_step(step);
      ASSERT_TRUE((*writer)->Write(m).ok());
    }
  }
  { std::ofstream(path, std::ios::app) << "{\"step\":9,\"ra"; }  // Cut short by a kill.
  auto writer = MetricsWriter::Open(path, /*append=*/true);
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ(Lines(path).size(), 10u);  // Nothing dropped before the first record.
  for (int step = 6; step < 8; ++step) {
    StepMetrics m;
    m.set_step(step);
    ASSERT_TRUE((*writer)->Write(m).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ(Steps(path), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(MetricsTest, UnwritablePathFails) {
  EXPECT_EQ(MetricsWriter::Open("/nonexistent-dir/m.jsonl", false).status().code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace ringside
