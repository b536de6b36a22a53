#include "common/output_files.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace ringside {
namespace {

TEST(OutputFilesTest, NamesEndInTheirFormat) {
  EXPECT_EQ(OutputFileName(OutputFile::kMetrics, OutputOwner::kSingle, 5), "metrics.jsonl");
  EXPECT_EQ(OutputFileName(OutputFile::kTrace, OutputOwner::kSingle, 5), "trace.json");
  EXPECT_EQ(OutputFileName(OutputFile::kMetrics, OutputOwner::kRank, 3), "metrics.rank3.jsonl");
  EXPECT_EQ(OutputFileName(OutputFile::kTrace, OutputOwner::kRank, 3), "trace.rank3.json");
  EXPECT_EQ(OutputFileName(OutputFile::kMetrics, OutputOwner::kShard, 1),
            "metrics.shard1.jsonl");
  EXPECT_EQ(OutputFileName(OutputFile::kTrace, OutputOwner::kShard, 1), "trace.shard1.json");
  EXPECT_EQ(OutputFileName(OutputFile::kTrace, OutputOwner::kRank, 0, 2), "trace.rank0.run2.json");
  EXPECT_EQ(OutputFileName(OutputFile::kTrace, OutputOwner::kSingle, 0, 3), "trace.run3.json");
}

TEST(OutputFilesTest, AResumedRunTakesTheFirstFreeTraceName) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  EXPECT_EQ(TraceFileForNewRun(dir, OutputOwner::kRank, 9, /*resuming=*/true),
            dir + "/trace.rank9.json");
  std::ofstream(dir + "/trace.rank9.json") << "[]";
  EXPECT_EQ(TraceFileForNewRun(dir, OutputOwner::kRank, 9, /*resuming=*/false),
            dir + "/trace.rank9.json");
  EXPECT_EQ(TraceFileForNewRun(dir, OutputOwner::kRank, 9, /*resuming=*/true),
            dir + "/trace.rank9.run2.json");
  std::ofstream(dir + "/trace.rank9.run2.json") << "[]";
  EXPECT_EQ(TraceFileForNewRun(dir, OutputOwner::kRank, 9, /*resuming=*/true),
            dir + "/trace.rank9.run3.json");
}

}  // namespace
}  // namespace ringside
