#include "experiments/netem/bandwidth.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ringside {

absl::StatusOr<double> ParseBandwidth(absl::string_view text) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  // No unit starts with 'e', so the number is the longest prefix of [0-9.eE+-].
  const size_t split = std::min(trimmed.find_first_not_of("0123456789.eE+-"), trimmed.size());
  double value = 0;
  if (split == 0 || !absl::SimpleAtod(trimmed.substr(0, split), &value)) {
    return absl::InvalidArgumentError(absl::StrCat("bandwidth \"", text, "\": no number"));
  }
  const absl::string_view unit = absl::StripAsciiWhitespace(trimmed.substr(split));
  const std::string lower = absl::AsciiStrToLower(unit);
  double bytes_per_unit = 0;
  const struct {
    const char* name;
    double bits;
  } kBitUnits[] = {{"", 1},     {"bit", 1},     {"bit/s", 1},    {"kbit", 1e3},   {"kbit/s", 1e3},
                   {"mbit", 1e6}, {"mbit/s", 1e6}, {"gbit", 1e9},  {"gbit/s", 1e9}, {"tbit", 1e12},
                   {"tbit/s", 1e12}};
  for (const auto& u : kBitUnits) {
    if (lower == u.name) bytes_per_unit = u.bits / 8;
  }
  const struct {
    const char* name;
    double bytes;
  } kByteUnits[] = {{"B/s", 1},      {"kB/s", 1e3},         {"KB/s", 1e3},
                    {"MB/s", 1e6},   {"GB/s", 1e9},         {"TB/s", 1e12},
                    {"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0}};
  for (const auto& u : kByteUnits) {
    if (unit == u.name) bytes_per_unit = u.bytes;
  }
  if (bytes_per_unit == 0) {
    const bool bps = absl::EndsWith(lower, "bps");
    return absl::InvalidArgumentError(absl::StrCat(
        "bandwidth \"", text, "\": unknown unit \"", unit, "\" (use bit, kbit, mbit, gbit, tbit ",
        "or B/s, MB/s, GB/s, MiB/s", bps ? "; tc reads \"bps\" units as bytes" : "", ")"));
  }
  const double bytes_per_s = value * bytes_per_unit;
  if (!(bytes_per_s > 0) || !std::isfinite(bytes_per_s)) {
    return absl::InvalidArgumentError(absl::StrCat("bandwidth \"", text, "\" must be > 0"));
  }
  return bytes_per_s;
}

absl::StatusOr<std::vector<double>> ParseBandwidthList(absl::string_view text) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    absl::StatusOr<double> b = ParseBandwidth(part);
    if (!b.ok()) return b.status();
    out.push_back(*b);
  }
  if (out.empty()) return absl::InvalidArgumentError("empty bandwidth list");
  return out;
}

std::string FormatBandwidth(double bytes_per_s) {
  const double bits = bytes_per_s * 8;
  if (bits >= 1e12) return absl::StrFormat("%g Tbit/s", bits / 1e12);
  if (bits >= 1e9) return absl::StrFormat("%g Gbit/s", bits / 1e9);
  if (bits >= 1e6) return absl::StrFormat("%g Mbit/s", bits / 1e6);
  if (bits >= 1e3) return absl::StrFormat("%g kbit/s", bits / 1e3);
  return absl::StrFormat("%g bit/s", bits);
}

std::string FormatBitRate(double bits_per_s) {
  const double r = std::round(bits_per_s);
  if (r != 0 && std::fmod(r, 1e9) == 0) return absl::StrFormat("%.0fgbit", r / 1e9);
  if (r != 0 && std::fmod(r, 1e6) == 0) return absl::StrFormat("%.0fmbit", r / 1e6);
  if (r != 0 && std::fmod(r, 1e3) == 0) return absl::StrFormat("%.0fkbit", r / 1e3);
  return absl::StrFormat("%.0fbit", r);
}

}  // namespace ringside
