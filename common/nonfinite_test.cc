#include "common/nonfinite.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace ringside {
namespace {

// The first NaN or infinity wherever it is (the integer pass must catch both, and no
// finite value, the largest and the denormals included); -1 for none and for n <= 0.
TEST(FirstNonFinite, FindsTheFirstNanOrInfAndNothingFinite) {
  std::vector<float> x(37, 1.5f);
  x[3] = std::numeric_limits<float>::max();
  x[4] = -std::numeric_limits<float>::max();
  x[5] = std::numeric_limits<float>::denorm_min();
  x[6] = -0.0f;
  EXPECT_EQ(FirstNonFinite(x.data(), static_cast<int64_t>(x.size())), -1);
  EXPECT_EQ(FirstNonFinite(x.data(), 0), -1);
  x[30] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FirstNonFinite(x.data(), static_cast<int64_t>(x.size())), 30);
  x[17] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(FirstNonFinite(x.data(), static_cast<int64_t>(x.size())), 17);
  x[9] = std::nanf("");
  EXPECT_EQ(FirstNonFinite(x.data(), static_cast<int64_t>(x.size())), 9);
  EXPECT_EQ(FirstNonFinite(x.data(), 9), -1);
}

}  // namespace
}  // namespace ringside
