// Recursive doubling all-reduce (collective_algorithms.h) over the direct pairs.
#include <cstdint>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"
#include "ddp_ring/doubling_steps.h"

namespace ringside {

absl::Status RecursiveDoublingAllReduce(const CollectiveContext& c, float* data, int64_t n) {
  const int p2 = PowerOfTwoRanks(c.world_size);
  uint64_t step = FirstDoublingStep(c.tag);
  RINGSIDE_RETURN_IF_ERROR(FoldIn(c, data, n, step++));
  for (int mask = 1; mask < p2; mask *= 2, ++step) {
    if (c.rank < p2) {
      RINGSIDE_RETURN_IF_ERROR(
          ExchangeWithPeer(c, c.rank ^ mask, step, data, n, data, n, /*add=*/true));
    }
  }
  return FoldOut(c, data, n, step);
}

}  // namespace ringside
