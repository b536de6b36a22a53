// `ringside launch`: a torchrun-style launcher. Starts nproc_per_node copies of a
// command on this node with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT (and GROUP_RANK, RINGSIDE_RUN_ID) set, prefixes every line
// they print with "[rank R] ", and when one of them fails stops the others and reports
// which rank failed and how.
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_LAUNCHER_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringside {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // 0: pick a free port (single-node runs only).
  std::string run_id;       // Empty: derived from the launcher's pid and time.
  // After one rank fails: SIGTERM to the others, SIGKILL after this grace period.
  absl::Duration kill_grace = absl::Seconds(5);
  std::vector<std::string> command;  // Program and arguments (PATH is searched).
  // Optional name of each local rank in output prefixes and failure messages, e.g.
  // "server 0" (default: "rank R").
  std::vector<std::string> labels;
  // Optional, per local rank: words run before `command` (e.g. {"ip", "netns", "exec",
  // NS} to start the rank inside an emulated node) and extra NAME=VALUE environment.
  std::vector<std::vector<std::string>> rank_prefix;
  std::vector<std::vector<std::string>> rank_env;
};

// Blocks until every process exited. OK if all exited 0. Otherwise Aborted with one
// line naming the first rank that failed and its exit status or signal, e.g.
// "rank 2 failed: exited with status 1 (the others were stopped)". SIGINT/SIGTERM
// received by the launcher are forwarded to the children. A program that cannot be
// started (not found) is NotFound and the ranks already started are stopped. Not
// thread-safe (catches signals for its duration: sys/signal_catcher.h).
absl::Status Launch(const LaunchOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_LAUNCHER_H_
