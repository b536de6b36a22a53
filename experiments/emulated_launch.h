// Launching a local job's processes on an emulated cluster network: each local rank
// gets its own node (network namespace, shaped link; see network_emulator.h).
#ifndef RINGSIDE_EXPERIMENTS_EMULATED_LAUNCH_H_
#define RINGSIDE_EXPERIMENTS_EMULATED_LAUNCH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/launcher.h"
#include "experiments/network_emulator.h"

namespace ringside {

// Creates the network for `profile` ("bw=1gbit,delay=0.5ms", per-role overrides) with
// one node per entry of `roles` (local rank i runs on node i) and sets
// `launch->rank_prefix` so that each rank starts inside its node. Removes networks
// left by killed runs first. PermissionDenied without root; the network is torn down
// when the returned object is destroyed.
absl::StatusOr<std::unique_ptr<EmulatedNetwork>> PlaceRanksInNetwork(
    const std::string& profile, const std::vector<std::string>& roles, LaunchOptions* launch);

// Holds SIGINT / SIGTERM while an emulated network is set up, so that an interrupt
// cannot kill the process between creating namespaces and tearing them down: the
// signal is recorded instead (Launch, which installs its own handlers, forwards later
// ones to the ranks). Restores the previous handlers when destroyed. One at a time.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  // A signal arrived since construction.
  bool interrupted() const;
};

// This binary's path (commands run through `ip netns exec` cannot use /proc/self/exe,
// which would name `ip`).
absl::StatusOr<std::string> SelfExePath();

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_EMULATED_LAUNCH_H_
