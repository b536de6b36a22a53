// Finding non-finite floats (NaN, +-Inf) in host memory: the parameter server's check of
// every pushed gradient chunk before it is summed (numerical safety, --nan_policy).
// Thread-safe (pure).
#ifndef RINGSIDE_COMMON_NONFINITE_H_
#define RINGSIDE_COMMON_NONFINITE_H_

#include <cstdint>

namespace ringside {

// The index of the first non-finite float of x[0, n), or -1 (also for n <= 0).
int64_t FirstNonFinite(const float* x, int64_t n);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_NONFINITE_H_
