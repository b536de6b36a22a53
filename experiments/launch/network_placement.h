// Launching a local job's processes on an emulated cluster network: each local rank
// gets its own node (network namespace, shaped link; see netem/network_emulator.h).
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_NETWORK_PLACEMENT_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_NETWORK_PLACEMENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/launch/launcher.h"
#include "experiments/netem/network_emulator.h"

namespace ringside {

// Creates the network for `profile` ("bw=1gbit,delay=0.5ms", per-role overrides) with
// one node per entry of `roles` (local rank i runs on node i) and sets
// `launch->rank_prefix` so that each rank starts inside its node. Removes networks
// left by killed runs first. PermissionDenied without root; the network is torn down
// when the returned object is destroyed.
absl::StatusOr<std::unique_ptr<EmulatedNetwork>> PlaceRanksInNetwork(
    const std::string& profile, const std::vector<std::string>& roles, LaunchOptions* launch);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_NETWORK_PLACEMENT_H_
