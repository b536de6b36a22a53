#include "experiments/launch/network_placement.h"

#include "common/status_macros.h"

namespace ringside {

absl::StatusOr<EmulatedNodes> PlaceRanksOnNodes(const std::string& profile_text,
                                                const std::string& node_cpus,
                                                const std::vector<std::string>& roles,
                                                LaunchOptions* launch) {
  // Everything is checked before anything is created.
  RINGSIDE_ASSIGN_OR_RETURN(NetworkProfile profile, ParseNetworkProfile(profile_text));
  RINGSIDE_ASSIGN_OR_RETURN(NodeCpuSpec cpu_spec, ParseNodeCpus(node_cpus));
  const int nodes = static_cast<int>(roles.size());
  double cpus = 0;
  if (cpu_spec.enabled) {
    RINGSIDE_ASSIGN_OR_RETURN(cpus, ResolveNodeCpus(cpu_spec, nodes, MachineCpus()));
    RINGSIDE_RETURN_IF_ERROR(CheckCpuSharePrivileges());
  }
  if (profile.enabled) RINGSIDE_RETURN_IF_ERROR(CheckNetworkPrivileges());

  EmulatedNodes placed;
  if (profile.enabled) {
    RemoveStaleNetworks().IgnoreError();  // Leftovers of killed runs; best effort.
    RINGSIDE_ASSIGN_OR_RETURN(placed.network, EmulatedNetwork::Create(profile, roles));
  }
  if (cpu_spec.enabled) {
    RemoveStaleCpuShares().IgnoreError();
    RINGSIDE_ASSIGN_OR_RETURN(placed.cpu,
                              EmulatedCpuShares::Create(cpus, nodes, CpuSharePeriodFor(cpus)));
  }
  if (placed.network != nullptr || placed.cpu != nullptr) {
    launch->rank_prefix.assign(nodes, {});
    // The cgroup first: `ip netns exec` mounts a /sys of its own, in which the
    // cgroup hierarchy is not there to join.
    for (int i = 0; i < nodes; ++i) {
      std::vector<std::string>& prefix = launch->rank_prefix[i];
      if (placed.cpu != nullptr) prefix = placed.cpu->CommandPrefix(i);
      if (placed.network != nullptr) {
        const std::vector<std::string> enter = placed.network->CommandPrefix(i);
        prefix.insert(prefix.end(), enter.begin(), enter.end());
      }
    }
  }
  return placed;
}

}  // namespace ringside
