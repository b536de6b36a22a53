// The statistic every ringside measurement is reported by: the machines are shared and
// noisy, so reports and benches quote medians, never means.
#ifndef RINGSIDE_EXPERIMENTS_SYS_MEDIAN_H_
#define RINGSIDE_EXPERIMENTS_SYS_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace ringside {

// The upper median (element size/2 of the sorted values); 0 for none.
template <typename T>
T Median(std::vector<T> values) {
  if (values.empty()) return T{};
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_SYS_MEDIAN_H_
