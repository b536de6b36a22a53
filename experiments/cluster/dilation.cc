#include "experiments/cluster/dilation.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/netem/bandwidth.h"

namespace ringside {
namespace {

std::string CpuText(double cpus) {
  return cpus > 0 ? absl::StrFormat("%.2f CPU", cpus) : std::string("the machine");
}

// Rounded down to a whole kbit/s, in tc's grammar.
std::string KbitRate(double bytes_per_s) {
  return FormatBitRate(std::floor(bytes_per_s * 8 / 1e3) * 1e3);
}

}  // namespace

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
  d.devices_per_node = std::max(1, profile.devices_per_node);
  d.device_cpus = DeviceCpus(node_cpus, d.devices_per_node);
  // Time-dilation: a link of B / d in host time is B in target time; a delay of L in
  // target time is d x L in host time.
  d.nic = PathProfile{profile.nic.bytes_per_s / d.factor, profile.nic.latency_s * d.factor};
  d.intra_node = PathProfile{profile.intra_node.bytes_per_s / d.factor, profile.intra_node.latency_s * d.factor};
  d.latency_emulated = can_delay && profile.nic.latency_s > 0;
  const double cpus = node_cpus > 0 ? node_cpus : 1.0;
  d.drivable_bytes_per_s = kMaxShapedBytesPerSecPerCpu * cpus;
  const std::string what = absl::StrFormat(
      "cluster %s cannot be emulated here: d = %.3g (host step %.1f ms on %s / target %.3g ms) shapes its ",
      profile.name, d.factor, host_step_s * 1e3, CpuText(d.device_cpus), target_step_s * 1e3);
  const std::string nic = absl::StrFormat("%sNIC of %s to %s", what, FormatBandwidth(profile.nic.bytes_per_s),
                                          FormatBandwidth(d.nic.bytes_per_s));
  if (d.nic.bytes_per_s > d.drivable_bytes_per_s) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%s, more than a node of %.2f CPU can drive (%s); give the nodes more CPU or pick a slower cluster", nic,
        cpus, FormatBandwidth(d.drivable_bytes_per_s)));
  }
  if (d.nic.bytes_per_s < kMinShapedBytesPerSec) {
    return absl::OutOfRangeError(absl::StrFormat("%s, below what tc can shape (%s)", nic,
                                                 FormatBandwidth(kMinShapedBytesPerSec)));
  }
  if (d.devices_per_node > 1) {
    // The node's devices send at once (a ring inside one node, halving-doubling's
    // inner steps): lo, one queue for all of them, carries their sum.
    const double loopback = d.devices_per_node * d.intra_node.bytes_per_s;
    if (loopback < kMinShapedBytesPerSec) {
      return absl::OutOfRangeError(absl::StrFormat(
          "%sintra-node path of %s (x %d devices) to %s, below what tc can shape (%s)", what,
          FormatBandwidth(profile.intra_node.bytes_per_s), d.devices_per_node, FormatBandwidth(loopback),
          FormatBandwidth(kMinShapedBytesPerSec)));
    }
    d.intra_node_emulated = loopback <= d.drivable_bytes_per_s;
    if (d.intra_node_emulated) d.loopback_bytes_per_s = loopback;
  }
  return d;
}

std::string DilatedNetworkProfile(const Dilation& d) {
  std::string text = absl::StrCat("bw=", KbitRate(d.nic.bytes_per_s));
  if (d.latency_emulated) {
    absl::StrAppend(&text, ",delay=", static_cast<int64_t>(std::llround(d.nic.latency_s * 1e6)), "us");
  }
  if (d.intra_node_emulated) {
    absl::StrAppend(&text, ",lo.bw=", KbitRate(d.loopback_bytes_per_s));
    if (d.latency_emulated && d.intra_node.latency_s > 0) {
      absl::StrAppend(&text, ",lo.delay=", static_cast<int64_t>(std::llround(d.intra_node.latency_s * 1e6)), "us");
    }
  }
  return text;
}

std::string DescribeDilation(const ClusterProfile& profile, const Dilation& d) {
  const int k = d.devices_per_node;
  const std::string host =
      k > 1 ? absl::StrFormat("%s, one of %d devices of a node of %s", CpuText(d.device_cpus), k, CpuText(d.node_cpus))
            : CpuText(d.node_cpus);
  const std::string kernels = d.host_kernels.empty() ? "" : absl::StrCat(", ", d.host_kernels);
  std::string out = absl::StrFormat(
      "cluster %s emulated with dilation d = %.2f (host step %.1f ms on %s%s / target %.1f ms): NIC %s -> %s shaped",
      profile.name, d.factor, d.host_step_s * 1e3, host, kernels, d.target_step_s * 1e3, FormatBandwidth(profile.nic.bytes_per_s),
      FormatBandwidth(d.nic.bytes_per_s));
  if (k > 1) {
    absl::StrAppend(&out, absl::StrFormat(", shared by the node's %d ranks", k));
    if (d.intra_node_emulated) {
      absl::StrAppend(&out, absl::StrFormat("; intra-node %s -> %s per device, %d x that = %s shaped on each node's loopback",
                                            FormatBandwidth(profile.intra_node.bytes_per_s),
                                            FormatBandwidth(d.intra_node.bytes_per_s), k,
                                            FormatBandwidth(d.loopback_bytes_per_s)));
    } else {
      absl::StrAppend(&out, absl::StrFormat(
                                "; intra-node path not emulated: loopback is slower than %d x %s / d = %s, more "
                                "than a node of %s can drive (%s): ranks of one node exchange slower than on the "
                                "target",
                                k, FormatBandwidth(profile.intra_node.bytes_per_s),
                                FormatBandwidth(k * d.intra_node.bytes_per_s), CpuText(d.node_cpus > 0 ? d.node_cpus : 1),
                                FormatBandwidth(d.drivable_bytes_per_s)));
    }
  }
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
