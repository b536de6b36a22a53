// The ring all-reduce's schedule, as pure arithmetic (no I/O): how n floats split into
// chunks over w ranks, how each chunk is cut into segments for pipelining, and, transfer
// by transfer, which chunk and segment each rank sends to its right neighbour and
// receives from its left one. The Gloo backend runs it (allreduce_ring.cc) and
// `ringside explain ring` shows it (experiments/explain/ring_explainer.h), so the two
// cannot drift apart.
//
// The ring, in two phases of w - 1 steps each, rank r's right neighbour being r + 1 and
// its left one r - 1 (ranks and chunks taken modulo w):
//   reduce-scatter, step s: rank r sends its running sum of chunk r - s and receives
//     chunk r - s - 1, which it adds to its own copy; afterwards it holds the full sum
//     of chunk r + 1;
//   all-gather, step s: rank r sends chunk r + 1 - s and receives chunk r - s, which
//     replaces its copy.
// Each rank sends 2 (n - chunk r + 1 - chunk r + 2) floats and receives 2 (n - chunk r
// - chunk r + 1): 2 (w - 1) / w x n each way when w divides n, the bandwidth optimum.
// Every chunk's sum is x[c + w - 1] + (... + (x[c + 1] + x[c])), whatever the
// segmenting, so all ranks end with bit-identical sums.
#ifndef RINGSIDE_DDP_RING_RING_SCHEDULE_H_
#define RINGSIDE_DDP_RING_RING_SCHEDULE_H_

#include <cstdint>

namespace ringside {

// The pipelining of the backend's ring: the largest segment of a chunk, and how many
// segment transfers are in flight at once (one of them being waited for and added while
// the others move). Gloo's own ring's settings; smaller segments with more in flight
// were slower at 4 ranks on 2 cores (docs/benchmarks.md, "Ring pipelining").
inline constexpr int64_t kRingSegmentBytes = int64_t{1} << 20;
inline constexpr int64_t kRingSegmentsInFlight = 2;

// One chunk of the ring's split: elements [begin, begin + count) of the vector.
struct RingChunk {
  int index = 0;  // In [0, world).
  int64_t begin = 0;
  int64_t count = 0;
};

// Chunk c (taken modulo `world`) of `n` floats split over `world` ranks:
// [n c / world, n (c + 1) / world). Every rank computes the same split; chunk sizes
// differ by at most one. world >= 1, n >= 0.
RingChunk RingChunkOf(int64_t n, int world, int c);

enum class RingPhase { kReduceScatter, kAllGather };

// The chunk indices (in [0, world)) rank `rank` sends and receives in step `step` of
// `phase` (see the top of this file).
struct RingStepChunks {
  int send = 0;
  int recv = 0;
};
RingStepChunks RingStepChunksOf(int world, int rank, RingPhase phase, int step);

// One transfer of the schedule: segment `segment` of the chunk sent to the right
// neighbour and segment `segment` of the chunk received from the left one, as float
// offsets into the vector and counts (a count of 0: nothing moves that way).
struct RingTransfer {
  RingPhase phase = RingPhase::kReduceScatter;
  int step = 0;         // Within the phase: 0 .. world - 2.
  int64_t segment = 0;  // Within the chunks: 0 .. segments - 1.
  RingChunk send_chunk;  // The whole chunks this step moves.
  RingChunk recv_chunk;
  int64_t send_at = 0, send_n = 0, recv_at = 0, recv_n = 0;

  bool reduce() const { return phase == RingPhase::kReduceScatter; }
};

// Rank `rank`'s transfers of a ring all-reduce of n floats over `world` ranks, each
// chunk cut into `segments` segments (segment k of a chunk of len floats is
// [len k / segments, len (k + 1) / segments) of it; both ends of a transfer split the
// same chunk, so they agree on every segment's size). Transfer t = s x segments + k is
// step s of the reduce-scatter for t < (world - 1) x segments, then step s of the
// all-gather. Cheap to copy; thread-compatible.
class RingSchedule {
 public:
  // The backend's: segments of at most kRingSegmentBytes, kRingSegmentsInFlight in
  // flight.
  static RingSchedule Pipelined(int64_t n, int world, int rank);
  // One segment per chunk, one transfer in flight: the ring step by step, as explained.
  static RingSchedule Unsegmented(int64_t n, int world, int rank);

  int64_t segments() const { return segments_; }
  // 2 (world - 1) x segments.
  int64_t transfers() const { return 2 * (world_ - 1) * segments_; }
  // How many later transfers are posted before transfer t is waited for:
  // min(in flight - 1, segments - 1). Transfer t sends what transfer t - segments
  // received, so lag < segments keeps that one completed first.
  int64_t lag() const { return lag_; }
  // The most floats one segment holds: a receive slot's size.
  int64_t slot_floats() const { return slot_floats_; }
  // Transfer t, 0 <= t < transfers().
  RingTransfer At(int64_t t) const;

 private:
  RingSchedule(int64_t n, int world, int rank, int64_t segments, int64_t in_flight);

  int64_t n_;
  int world_;
  int rank_;
  int64_t segments_;
  int64_t lag_;
  int64_t slot_floats_;
};

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_RING_SCHEDULE_H_
