#include "experiments/cluster/node_layout.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace ringside {

double DeviceCpus(double node_cpus, int devices_per_node) {
  if (!(node_cpus > 0)) return 0;
  if (devices_per_node <= 1) return node_cpus;  // One device: the node's share as given.
  const double share = node_cpus / std::max(1, devices_per_node);
  // The small epsilon keeps a share that is already a multiple of the resolution
  // (0.4 / 2 = 0.2, held as 0.19999...) from losing a step.
  return std::floor(share / kCpuShareResolution + 1e-6) * kCpuShareResolution;
}

absl::StatusOr<int> ClusterRanksPerNode(const ClusterProfile& profile, int processes,
                                        const std::string& processes_text, int requested,
                                        const std::string& requested_name) {
  const int k = std::max(1, profile.devices_per_node);
  if (requested > 0 && requested != k) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s=%d differs from cluster %s's %d device%s per node: a device is a rank, so its nodes hold %d "
        "(drop %s)",
        requested_name, requested, profile.name, k, k == 1 ? "" : "s", k, requested_name));
  }
  if (processes % k != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cluster %s has %d devices per node: %s do not fill whole nodes (%d is not a multiple of %d)",
        profile.name, k, processes_text, processes, k));
  }
  return k;
}

}  // namespace ringside
