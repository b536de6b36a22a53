#include "ddp_ring/ring_schedule.h"

#include <algorithm>

namespace ringside {
namespace {

int Mod(int a, int w) { return (a % w + w) % w; }

}  // namespace

RingChunk RingChunkOf(int64_t n, int world, int c) {
  c = Mod(c, world);
  const int64_t begin = n * c / world;
  return {c, begin, n * (c + 1) / world - begin};
}

RingStepChunks RingStepChunksOf(int world, int rank, RingPhase phase, int step) {
  if (phase == RingPhase::kReduceScatter) {
    return {Mod(rank - step, world), Mod(rank - step - 1, world)};
  }
  return {Mod(rank + 1 - step, world), Mod(rank - step, world)};
}

RingSchedule RingSchedule::Pipelined(int64_t n, int world, int rank) {
  const int64_t largest = (n + world - 1) / world;
  constexpr int64_t kSegmentFloats = kRingSegmentBytes / sizeof(float);
  const int64_t segments = std::max<int64_t>(1, (largest + kSegmentFloats - 1) / kSegmentFloats);
  return RingSchedule(n, world, rank, segments, kRingSegmentsInFlight);
}

RingSchedule RingSchedule::Unsegmented(int64_t n, int world, int rank) {
  return RingSchedule(n, world, rank, /*segments=*/1, /*in_flight=*/1);
}

RingSchedule::RingSchedule(int64_t n, int world, int rank, int64_t segments, int64_t in_flight)
    : n_(n),
      world_(world),
      rank_(rank),
      segments_(segments),
      lag_(std::min<int64_t>(in_flight - 1, segments - 1)),
      slot_floats_(((n + world - 1) / world + segments - 1) / segments) {}

RingTransfer RingSchedule::At(int64_t t) const {
  const int64_t reduce_steps = (world_ - 1) * segments_;
  RingTransfer x;
  x.phase = t < reduce_steps ? RingPhase::kReduceScatter : RingPhase::kAllGather;
  x.step = static_cast<int>((x.reduce() ? t : t - reduce_steps) / segments_);
  x.segment = t % segments_;
  const RingStepChunks chunks = RingStepChunksOf(world_, rank_, x.phase, x.step);
  x.send_chunk = RingChunkOf(n_, world_, chunks.send);
  x.recv_chunk = RingChunkOf(n_, world_, chunks.recv);
  const int64_t k = x.segment;
  const int64_t send_len = x.send_chunk.count, recv_len = x.recv_chunk.count;
  const int64_t send_lo = send_len * k / segments_, recv_lo = recv_len * k / segments_;
  x.send_at = x.send_chunk.begin + send_lo;
  x.send_n = send_len * (k + 1) / segments_ - send_lo;
  x.recv_at = x.recv_chunk.begin + recv_lo;
  x.recv_n = recv_len * (k + 1) / segments_ - recv_lo;
  return x;
}

}  // namespace ringside
