// Link rates: the one grammar every flag and spec field that names a bandwidth uses
// (`--network=bw=...`, `--links=...`, ExperimentSpec.network), and their formatting.
//
//   <number>[ ]<unit>
//   bits per second (unit case-insensitive, decimal prefixes, as tc):
//       bit kbit mbit gbit tbit, each also written with "/s" (1gbit = 1e9 bit/s)
//   bytes per second (B upper-case): B/s kB/s KB/s MB/s GB/s TB/s KiB/s MiB/s GiB/s
//   no unit: bits per second, as tc reads a bare number
// "bps"-style units (mbps, gbps, ...) are refused: tc reads "mbps" as megaBYTES per
// second, most people as megabits, and a silent factor of 8 is the worst answer.
#ifndef RINGSIDE_EXPERIMENTS_NETEM_BANDWIDTH_H_
#define RINGSIDE_EXPERIMENTS_NETEM_BANDWIDTH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside {

// Bytes per second. InvalidArgument (one line, naming the text) for anything else, a
// value <= 0 or a non-finite one.
absl::StatusOr<double> ParseBandwidth(absl::string_view text);
// A comma-separated list of ParseBandwidth's forms; InvalidArgument if empty.
absl::StatusOr<std::vector<double>> ParseBandwidthList(absl::string_view text);
// For people: "1 Gbit/s", "100 Mbit/s", "2.5 Gbit/s" (bytes/s shown in bits per second).
std::string FormatBandwidth(double bytes_per_s);
// For tc and profiles, parseable again: "1gbit", "12500kbit", "7bit" (bits per second,
// rounded to whole bits, the largest unit that divides it).
std::string FormatBitRate(double bits_per_s);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_NETEM_BANDWIDTH_H_
