#include "experiments/explain/ring_explainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringside {
namespace {

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(RingChunkTest, ChunksTileTheVectorAndDifferByAtMostOne) {
  for (int w = 1; w <= 8; ++w) {
    for (int64_t n : {0, 1, 5, 7, 1000}) {
      int64_t next = 0, smallest = n, largest = 0;
      for (int c = 0; c < w; ++c) {
        const RingChunk chunk = RingChunkOf(n, w, c);
        EXPECT_EQ(chunk.index, c);
        EXPECT_EQ(chunk.begin, next) << "w=" << w << " n=" << n << " c=" << c;
        next = chunk.begin + chunk.count;
        smallest = std::min(smallest, chunk.count);
        largest = std::max(largest, chunk.count);
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1);
      // Indices wrap around as the backend's Chunk() does.
      EXPECT_EQ(RingChunkOf(n, w, -1).index, w - 1);
      EXPECT_EQ(RingChunkOf(n, w, w).index, 0);
    }
  }
}

TEST(RingExplainerTest, ScheduleSendsEveryChunkButOnePerPhase) {
  for (int w = 1; w <= 8; ++w) {
    const int64_t n = 2 * w + 3;
    const RingExplanation e = ExplainRing(RingInputs(w, n, RingValues::kReadable, 1));
    ASSERT_EQ(e.steps.size(), static_cast<size_t>(2 * (w - 1)));
    for (int r = 0; r < w; ++r) {
      EXPECT_EQ(e.chunks_sent[r], 2 * (w - 1)) << "w=" << w << " rank " << r;
      std::set<int> reduce_sent, gather_sent, reduce_received, gather_received;
      int64_t sent = 0, received = 0;
      for (const RingStep& step : e.steps) {
        const RingRankStep& rs = step.ranks[r];
        // What this rank receives is what its left neighbour sent.
        const RingRankStep& left = step.ranks[(r + w - 1) % w];
        EXPECT_EQ(rs.received.index, left.sent.index);
        EXPECT_NE(rs.received.index, rs.sent.index);
        sent += rs.sent.count;
        received += rs.received.count;
        if (step.phase == RingPhase::kReduceScatter) {
          reduce_sent.insert(rs.sent.index);
          reduce_received.insert(rs.received.index);
        } else {
          gather_sent.insert(rs.sent.index);
          gather_received.insert(rs.received.index);
        }
      }
      if (w == 1) continue;
      // Reduce-scatter: every chunk but r + 1 goes out (r + 1 is the one completed here)
      // and every chunk but r comes in; all-gather: all but r + 2 out, all but r + 1 in.
      EXPECT_EQ(reduce_sent.size(), static_cast<size_t>(w - 1));
      EXPECT_EQ(reduce_sent.count((r + 1) % w), 0u);
      EXPECT_EQ(reduce_received.count(r), 0u);
      EXPECT_EQ(gather_sent.count((r + 2) % w), 0u);
      EXPECT_EQ(gather_received.count((r + 1) % w), 0u);
      EXPECT_EQ(gather_received.size(), static_cast<size_t>(w - 1));
      EXPECT_EQ(sent, e.floats_sent[r]);
      EXPECT_EQ(received, e.floats_received[r]);
      EXPECT_EQ(e.floats_sent[r],
                2 * n - RingChunkOf(n, w, r + 1).count - RingChunkOf(n, w, r + 2).count);
      EXPECT_EQ(e.floats_received[r],
                2 * n - RingChunkOf(n, w, r).count - RingChunkOf(n, w, r + 1).count);
    }
  }
}

// The order the header promises: chunk c's sum is x[c + w - 1] + (... + (x[c + 1] + x[c])).
TEST(RingExplainerTest, SumsInTheRingsOrder) {
  for (int w = 1; w <= 8; ++w) {
    const int64_t n = 1000;
    const std::vector<std::vector<float>> x = RingInputs(w, n, RingValues::kRandom, 7);
    const RingExplanation e = ExplainRing(x);
    for (int c = 0; c < w; ++c) {
      const RingChunk chunk = RingChunkOf(n, w, c);
      for (int64_t i = chunk.begin; i < chunk.begin + chunk.count; ++i) {
        float sum = x[c][i];
        for (int k = 1; k < w; ++k) sum = x[(c + k) % w][i] + sum;
        for (int r = 0; r < w; ++r) {
          ASSERT_TRUE(SameBits(e.result[r][i], sum)) << "w=" << w << " rank " << r << " i=" << i;
        }
      }
    }
  }
}

// Random values make the bitwise comparison meaningful: another order of the same
// additions gives other bits somewhere.
TEST(RingExplainerTest, RandomValuesDependOnTheOrder) {
  for (int w = 3; w <= 8; ++w) {
    const std::vector<std::vector<float>> x = RingInputs(w, 1000, RingValues::kRandom, 7);
    const RingExplanation e = ExplainRing(x);
    int differ = 0;
    for (int64_t i = 0; i < 1000; ++i) {
      float in_rank_order = 0;
      for (int r = 0; r < w; ++r) in_rank_order += x[r][i];
      if (!SameBits(in_rank_order, e.result[0][i])) ++differ;
    }
    EXPECT_GT(differ, 0) << "w=" << w;
  }
}

TEST(RingExplainerTest, MatchesTheGlooRingBitForBit) {
  for (int w = 2; w <= 8; ++w) {
    for (int64_t n : std::vector<int64_t>{0, 1, w - 1, w + 1, 2 * w + 3, 1000}) {
      SCOPED_TRACE(testing::Message() << "ranks " << w << ", elements " << n);
      const RingExplanation e = ExplainRing(RingInputs(w, n, RingValues::kRandom, 100 * w + n));
      absl::StatusOr<RingBackendRun> run = RunGlooRing(e.inputs, 30);
      ASSERT_TRUE(run.ok()) << run.status();
      EXPECT_TRUE(CompareWithBackend(e, *run).ok()) << CompareWithBackend(e, *run);
    }
  }
}

TEST(RingExplainerTest, ComparisonNamesTheFirstDifference) {
  const RingExplanation e = ExplainRing(RingInputs(3, 7, RingValues::kReadable, 1));
  RingBackendRun run;
  run.buffers = e.result;
  for (int r = 0; r < 3; ++r) {
    run.bytes_sent.push_back(4 * e.floats_sent[r]);
    run.bytes_received.push_back(4 * e.floats_received[r]);
  }
  EXPECT_TRUE(CompareWithBackend(e, run).ok());
  run.buffers[2][5] = std::nextafter(run.buffers[2][5], 1e9f);
  const absl::Status s = CompareWithBackend(e, run);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 2 element 5"), std::string::npos) << s;
  run.buffers = e.result;
  run.bytes_sent[1] += 4;
  EXPECT_NE(CompareWithBackend(e, run).message().find("rank 1"), absl::string_view::npos);
}

TEST(RingExplainerTest, TextShowsTheSteps) {
  const RingExplanation e = ExplainRing(RingInputs(3, 7, RingValues::kReadable, 1));
  const std::string text = FormatRingExplanation(e);
  EXPECT_NE(text.find("chunk 2 [4, 7): 3 floats"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 sends chunk 0 [0 1] to rank 1; gets chunk 2 from rank 2: "
                      "[4 5 6] + [24 25 26] = [28 30 32]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("result: every rank holds the sum [30 33 | 36 39 | 42 45 48]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("each rank sent 2(N-1) = 4 chunks"), std::string::npos) << text;
}

TEST(RingExplainerTest, OneFramePerStepPlusTheStart) {
  for (int w = 1; w <= 8; ++w) {
    const RingExplanation e = ExplainRing(RingInputs(w, 2 * w + 3, RingValues::kReadable, 1));
    const std::vector<Frame> frames = RingFrames(e);
    ASSERT_EQ(frames.size(), static_cast<size_t>(2 * (w - 1) + 1));
    for (size_t i = 1; i < frames.size(); ++i) {
      EXPECT_EQ(frames[i].boxes.size(), static_cast<size_t>(w));
      EXPECT_EQ(frames[i].arrows.size(), static_cast<size_t>(w));
    }
  }
}

}  // namespace
}  // namespace ringside
