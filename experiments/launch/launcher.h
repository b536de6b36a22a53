// `ringside launch`: a torchrun-style launcher. Starts nproc_per_node copies of a
// command on this node with torchrun's job variables (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_*,
// TORCHELASTIC_RUN_ID / _RESTART_COUNT / _MAX_RESTARTS / _USE_AGENT_STORE=False,
// NCCL_ASYNC_ERROR_HANDLING=1 unless set) and RINGSIDE_RUN_ID, prefixes every line they print with "[rank R] ", and when one of them
// fails stops the others, then restarts the group (up to max_restarts times) or reports
// which rank failed and how.
//
// Several launchers form one job (one per node, --nnodes/--node_rank) when they share
// the rendezvous: the same master_addr:master_port (rank 0 hosts the job's store
// there) and the same run id (the store's key space).
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_LAUNCHER_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc_security.h"

namespace ringside {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // 0: pick a free port (single-node runs only).
  // The job's identity, the same in every launcher of the job. Empty: RunIdFor's
  // default for the rendezvous endpoint (the same in every launcher that uses it).
  std::string run_id;
  // Restarts of the whole group after a rank fails (torchrun's --max_restarts). Each
  // restart re-runs `command` unchanged with TORCHELASTIC_RESTART_COUNT one higher; a
  // program continues from its checkpoint with its own --resume. With nnodes > 1 the
  // launchers restart together (node_rendezvous.h): node 0's launcher then holds
  // master_addr:master_port, and rank 0's store moves to a free port of each round.
  int max_restarts = 0;
  // With restarts across nodes: how long a launcher waits for the others (to join the
  // rendezvous or a round, or to finish a round).
  absl::Duration rdzv_timeout = absl::Seconds(300);
  // With more than one rank on this node and neither OMP_NUM_THREADS nor
  // OPENBLAS_NUM_THREADS set, give every rank OMP_NUM_THREADS=1 and
  // OPENBLAS_NUM_THREADS=1 (torchrun's default), and with `announce_blas_threads` say
  // so in one line on stderr.
  bool one_blas_thread_per_rank = true;
  bool announce_blas_threads = true;
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
  // The job's security (common/rpc_security.h). Its token, the job's shared secret, is
  // passed to every rank as RINGSIDE_TOKEN (never on a command line). Empty token: a
  // single-node job gets a fresh random one (256 bits from /dev/urandom); a multi-node
  // job runs unauthenticated (every node's launcher would need the same one: give
  // --token_file or RINGSIDE_TOKEN), which Launch says in one line on stderr. With
  // restarts across nodes, the launchers' own rendezvous (node_rendezvous.h) is hosted
  // and joined with this security as given (token and TLS).
  RpcSecurity security;
  // False: the ranks write straight to this process's stdout and stderr, without the
  // "[rank R] " prefix (for a one-process job that should look unlaunched).
  bool prefix_output = true;
};

// The run id of a job whose rank 0 hosts the store at `master_addr`:`master_port`
// when none is given: "ringside-<addr>:<port>", so every launcher of the job derives
// the same one.
std::string RunIdFor(const std::string& master_addr, int master_port);

// Blocks until every process exited. OK if all exited 0. Otherwise, once the restarts
// are used up, Aborted with one line naming the first rank that failed and its exit
// status or signal, e.g. "rank 2 failed: exited with status 1 (the others were
// stopped)". Each restart is announced in one line on stderr. SIGINT/SIGTERM received
// by the launcher are forwarded to the children and end the job (no restart). A
// program that cannot be started (not found) is NotFound and the ranks already
// started are stopped. Not thread-safe (catches signals for its duration:
// sys/signal_catcher.h).
absl::Status Launch(const LaunchOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_LAUNCHER_H_
