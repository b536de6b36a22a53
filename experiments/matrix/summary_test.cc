// A finished cell's records summarized: worker 0's medians after warm-up, and the
// forward pass over every rank's (the host's pace during the cell, report/points.h).
#include "experiments/matrix/summary.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/matrix/spec.h"
#include "experiments/sys/files.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

std::string CellDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(t != nullptr ? t : "/tmp", "/", name);
  std::filesystem::create_directories(dir);
  return dir;
}

// Ten steps of one rank: step 0 (warm-up, dropped) takes 10x; step k's forward is
// `forward` + k, backward 2 x forward.
void WriteRank(const std::string& dir, int rank, double forward) {
  std::string text;
  for (int k = 0; k < 10; ++k) {
    const double f = (k == 0 ? 10 : 1) * (forward + k);
    absl::StrAppendFormat(&text,
                          "{\"step\":%d,\"rank\":%d,\"role\":\"rank\",\"forward_ms\":%g,\"backward_ms\":%g,"
                          "\"comm_ms\":1,\"step_ms\":%g,\"samples\":8}\n",
                          k, rank, f, 2 * f, 3 * f + 1);
  }
  ASSERT_TRUE(WriteFileAtomically(absl::StrCat(dir, "/metrics.rank", rank, ".jsonl"), text).ok());
}

TEST(SummarizeCellTest, ForwardIsEveryRanksMedianComputeIsRankZeros) {
  const std::string dir = CellDir("ddp-n2-r0");
  WriteRank(dir, 0, 100);  // Steps 1..9: forward 101..109.
  WriteRank(dir, 1, 200);  // 201..209.
  Cell cell;
  cell.id = "ddp-n2-r0";
  cell.label = "ddp";
  cell.strategy.set_kind("ddp");
  cell.workers = 2;
  cell.global_batch = 16;
  const CellResult r = SummarizeCell(cell, dir, /*exit_ok=*/true, "", 1.0);
  ASSERT_EQ(r.status(), "ok") << r.reason();
  EXPECT_EQ(r.steps(), 10);
  // Rank 0's steady steps 1..9: forward + backward = 3 x 105 at the median.
  EXPECT_NEAR(r.compute_ms(), 315, 1e-9);
  EXPECT_NEAR(r.median_step_ms(), 316, 1e-9);
  // Both ranks' 18 steady forwards, 101..109 and 201..209: the upper median (sys/median.h)
  // is 201, where rank 0's alone would give 105.
  EXPECT_NEAR(r.forward_ms(), 201, 1e-9);
}

}  // namespace
}  // namespace ringside
