#include "experiments/cluster/dilation.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/netem/bandwidth.h"

namespace ringside {

absl::StatusOr<Dilation> ComputeDilation(const ClusterProfile& profile, double host_step_s,
                                         double target_step_s, double node_cpus, bool can_delay) {
  if (!(host_step_s > 0) || !std::isfinite(host_step_s)) {
    return absl::InvalidArgumentError(absl::StrCat("dilation: host step must be > 0 s (got ", host_step_s, ")"));
  }
  if (!(target_step_s > 0) || !std::isfinite(target_step_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dilation: target step must be > 0 s (got ", target_step_s, ")"));
  }
  Dilation d;
  d.host_step_s = host_step_s;
  d.target_step_s = target_step_s;
  d.factor = host_step_s / target_step_s;
  d.node_cpus = node_cpus;
  // Time-dilation: a link of B / d in host time is B in target time; a delay of L in
  // target time is d x L in host time.
  d.nic = PathProfile{profile.nic.bytes_per_s / d.factor, profile.nic.latency_s * d.factor};
  d.intra_node = PathProfile{profile.intra_node.bytes_per_s / d.factor, profile.intra_node.latency_s * d.factor};
  d.latency_emulated = can_delay && profile.nic.latency_s > 0;
  const double cpus = node_cpus > 0 ? node_cpus : 1.0;
  const double drivable = kMaxShapedBytesPerSecPerCpu * cpus;
  const std::string what = absl::StrFormat(
      "cluster %s cannot be emulated here: d = %.3g (host step %.1f ms on %s / target %.3g ms) shapes its "
      "NIC of %s to %s",
      profile.name, d.factor, host_step_s * 1e3,
      node_cpus > 0 ? absl::StrFormat("%.2f CPU", node_cpus) : std::string("the machine"), target_step_s * 1e3,
      FormatBandwidth(profile.nic.bytes_per_s), FormatBandwidth(d.nic.bytes_per_s));
  if (d.nic.bytes_per_s > drivable) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%s, more than a node of %.2f CPU can drive (%s); give the nodes more CPU or pick a slower cluster", what,
        cpus, FormatBandwidth(drivable)));
  }
  if (d.nic.bytes_per_s < kMinShapedBytesPerSec) {
    return absl::OutOfRangeError(absl::StrFormat("%s, below what tc can shape (%s)", what,
                                                 FormatBandwidth(kMinShapedBytesPerSec)));
  }
  return d;
}

std::string DilatedNetworkProfile(const Dilation& d) {
  const double kbit = std::floor(d.nic.bytes_per_s * 8 / 1e3);
  std::string text = absl::StrCat("bw=", FormatBitRate(kbit * 1e3));
  if (d.latency_emulated) {
    absl::StrAppend(&text, ",delay=", static_cast<int64_t>(std::llround(d.nic.latency_s * 1e6)), "us");
  }
  return text;
}

std::string DescribeDilation(const ClusterProfile& profile, const Dilation& d) {
  std::string out = absl::StrFormat(
      "cluster %s emulated with dilation d = %.2f (host step %.1f ms on %s / target %.1f ms): NIC %s -> %s shaped",
      profile.name, d.factor, d.host_step_s * 1e3,
      d.node_cpus > 0 ? absl::StrFormat("%.2f CPU", d.node_cpus) : std::string("the machine"),
      d.target_step_s * 1e3, FormatBandwidth(profile.nic.bytes_per_s), FormatBandwidth(d.nic.bytes_per_s));
  if (profile.nic.latency_s > 0) {
    if (d.latency_emulated) {
      absl::StrAppend(&out, absl::StrFormat("; latency %g us -> %g us", profile.nic.latency_s * 1e6,
                                            d.nic.latency_s * 1e6));
    } else {
      // Two NICs per node-to-node message: what each ring step and each push-pull round
      // trip misses, in the target's time.
      absl::StrAppend(&out, absl::StrFormat("; latency %g us not emulated (no netem: each message is %g us "
                                            "faster than on the target)",
                                            profile.nic.latency_s * 1e6, 2 * profile.nic.latency_s * 1e6));
    }
  }
  return out;
}

}  // namespace ringside
