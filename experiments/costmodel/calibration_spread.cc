#include "experiments/costmodel/calibration_spread.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/sys/median.h"

namespace ringside {
namespace {

// How a constant is shown: value x scale, then the unit, chosen by the field's name.
struct DisplayUnit {
  double scale;
  const char* unit;
};

DisplayUnit UnitOf(const std::string& name) {
  if (absl::EndsWith(name, "bytes_per_s")) return {1e-9, " GB/s"};
  if (absl::EndsWith(name, "_s_per_byte")) return {1e9, " ns/B"};
  if (absl::EndsWith(name, "alpha_s") || absl::EndsWith(name, "per_call_s")) return {1e6, " us"};
  if (absl::EndsWith(name, "_s")) return {1e3, " ms"};
  return {1, ""};
}

std::string Number(double value, const DisplayUnit& u) {
  return absl::StrFormat("%.4g", value * u.scale);
}

std::string Percent(double fraction) {
  return std::isinf(fraction) ? std::string("inf%") : absl::StrFormat("%.3g%%", fraction * 100);
}

}  // namespace

absl::StatusOr<ConstantSpread> SummarizeRepeats(const std::string& name,
                                                std::vector<double> values) {
  if (values.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("calibration spread: ", name, " has no values"));
  }
  for (double v : values) {
    if (!std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "calibration spread: %s has the value %g, must be finite and >= 0", name, v));
    }
  }
  ConstantSpread s;
  s.name = name;
  s.median = Median(values);
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  if (s.max == s.min) {
    s.spread = 0;
  } else if (s.median > 0) {
    s.spread = (s.max - s.min) / s.median;
  } else {
    s.spread = std::numeric_limits<double>::infinity();
  }
  s.values = std::move(values);
  return s;
}

bool IsUnsteady(const ConstantSpread& c) { return c.spread > kUnsteadySpread; }

std::string DescribeSpread(const ConstantSpread& c) {
  const DisplayUnit u = UnitOf(c.name);
  if (c.values.size() < 2) {
    return absl::StrCat(c.name, " ", Number(c.median, u), u.unit, " (1 repeat)");
  }
  return absl::StrCat(c.name, " ", Number(c.median, u), u.unit, " (min-max ", Number(c.min, u), "-",
                      Number(c.max, u), u.unit, ", ", Percent(c.spread), ")");
}

std::string SpreadWarning(const ConstantSpread& c) {
  if (!IsUnsteady(c)) return "";
  const DisplayUnit u = UnitOf(c.name);
  const std::string values =
      absl::StrJoin(c.values, ", ", [&u](std::string* out, double v) { out->append(Number(v, u)); });
  return absl::StrCat("calibrate: warning: ", c.name, " varies by ", Percent(c.spread),
                      " between repeats (", values, u.unit, "): the median ", Number(c.median, u),
                      u.unit, " is kept");
}

}  // namespace ringside
