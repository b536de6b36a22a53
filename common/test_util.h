// Helpers shared by the equivalence tests (testonly).
#ifndef RINGSIDE_COMMON_TEST_UTIL_H_
#define RINGSIDE_COMMON_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <vector>

namespace ringside {

// max_i |a[i] - ref[i]| / max_i |ref[i]|: how far `a` is from `ref` relative to the
// reference's scale. `a` must be at least as long as `ref`.
inline double MaxRelativeDifference(const std::vector<float>& a, const std::vector<float>& ref) {
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - ref[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(ref[i])));
  }
  return max_diff / max_ref;
}

}  // namespace ringside

#endif  // RINGSIDE_COMMON_TEST_UTIL_H_
