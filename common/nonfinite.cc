#include "common/nonfinite.h"

#include <cmath>
#include <cstring>

namespace ringside {

// The common case (none) is one branch-free integer pass that vectorises: a float is
// NaN or infinite iff its exponent bits are all ones, and then (bits & kExp) + 2^23
// carries into bit 31. (A float sum such as x * 0 would be a serial dependency chain:
// several times slower.) Only a chunk that has one is scanned again for where.
int64_t FirstNonFinite(const float* x, int64_t n) {
  constexpr uint32_t kExp = 0x7f800000u;
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    any |= (bits & kExp) + 0x00800000u;
  }
  if ((any & 0x80000000u) == 0) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

}  // namespace ringside
