// The steps the doubling all-reduces (allreduce_recursive_doubling.cc,
// allreduce_halving_doubling.cc) share: the power-of-two core, the fold-in and fold-out
// of the ranks beyond it, and a pair exchange that adds what it receives as it arrives.
// Internal to the algorithms (collective_algorithms.h).
#ifndef RINGSIDE_DDP_RING_DOUBLING_STEPS_H_
#define RINGSIDE_DDP_RING_DOUBLING_STEPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "ddp_ring/collective_algorithms.h"

namespace ringside {

// The largest power of two <= world_size: the ranks the doublings run on.
int PowerOfTwoRanks(int world_size);

// The first exchange tag of collective `tag`: the doublings number their protocol
// steps from here, the same on every rank.
inline uint64_t FirstDoublingStep(uint32_t tag) { return uint64_t{tag} << 8; }

// Sends send [send_n] to `peer` while receiving recv_n floats from it, both directions
// at once over Transfer::Exchange with tag `step` (a zero count skips that direction;
// the peer makes the mirror call). With `add` the received floats land in scratch and
// are added into `recv` as they arrive (when `recv` is also the send buffer, each float
// only once its own value has been sent); without, they land in `recv` directly.
absl::Status ExchangeWithPeer(const CollectiveContext& c, int peer, uint64_t step,
                              const float* send, int64_t send_n, float* recv, int64_t recv_n,
                              bool add);

// The first step at a non-power-of-two world size: ranks r >= P hand their vector to
// rank r - P, which adds it.
absl::Status FoldIn(const CollectiveContext& c, float* data, int64_t n, uint64_t step);

// The last step: ranks r < world_size - P send the result to rank r + P.
absl::Status FoldOut(const CollectiveContext& c, float* data, int64_t n, uint64_t step);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_DOUBLING_STEPS_H_
