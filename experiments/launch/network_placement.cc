#include "experiments/launch/network_placement.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ringside {

std::string EmulatedNodes::address_of(int local_rank) const {
  if (network == nullptr) return "127.0.0.1";
  return network->address(node_of.at(local_rank));
}

absl::StatusOr<EmulatedNodes> PlaceRanksOnNodes(const NetworkProfile& profile,
                                                const NodeCpuSpec& cpu_spec, const NodePlan& plan,
                                                LaunchOptions* launch) {
  // Everything is checked before anything is created.
  const int nodes = plan.num_nodes();
  if (plan.slow_node >= 0 && !cpu_spec.enabled) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slow_node needs --node_cpus (a slow node gets a fraction of the "
                     "others' CPU share)"));
  }
  std::vector<double> cpus;
  if (cpu_spec.enabled) {
    RINGSIDE_ASSIGN_OR_RETURN(double per_node, ResolveNodeCpus(cpu_spec, nodes, MachineCpus()));
    cpus.assign(nodes, per_node);
    if (plan.slow_node >= 0) cpus[plan.slow_node] *= plan.slow_factor;
    RINGSIDE_RETURN_IF_ERROR(CheckCpuSharePrivileges());
  }
  if (profile.enabled) RINGSIDE_RETURN_IF_ERROR(CheckNetworkPrivileges());

  EmulatedNodes placed;
  placed.node_of = plan.node_of;
  if (profile.enabled) {
    RemoveStaleNetworks().IgnoreError();  // Leftovers of killed runs; best effort.
    RINGSIDE_ASSIGN_OR_RETURN(placed.network, EmulatedNetwork::Create(profile, plan.roles));
  }
  if (cpu_spec.enabled) {
    RemoveStaleCpuShares().IgnoreError();
    // One period for all, long enough for the smallest share's quota.
    const double smallest = *std::min_element(cpus.begin(), cpus.end());
    RINGSIDE_ASSIGN_OR_RETURN(placed.cpu,
                              EmulatedCpuShares::Create(cpus, CpuSharePeriodFor(smallest)));
  }
  if (placed.network != nullptr || placed.cpu != nullptr) {
    const int ranks = static_cast<int>(plan.node_of.size());
    launch->rank_prefix.assign(ranks, {});
    // The cgroup first: `ip netns exec` mounts a /sys of its own, in which the
    // cgroup hierarchy is not there to join.
    for (int lr = 0; lr < ranks; ++lr) {
      const int node = plan.node_of[lr];
      std::vector<std::string>& prefix = launch->rank_prefix[lr];
      if (placed.cpu != nullptr) prefix = placed.cpu->CommandPrefix(node);
      if (placed.network != nullptr) {
        const std::vector<std::string> enter = placed.network->CommandPrefix(node);
        prefix.insert(prefix.end(), enter.begin(), enter.end());
      }
    }
    std::string line = absl::StrCat("ringside: ", plan.Summary());
    if (plan.ranks_per_node > 1) absl::StrAppend(&line, " (", plan.ranks_per_node, " per node)");
    if (placed.network != nullptr) {
      absl::StrAppend(&line, "; links ", ProfileToString(placed.network->profile()));
    }
    absl::FPrintF(stderr, "%s\n", line);
    if (placed.cpu != nullptr) {
      std::string cpu_line = absl::StrCat("ringside: CPU share: ", placed.cpu->Describe());
      if (plan.slow_node >= 0) {
        const int s = plan.slow_node;
        absl::StrAppendFormat(&cpu_line, "; slow node: node %d (holding %s) at %g x %g = %g CPU, quota %s per %s",
                              s, plan.slow_label, plan.slow_factor, cpus[s] / plan.slow_factor,
                              cpus[s], absl::FormatDuration(placed.cpu->quota(s)),
                              absl::FormatDuration(placed.cpu->period()));
      }
      absl::FPrintF(stderr, "%s\n", cpu_line);
    }
  }
  return placed;
}

}  // namespace ringside
