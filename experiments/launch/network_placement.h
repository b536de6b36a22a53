// Launching a local job's processes on emulated cluster nodes: a NodePlan
// (node_plan.h) says which processes share a node; each node gets its own network
// namespace and shaped link (netem/network_emulator.h, --network) and/or its own CPU
// share (netem/cpu_share.h, --node_cpus), which all its processes share.
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_NETWORK_PLACEMENT_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_NETWORK_PLACEMENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/launch/launcher.h"
#include "experiments/launch/node_plan.h"
#include "experiments/netem/netem.h"

namespace ringside {

// The emulation a local job runs on; either part may be absent (null). Destroying it
// tears both down.
struct EmulatedNodes {
  std::unique_ptr<EmulatedNetwork> network;
  std::unique_ptr<EmulatedCpuShares> cpu;
  // The node each local rank runs on (the plan's node_of).
  std::vector<int> node_of;

  // The address local rank `lr` is reached at: its node's under --network, else
  // "127.0.0.1".
  std::string address_of(int local_rank) const;
};

// Creates the network for `profile` (its links, per-role overrides for the plan's node
// roles) and the CPU shares for `node_cpus` (auto: the machine's CPUs / the plan's
// nodes; the plan's slow node gets its factor times that), one of each per node of
// `plan`, either when enabled, and sets `launch->rank_prefix` so that each local rank
// starts inside its node: in its cgroup, then in its namespace. Processes of one node
// share both. When anything is emulated, prints the plan's Summary and the CPU share
// (slow node and its quota named) to stderr, one line each, prefixed "ringside: ".
// Removes what killed runs left first. Everything is checked before anything is
// created: InvalidArgument (one line) for a plan with a slow node but no CPU share, or
// more CPUs than the machine has; PermissionDenied without root.
absl::StatusOr<EmulatedNodes> PlaceRanksOnNodes(const NetworkProfile& profile,
                                                const NodeCpuSpec& node_cpus, const NodePlan& plan,
                                                LaunchOptions* launch);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_NETWORK_PLACEMENT_H_
