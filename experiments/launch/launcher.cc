#include "experiments/launch/launcher.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/rpc_security.h"
#include "common/status_macros.h"
#include "experiments/launch/node_rendezvous.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

struct Child {
  int rank = 0;
  std::string label;    // "rank R", or LaunchOptions::labels[local rank].
  std::unique_ptr<Subprocess> process;  // stdout+stderr into one pipe (out_fd()).
  std::string partial;  // Output not yet ended by a newline.
};

// Writes complete lines of `data` with the rank prefix; keeps the tail.
void Emit(Child* c, const char* data, size_t n, bool flush) {
  c->partial.append(data, n);
  size_t start = 0;
  for (size_t nl; (nl = c->partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = absl::StrCat("[", c->label, "] ",
                                    absl::string_view(c->partial).substr(start, nl - start), "\n");
    fwrite(line.data(), 1, line.size(), stdout);
  }
  c->partial.erase(0, start);
  if (flush && !c->partial.empty()) {
    std::string line = absl::StrCat("[", c->label, "] ", c->partial, "\n");
    fwrite(line.data(), 1, line.size(), stdout);
    c->partial.clear();
  }
  fflush(stdout);
}

// Variables the launcher sets for every rank (torchrun's set, local_elastic_agent.py,
// and ringside's run id); inherited values are dropped.
constexpr const char* kJobVariables[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE",
    "RINGSIDE_RUN_ID", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE"};

// Random bytes in a generated job token (64 hex characters).
constexpr int kGeneratedTokenBytes = 32;

absl::Status CheckOptions(const LaunchOptions& o) {
  if (o.nproc_per_node < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch needs --nproc_per_node >= 1, --nnodes >= 1 and 0 <= --node_rank < --nnodes (got ",
        o.nproc_per_node, ", ", o.nnodes, ", ", o.node_rank, ")"));
  }
  if (o.max_restarts < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--max_restarts must be >= 0, got ", o.max_restarts));
  }
  if (o.command.empty()) return absl::InvalidArgumentError("launch needs a command after --");
  return absl::OkStatus();
}

// What every rank of one round of the group shares.
struct Round {
  int port = 0;
  std::string run_id;
  int restart_count = 0;               // TORCHELASTIC_RESTART_COUNT.
  std::vector<std::string> extra_env;  // NAME=VALUE for every rank (BLAS threads, NCCL).
};

// The spawn of local rank `lr`: its prefix and the command, the job's variables, its
// output into one pipe.
SpawnOptions RankSpawn(const LaunchOptions& o, int lr, const Round& round) {
  SpawnOptions so;
  if (lr < static_cast<int>(o.rank_prefix.size())) so.argv = o.rank_prefix[lr];
  so.argv.insert(so.argv.end(), o.command.begin(), o.command.end());
  for (const char* name : kJobVariables) so.env_unset.push_back(name);
  const int rank = o.node_rank * o.nproc_per_node + lr;
  const int world_size = o.nnodes * o.nproc_per_node;
  so.env_set = {absl::StrCat("RANK=", rank),
                absl::StrCat("LOCAL_RANK=", lr),
                absl::StrCat("WORLD_SIZE=", world_size),
                absl::StrCat("LOCAL_WORLD_SIZE=", o.nproc_per_node),
                absl::StrCat("MASTER_ADDR=", o.master_addr),
                absl::StrCat("MASTER_PORT=", round.port),
                absl::StrCat("GROUP_RANK=", o.node_rank),
                absl::StrCat("GROUP_WORLD_SIZE=", o.nnodes),
                // One role ("default", as torchrun's): role ranks are the global ones.
                absl::StrCat("ROLE_RANK=", rank),
                "ROLE_NAME=default",
                absl::StrCat("ROLE_WORLD_SIZE=", world_size),
                absl::StrCat("RINGSIDE_RUN_ID=", round.run_id),
                absl::StrCat("TORCHELASTIC_RUN_ID=", round.run_id),
                absl::StrCat("TORCHELASTIC_RESTART_COUNT=", round.restart_count),
                absl::StrCat("TORCHELASTIC_MAX_RESTARTS=", o.max_restarts),
                // Rank 0 hosts the store; there is no agent store to join.
                "TORCHELASTIC_USE_AGENT_STORE=False"};
  so.env_set.insert(so.env_set.end(), round.extra_env.begin(), round.extra_env.end());
  if (lr < static_cast<int>(o.rank_env.size())) {
    so.env_set.insert(so.env_set.end(), o.rank_env[lr].begin(), o.rank_env[lr].end());
  }
  // A launcher killed outright (SIGKILL) takes its ranks with it.
  so.die_with_parent = true;
  if (o.prefix_output) {
    so.out = ChildStream::kPipe;
    so.err = ChildStream::kStdout;
  }  // Else both inherited.
  return so;
}

// torchrun's default: one BLAS/OpenMP thread per rank when several ranks share this
// node's cores and the user set neither variable. Announced once on stderr if asked.
std::vector<std::string> BlasThreadEnv(const LaunchOptions& o) {
  if (!o.one_blas_thread_per_rank || o.nproc_per_node < 2 ||
      std::getenv("OMP_NUM_THREADS") != nullptr || std::getenv("OPENBLAS_NUM_THREADS") != nullptr) {
    return {};
  }
  if (o.announce_blas_threads) {
    absl::FPrintF(stderr,
                  "ringside: %d processes on this node (%d cores): OMP_NUM_THREADS=1 and "
                  "OPENBLAS_NUM_THREADS=1 for each (set either variable to choose otherwise)\n",
                  o.nproc_per_node, std::thread::hardware_concurrency());
  }
  return {"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"};
}

// Reads what the children printed (waits up to 100 ms for any) and prints it prefixed.
void PumpOutput(std::vector<Child>* children) {
  std::vector<pollfd> fds;
  std::vector<Child*> owners;
  for (Child& c : *children) {
    if (c.process != nullptr && c.process->out_fd() >= 0) {
      fds.push_back({c.process->out_fd(), POLLIN, 0});
      owners.push_back(&c);
    }
  }
  if (fds.empty()) {
    absl::SleepFor(absl::Milliseconds(100));
    return;
  }
  poll(fds.data(), fds.size(), 100);
  char buf[4096];
  for (size_t i = 0; i < fds.size(); ++i) {
    if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
    if (n > 0) {
      Emit(owners[i], buf, static_cast<size_t>(n), false);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      Emit(owners[i], "", 0, true);
      owners[i]->process->CloseOut();
    }
  }
}

// The job's outcome once every child exited: the process that failed first. That is
// the first to exit with a failure, unless another was stopped (SIGSTOP) at that
// moment: a hung process does not exit, its peers time out on it and exit first.
absl::Status Outcome(const std::vector<Child>& children, const Child* first_failed,
                     const Child* hung, int nproc) {
  if (first_failed != nullptr && hung != nullptr) {
    return absl::AbortedError(absl::StrCat(
        hung->label, " hung (its process was stopped, e.g. by SIGSTOP, while ",
        first_failed->label, " failed: ", first_failed->process->ExitDescription(), ")",
        nproc > 1 ? " (the others were stopped)" : ""));
  }
  if (first_failed != nullptr) {
    return absl::AbortedError(absl::StrCat(first_failed->label, " failed: ",
                                           first_failed->process->ExitDescription(),
                                           nproc > 1 ? " (the others were stopped)" : ""));
  }
  for (const Child& c : children) {
    if (!c.process->succeeded()) {
      return absl::AbortedError(absl::StrCat(c.label, " failed: ", c.process->ExitDescription()));
    }
  }
  return absl::OkStatus();
}

// One round's processes on this node, and the state of stopping them.
struct Group {
  std::vector<Child> children;
  const Child* first_failed = nullptr;
  // The first child (in rank order) that was stopped when first_failed was reaped.
  Child* hung = nullptr;
  bool stopping = false;
  absl::Time kill_at = absl::InfiniteFuture();
  absl::Time all_exited_at = absl::InfiniteFuture();

  // Protocol step: stop every rank still running, SIGKILL after the grace period.
  // A stopped (SIGSTOP) rank is continued, so that it gets the signal too.
  void StopAll(int sig, absl::Duration grace) {
    for (Child& c : children) {
      c.process->Signal(sig);
      c.process->Signal(SIGCONT);
    }
    if (!stopping) kill_at = absl::Now() + grace;
    stopping = true;
  }

  // Reaps what exited; the first rank that fails stops the others (they would hang or
  // fail). True once every rank exited and its output was drained.
  //
  // Several ranks may be found failed in one pass (a pass comes every 100 ms or so): a
  // rank killed by a signal and a peer that exited with an error on losing it. The
  // signal is the cause and the error its echo, so a rank killed by a signal is named
  // before one that exited with a status; among equals, the lowest rank.
  bool Reap(absl::Duration grace) {
    bool all_exited = true, pipes_open = false;
    Child* failed_now = nullptr;
    for (Child& c : children) {
      if (!c.process->exited() && c.process->Poll() && !c.process->succeeded() &&
          first_failed == nullptr && !stopping) {
        if (failed_now == nullptr ||
            (c.process->killed_by_signal() && !failed_now->process->killed_by_signal())) {
          failed_now = &c;
        }
      }
      all_exited &= c.process->exited();
      pipes_open |= c.process->out_fd() >= 0;
    }
    if (failed_now != nullptr) {
      first_failed = failed_now;
      for (Child& other : children) {
        if (!other.process->exited() && IsStopped(other.process->pid())) {
          hung = &other;
          break;
        }
      }
      StopAll(SIGTERM, grace);
      // A hung process has nothing to save: it goes at once.
      if (hung != nullptr) hung->process->Signal(SIGKILL);
    }
    if (stopping && absl::Now() >= kill_at) {
      for (Child& c : children) c.process->Signal(SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
    if (!all_exited) return false;
    // Drain what is left, but never wait on a pipe some grandchild keeps open.
    if (all_exited_at == absl::InfiniteFuture()) all_exited_at = absl::Now();
    return !pipes_open || stopping || absl::Now() - all_exited_at > absl::Seconds(2);
  }
};

// Starts every local rank of `round`; on a spawn failure, the ranks already started
// are in `group` and the error is returned.
absl::Status SpawnGroup(const LaunchOptions& o, const Round& round, Group* group) {
  fflush(stdout);
  fflush(stderr);
  for (int lr = 0; lr < o.nproc_per_node; ++lr) {
    Child c;
    c.rank = o.node_rank * o.nproc_per_node + lr;
    c.label = lr < static_cast<int>(o.labels.size()) ? o.labels[lr] : absl::StrCat("rank ", c.rank);
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Spawn(RankSpawn(o, lr, round));
    if (!p.ok()) return absl::Status(p.status().code(), absl::StrCat("launch: ", p.status().message()));
    c.process = std::move(*p);
    group->children.push_back(std::move(c));
  }
  return absl::OkStatus();
}

// One round of the group: starts every local rank, relays their output, and blocks
// until all exited. With `nodes`, also stops when another node publishes a failure,
// and publishes this node's. `restartable` when a rank failed on its own (not a
// signal to the launcher, not a program that cannot be started).
struct RoundResult {
  absl::Status status;
  bool restartable = false;
};

RoundResult RunRound(const LaunchOptions& o, const Round& round, ScopedSignalCatcher* signals,
                     NodeRendezvous* nodes) {
  Group group;
  group.children.reserve(o.nproc_per_node);  // first_failed points into it.
  const absl::Status spawn_error = SpawnGroup(o, round, &group);
  if (!spawn_error.ok()) group.StopAll(SIGTERM, o.kill_grace);
  bool interrupted = false;
  std::optional<RoundFailure> peer;  // Another node's failure, which stopped ours.
  absl::Time next_poll = absl::Now();
  do {
    if (const int sig = signals->Take(); sig != 0) {  // Forward ours.
      interrupted = true;
      group.StopAll(sig, o.kill_grace);
    }
    if (nodes != nullptr && !group.stopping && absl::Now() >= next_poll) {
      peer = nodes->Failure(round.restart_count);
      if (peer.has_value()) group.StopAll(SIGTERM, o.kill_grace);
      next_poll = absl::Now() + absl::Milliseconds(200);
    }
    PumpOutput(&group.children);
  } while (!group.Reap(o.kill_grace));
  // A signal to the whole process group (a terminal's Ctrl-C, timeout(1)) reaches the
  // ranks too: one may be reaped as failed before the launcher takes its own signal.
  interrupted |= signals->caught() != 0;

  if (peer.has_value()) return {absl::AbortedError(peer->message), peer->restartable};
  RoundResult result;
  result.status = spawn_error.ok()
                      ? Outcome(group.children, group.first_failed, group.hung, o.nproc_per_node)
                      : spawn_error;
  result.restartable = !result.status.ok() && spawn_error.ok() && !interrupted;
  if (nodes != nullptr && !result.status.ok()) {
    nodes->PublishFailure(round.restart_count,
                          {absl::StrCat("node ", o.node_rank, ": ", result.status.message()),
                           result.restartable});
  }
  return result;
}

}  // namespace

std::string RunIdFor(const std::string& master_addr, int master_port) {
  return absl::StrCat("ringside-", master_addr, ":", master_port);
}

absl::Status Launch(const LaunchOptions& o) {
  RINGSIDE_RETURN_IF_ERROR(CheckOptions(o));
  if (o.master_port == 0 && o.nnodes > 1) {
    return absl::InvalidArgumentError("--master_port=0 needs --nnodes=1");
  }
  if (o.master_port < 0 || o.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--master_port out of range: ", o.master_port));
  }
  ScopedSignalCatcher signals;  // Forwarded to the children of every round.
  Round round;
  round.run_id = o.run_id.empty() ? RunIdFor(o.master_addr, o.master_port) : o.run_id;
  round.extra_env = BlasThreadEnv(o);
  // Security: every rank gets the job's token through its environment.
  std::string token = o.security.token;
  if (token.empty() && o.nnodes == 1) {
    RINGSIDE_ASSIGN_OR_RETURN(token, RandomHex(kGeneratedTokenBytes));
  } else if (token.empty()) {
    absl::FPrintF(stderr,
                  "ringside: warning: this %d-node job is unauthenticated: give every node's "
                  "launcher the same --token_file or %s (docs/security.md)\n",
                  o.nnodes, kTokenEnvVar);
  }
  if (!token.empty()) round.extra_env.push_back(absl::StrCat(kTokenEnvVar, "=", token));
  // torchrun's default too: NCCL reports a failed peer as an error instead of hanging.
  if (std::getenv("NCCL_ASYNC_ERROR_HANDLING") == nullptr) {
    round.extra_env.push_back("NCCL_ASYNC_ERROR_HANDLING=1");
  }
  // Restarts across nodes: the launchers agree on every round through node 0's
  // launcher, which then holds the endpoint; rank 0 hosts its store on a fresh port.
  std::unique_ptr<NodeRendezvous> nodes;
  const std::function<bool()> interrupted = [&signals] { return signals.caught() != 0; };
  if (o.nnodes > 1 && o.max_restarts > 0) {
    RINGSIDE_ASSIGN_OR_RETURN(nodes, NodeRendezvous::Join(o.master_addr, o.master_port, o.nnodes,
                                                          o.node_rank, round.run_id, o.security,
                                                          o.rdzv_timeout));
  }
  for (;; ++round.restart_count) {
    round.port = o.master_port;
    std::optional<ReservedPort> reserved;  // Held through the round: rank 0 binds it.
    if (nodes != nullptr) {
      RINGSIDE_ASSIGN_OR_RETURN(round.port, nodes->BeginRound(round.restart_count, interrupted));
    } else if (round.port == 0) {
      // A free port for each round: the last round's may not be free again yet.
      RINGSIDE_ASSIGN_OR_RETURN(reserved, ReserveFreePort());
      round.port = reserved->port();
      if (o.run_id.empty() && round.restart_count == 0) round.run_id = RunIdFor(o.master_addr, round.port);
    }
    RoundResult result = RunRound(o, round, &signals, nodes.get());
    if (result.status.ok() && nodes != nullptr) {
      result.status = nodes->FinishRound(round.restart_count, interrupted);  // Every node's too.
    }
    if (result.status.ok() || !result.restartable || round.restart_count >= o.max_restarts) {
      if (round.restart_count == 0 || result.status.ok()) return result.status;
      return absl::Status(result.status.code(),
                          absl::StrCat(result.status.message(), " (after ", round.restart_count,
                                       " restart", round.restart_count == 1 ? "" : "s", ")"));
    }
    absl::FPrintF(stderr, "ringside: %s; restarting the group (restart %d of %d)\n",
                  result.status.message(), round.restart_count + 1, o.max_restarts);
  }
}

}  // namespace ringside
