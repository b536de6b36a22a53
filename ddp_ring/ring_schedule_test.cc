// The ring schedule against its closed forms: the chunk split, the segments, both ends
// of every transfer agreeing, and the bytes each rank moves.
#include "ddp_ring/ring_schedule.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr int64_t kSegmentFloats = kRingSegmentBytes / sizeof(float);

// Sizes that exercise empty chunks, uneven splits and several segments per chunk.
std::vector<int64_t> Sizes(int w) {
  return {0, 1, 7, 12 * w, 1000, 3 * kSegmentFloats * w + 5, 5 * kSegmentFloats * w};
}

std::vector<RingSchedule> Schedules(int64_t n, int w, bool pipelined) {
  std::vector<RingSchedule> out;
  for (int r = 0; r < w; ++r) {
    out.push_back(pipelined ? RingSchedule::Pipelined(n, w, r) : RingSchedule::Unsegmented(n, w, r));
  }
  return out;
}

TEST(RingScheduleTest, ChunksTileTheVector) {
  for (int w = 1; w <= 9; ++w) {
    for (int64_t n : Sizes(w)) {
      int64_t next = 0;
      for (int c = 0; c < w; ++c) {
        const RingChunk chunk = RingChunkOf(n, w, c);
        EXPECT_EQ(chunk.begin, n * c / w);
        EXPECT_EQ(chunk.begin, next);
        EXPECT_EQ(chunk.count, n * (c + 1) / w - n * c / w);
        EXPECT_GE(chunk.count, n / w);
        EXPECT_LE(chunk.count, (n + w - 1) / w);
        next += chunk.count;
      }
      EXPECT_EQ(next, n);
      EXPECT_EQ(RingChunkOf(n, w, -1).index, w - 1);
    }
  }
}

TEST(RingScheduleTest, SegmentsFollowTheSegmentSize) {
  for (int w = 2; w <= 8; ++w) {
    for (int64_t n : Sizes(w)) {
      const RingSchedule s = RingSchedule::Pipelined(n, w, 0);
      const int64_t largest = (n + w - 1) / w;
      EXPECT_EQ(s.segments(), std::max<int64_t>(1, (largest + kSegmentFloats - 1) / kSegmentFloats));
      EXPECT_EQ(s.lag(), std::min<int64_t>(kRingSegmentsInFlight - 1, s.segments() - 1));
      EXPECT_LT(s.lag(), s.segments());
      EXPECT_LE(s.slot_floats(), kSegmentFloats);
      EXPECT_EQ(s.transfers(), 2 * (w - 1) * s.segments());
      const RingSchedule u = RingSchedule::Unsegmented(n, w, 0);
      EXPECT_EQ(u.segments(), 1);
      EXPECT_EQ(u.lag(), 0);
      EXPECT_EQ(u.transfers(), 2 * (w - 1));
    }
  }
}

TEST(RingScheduleTest, StepsFollowTheRing) {
  for (int w = 2; w <= 8; ++w) {
    for (int r = 0; r < w; ++r) {
      for (int s = 0; s < w - 1; ++s) {
        const RingStepChunks rs = RingStepChunksOf(w, r, RingPhase::kReduceScatter, s);
        EXPECT_EQ(rs.send, ((r - s) % w + w) % w);
        EXPECT_EQ(rs.recv, ((r - s - 1) % w + w) % w);
        const RingStepChunks ag = RingStepChunksOf(w, r, RingPhase::kAllGather, s);
        EXPECT_EQ(ag.send, ((r + 1 - s) % w + w) % w);
        EXPECT_EQ(ag.recv, ((r - s) % w + w) % w);
      }
      // After the reduce-scatter rank r holds the full sum of chunk r + 1.
      EXPECT_EQ(RingStepChunksOf(w, r, RingPhase::kReduceScatter, w - 2).recv, (r + 1) % w);
    }
  }
}

// Rank r's send of transfer t is rank r + 1's receive of transfer t, segments tile
// their chunks, and a transfer forwards what the transfer `segments` earlier received.
TEST(RingScheduleTest, BothEndsAgreeAndSegmentsTileTheChunks) {
  for (bool pipelined : {false, true}) {
    for (int w = 2; w <= 6; ++w) {
      for (int64_t n : Sizes(w)) {
        const std::vector<RingSchedule> ranks = Schedules(n, w, pipelined);
        const int64_t segments = ranks[0].segments();
        for (int r = 0; r < w; ++r) {
          const RingSchedule& me = ranks[r];
          const RingSchedule& right = ranks[(r + 1) % w];
          int64_t send_next = 0;
          for (int64_t t = 0; t < me.transfers(); ++t) {
            const RingTransfer x = me.At(t);
            const RingTransfer y = right.At(t);
            EXPECT_EQ(x.phase, y.phase);
            EXPECT_EQ(x.send_chunk.index, y.recv_chunk.index);
            EXPECT_EQ(x.send_at, y.recv_at);
            EXPECT_EQ(x.send_n, y.recv_n);
            EXPECT_LE(x.recv_n, me.slot_floats());
            if (x.segment == 0) send_next = x.send_chunk.begin;
            EXPECT_EQ(x.send_at, send_next) << "w=" << w << " n=" << n << " t=" << t;
            send_next += x.send_n;
            if (x.segment == segments - 1) {
              EXPECT_EQ(send_next, x.send_chunk.begin + x.send_chunk.count);
            }
            if (t >= segments) {
              const RingTransfer earlier = me.At(t - segments);
              EXPECT_EQ(x.send_at, earlier.recv_at);
              EXPECT_EQ(x.send_n, earlier.recv_n);
            }
          }
        }
      }
    }
  }
}

// Bytes per rank: 2 (n - chunk r + 1 - chunk r + 2) sent and 2 (n - chunk r - chunk
// r + 1) received; 2 (w - 1) / w x n each way when w divides n; 2 (w - 1) n over all
// ranks whatever n.
TEST(RingScheduleTest, BytesPerRankMatchTheClosedForm) {
  for (bool pipelined : {false, true}) {
    for (int w = 2; w <= 8; ++w) {
      for (int64_t n : Sizes(w)) {
        const std::vector<RingSchedule> ranks = Schedules(n, w, pipelined);
        int64_t total_sent = 0;
        for (int r = 0; r < w; ++r) {
          int64_t sent = 0, received = 0;
          for (int64_t t = 0; t < ranks[r].transfers(); ++t) {
            sent += ranks[r].At(t).send_n;
            received += ranks[r].At(t).recv_n;
          }
          EXPECT_EQ(sent, 2 * n - RingChunkOf(n, w, r + 1).count - RingChunkOf(n, w, r + 2).count);
          EXPECT_EQ(received, 2 * n - RingChunkOf(n, w, r).count - RingChunkOf(n, w, r + 1).count);
          if (n % w == 0) {
            EXPECT_EQ(sent * int64_t{4}, 2 * (w - 1) * (n * int64_t{4}) / w);
            EXPECT_EQ(received, sent);
          }
          total_sent += sent;
        }
        EXPECT_EQ(total_sent, 2 * (w - 1) * n);
      }
    }
  }
}

}  // namespace
}  // namespace ringside
