#include "experiments/launch/launcher.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
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

// Variables the launcher sets for every rank; inherited values are dropped.
constexpr const char* kJobVariables[] = {"RANK",        "LOCAL_RANK",  "WORLD_SIZE",
                                         "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                         "GROUP_RANK",  "RINGSIDE_RUN_ID"};

absl::Status CheckOptions(const LaunchOptions& o) {
  if (o.nproc_per_node < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch needs --nproc_per_node >= 1, --nnodes >= 1 and 0 <= --node_rank < --nnodes (got ",
        o.nproc_per_node, ", ", o.nnodes, ", ", o.node_rank, ")"));
  }
  if (o.command.empty()) return absl::InvalidArgumentError("launch needs a command after --");
  return absl::OkStatus();
}

// The spawn of local rank `lr`: its prefix and the command, the job's variables, its
// output into one pipe.
SpawnOptions RankSpawn(const LaunchOptions& o, int lr, int port, const std::string& run_id) {
  SpawnOptions so;
  if (lr < static_cast<int>(o.rank_prefix.size())) so.argv = o.rank_prefix[lr];
  so.argv.insert(so.argv.end(), o.command.begin(), o.command.end());
  for (const char* name : kJobVariables) so.env_unset.push_back(name);
  const int rank = o.node_rank * o.nproc_per_node + lr;
  so.env_set = {absl::StrCat("RANK=", rank),
                absl::StrCat("LOCAL_RANK=", lr),
                absl::StrCat("WORLD_SIZE=", o.nnodes * o.nproc_per_node),
                absl::StrCat("LOCAL_WORLD_SIZE=", o.nproc_per_node),
                absl::StrCat("MASTER_ADDR=", o.master_addr),
                absl::StrCat("MASTER_PORT=", port),
                absl::StrCat("GROUP_RANK=", o.node_rank),
                absl::StrCat("RINGSIDE_RUN_ID=", run_id)};
  if (lr < static_cast<int>(o.rank_env.size())) {
    so.env_set.insert(so.env_set.end(), o.rank_env[lr].begin(), o.rank_env[lr].end());
  }
  so.out = ChildStream::kPipe;
  so.err = ChildStream::kStdout;
  return so;
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

// The job's outcome once every child exited: the first failure, in rank order.
absl::Status Outcome(const std::vector<Child>& children, const Child* first_failed,
                     int nproc) {
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

}  // namespace

absl::Status Launch(const LaunchOptions& o) {
  RINGSIDE_RETURN_IF_ERROR(CheckOptions(o));
  int port = o.master_port;
  if (port == 0) {
    if (o.nnodes > 1) return absl::InvalidArgumentError("--master_port=0 needs --nnodes=1");
    RINGSIDE_ASSIGN_OR_RETURN(port, PickFreePort());
  }
  if (port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--master_port out of range: ", port));
  }
  const std::string run_id =
      o.run_id.empty() ? absl::StrCat(getpid(), "-", absl::ToUnixMicros(absl::Now())) : o.run_id;

  ScopedSignalCatcher signals;  // Forwarded to the children below.
  fflush(stdout);
  fflush(stderr);
  std::vector<Child> children(o.nproc_per_node);
  absl::Status spawn_error;
  for (int lr = 0; lr < o.nproc_per_node && spawn_error.ok(); ++lr) {
    Child& c = children[lr];
    c.rank = o.node_rank * o.nproc_per_node + lr;
    c.label = lr < static_cast<int>(o.labels.size()) ? o.labels[lr] : absl::StrCat("rank ", c.rank);
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Spawn(RankSpawn(o, lr, port, run_id));
    if (!p.ok()) {
      spawn_error = absl::Status(p.status().code(), absl::StrCat("launch: ", p.status().message()));
    } else {
      c.process = std::move(*p);
    }
  }
  children.erase(std::remove_if(children.begin(), children.end(),
                                [](const Child& c) { return c.process == nullptr; }),
                 children.end());

  const Child* first_failed = nullptr;
  bool stopping = false;
  absl::Time kill_at = absl::InfiniteFuture();
  // Protocol step: stop every rank still running, SIGKILL after the grace period.
  auto stop_all = [&](int sig) {
    for (Child& c : children) c.process->Signal(sig);
    if (!stopping) kill_at = absl::Now() + o.kill_grace;
    stopping = true;
  };
  if (!spawn_error.ok()) stop_all(SIGTERM);
  absl::Time all_exited_at = absl::InfiniteFuture();
  while (true) {
    if (const int sig = signals.Take(); sig != 0) stop_all(sig);  // Forward ours.
    PumpOutput(&children);
    bool all_exited = true, pipes_open = false;
    for (Child& c : children) {
      if (!c.process->exited() && c.process->Poll() && !c.process->succeeded() &&
          first_failed == nullptr && !stopping) {
        // One rank failed: stop the others (they would hang or fail).
        first_failed = &c;
        stop_all(SIGTERM);
      }
      all_exited &= c.process->exited();
      pipes_open |= c.process->out_fd() >= 0;
    }
    if (stopping && absl::Now() >= kill_at) {
      for (Child& c : children) c.process->Signal(SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
    if (all_exited) {
      // Drain what is left, but never wait on a pipe some grandchild keeps open.
      if (all_exited_at == absl::InfiniteFuture()) all_exited_at = absl::Now();
      if (!pipes_open || stopping || absl::Now() - all_exited_at > absl::Seconds(2)) break;
    }
  }
  if (!spawn_error.ok()) return spawn_error;
  return Outcome(children, first_failed, o.nproc_per_node);
}

}  // namespace ringside
