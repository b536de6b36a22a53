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

TEST(MetricsTest, UnwritablePathFails) {
  EXPECT_EQ(MetricsWriter::Open("/nonexistent-dir/m.jsonl", false).status().code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace ringside
