// Halving-doubling (Rabenseifner) all-reduce (collective_algorithms.h) over the direct
// pairs.
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/numeric/bits.h"
#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"
#include "ddp_ring/doubling_steps.h"

namespace ringside {
namespace {

// A range [lo, hi) of the vector.
struct Range {
  int64_t lo = 0;
  int64_t hi = 0;
};

// Ranks r < P: the reduce-scatter by recursive halving, then the all-gather by
// recursive doubling that retraces it. `step` is advanced past both.
absl::Status HalveThenDouble(const CollectiveContext& c, float* data, int64_t n, int p2,
                             uint64_t& step) {
  std::vector<Range> ranges;  // The range held before each halving.
  Range held{0, n};
  for (int mask = p2 / 2; mask >= 1; mask /= 2, ++step) {
    const int64_t mid = held.lo + (held.hi - held.lo) / 2;
    const bool lower = (c.rank & mask) == 0;
    const Range keep = lower ? Range{held.lo, mid} : Range{mid, held.hi};
    const Range give = lower ? Range{mid, held.hi} : Range{held.lo, mid};
    RINGSIDE_RETURN_IF_ERROR(ExchangeWithPeer(c, c.rank ^ mask, step, data + give.lo,
                                              give.hi - give.lo, data + keep.lo,
                                              keep.hi - keep.lo, /*add=*/true));
    ranges.push_back(held);
    held = keep;
  }
  for (int mask = 1; mask < p2; mask *= 2, ++step) {
    const Range parent = ranges.back();
    ranges.pop_back();
    // The partner holds the other half of the parent range.
    const int64_t mid = parent.lo + (parent.hi - parent.lo) / 2;
    const bool lower = (c.rank & mask) == 0;
    const Range other = lower ? Range{mid, parent.hi} : Range{parent.lo, mid};
    RINGSIDE_RETURN_IF_ERROR(ExchangeWithPeer(c, c.rank ^ mask, step, data + held.lo,
                                              held.hi - held.lo, data + other.lo,
                                              other.hi - other.lo, /*add=*/false));
    held = parent;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status HalvingDoublingAllReduce(const CollectiveContext& c, float* data, int64_t n) {
  const int p2 = PowerOfTwoRanks(c.world_size);
  uint64_t step = FirstDoublingStep(c.tag);
  RINGSIDE_RETURN_IF_ERROR(FoldIn(c, data, n, step++));
  if (c.rank < p2) {
    RINGSIDE_RETURN_IF_ERROR(HalveThenDouble(c, data, n, p2, step));
  } else {
    // The folded ranks skip the core's 2 lg P steps.
    step += 2 * static_cast<uint64_t>(absl::bit_width(static_cast<unsigned>(p2)) - 1);
  }
  return FoldOut(c, data, n, step);
}

}  // namespace ringside
