// Launching a local job's processes on emulated cluster nodes: each local rank gets
// its own node, with its own network namespace and shaped link
// (netem/network_emulator.h, --network) and/or its own CPU share (netem/cpu_share.h,
// --node_cpus).
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_NETWORK_PLACEMENT_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_NETWORK_PLACEMENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/launch/launcher.h"
#include "experiments/netem/netem.h"

namespace ringside {

// The emulation a local job runs on; either part may be absent (null). Destroying it
// tears both down.
struct EmulatedNodes {
  std::unique_ptr<EmulatedNetwork> network;
  std::unique_ptr<EmulatedCpuShares> cpu;
};

// Creates the network for `profile` ("bw=1gbit,delay=0.5ms", per-role overrides) and
// the CPU shares for `node_cpus` ("", "auto" or a number of CPUs per node), with one
// node per entry of `roles` (local rank i runs on node i), and sets
// `launch->rank_prefix` so that each rank starts inside its node: in its cgroup, then
// in its namespace. Removes what killed runs left first. Bad `node_cpus`
// (InvalidArgument, one line) is refused before anything is created;
// PermissionDenied without root.
absl::StatusOr<EmulatedNodes> PlaceRanksOnNodes(const std::string& profile,
                                                const std::string& node_cpus,
                                                const std::vector<std::string>& roles,
                                                LaunchOptions* launch);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_NETWORK_PLACEMENT_H_
