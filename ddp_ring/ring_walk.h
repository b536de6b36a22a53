// The pipelined ring's driving loop, shared by the ring all-reduces (allreduce_ring.cc,
// allreduce_ring_compressed.cc). Private to the collective algorithms.
#ifndef RINGSIDE_DDP_RING_RING_WALK_H_
#define RINGSIDE_DDP_RING_RING_WALK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/ring_schedule.h"

namespace ringside {

// Runs `schedule` with `lag` transfers in flight: post transfer t, then complete
// transfer t - lag, so that sending, receiving and adding overlap. Matching is FIFO per
// peer and slot, so the oldest completion on a buffer is the oldest post. `post(x,
// slot)` and `complete(x, slot)` get the transfer and its receive slot, t mod (lag + 1)
// (one slot per transfer in flight). Stops at the first error either returns.
template <typename Post, typename Complete>
absl::Status WalkRing(const RingSchedule& schedule, Post post, Complete complete) {
  const int64_t lag = schedule.lag();
  const int64_t transfers = schedule.transfers();
  for (int64_t t = 0; t < transfers + lag; ++t) {
    if (t < transfers) RINGSIDE_RETURN_IF_ERROR(post(schedule.At(t), t % (lag + 1)));
    if (t < lag) continue;
    RINGSIDE_RETURN_IF_ERROR(complete(schedule.At(t - lag), (t - lag) % (lag + 1)));
  }
  return absl::OkStatus();
}

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_RING_WALK_H_
