#include "experiments/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringside {
namespace {

// Set by the signal handler; the launcher loop forwards it to the children.
std::atomic<int> g_forward_signal{0};

void OnSignal(int sig) { g_forward_signal.store(sig); }

struct Child {
  int rank = 0;
  std::string label;    // "rank R", or LaunchOptions::labels[local rank].
  pid_t pid = -1;
  int out_fd = -1;      // Read end of the child's stdout+stderr pipe.
  std::string partial;  // Output not yet ended by a newline.
  bool exited = false;
  int status = 0;
};

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                        ")");
  }
  return "stopped";
}

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

}  // namespace

absl::StatusOr<int> PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("cannot pick a free port: ", strerror(err)));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

absl::Status Launch(const LaunchOptions& o) {
  if (o.nproc_per_node < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch needs --nproc_per_node >= 1, --nnodes >= 1 and 0 <= --node_rank < --nnodes (got ",
        o.nproc_per_node, ", ", o.nnodes, ", ", o.node_rank, ")"));
  }
  if (o.command.empty()) {
    return absl::InvalidArgumentError("launch needs a command after --");
  }
  int port = o.master_port;
  if (port == 0) {
    if (o.nnodes > 1) return absl::InvalidArgumentError("--master_port=0 needs --nnodes=1");
    absl::StatusOr<int> picked = PickFreePort();
    if (!picked.ok()) return picked.status();
    port = *picked;
  }
  if (port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--master_port out of range: ", port));
  }
  const std::string run_id =
      o.run_id.empty() ? absl::StrCat(getpid(), "-", absl::ToUnixMicros(absl::Now())) : o.run_id;
  const int world = o.nnodes * o.nproc_per_node;

  std::vector<Child> children(o.nproc_per_node);
  // Prepare argv and environments before forking (no allocation after fork).
  std::vector<std::vector<char*>> argvs(o.nproc_per_node);
  for (int lr = 0; lr < o.nproc_per_node; ++lr) {
    if (lr < static_cast<int>(o.rank_prefix.size())) {
      for (const std::string& a : o.rank_prefix[lr]) argvs[lr].push_back(const_cast<char*>(a.c_str()));
    }
    for (const std::string& a : o.command) argvs[lr].push_back(const_cast<char*>(a.c_str()));
    argvs[lr].push_back(nullptr);
  }
  std::vector<std::vector<std::string>> envs(o.nproc_per_node);
  std::vector<std::vector<char*>> envps(o.nproc_per_node);
  const char* const kOwned[] = {"RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "LOCAL_WORLD_SIZE=",
                                "MASTER_ADDR=", "MASTER_PORT=", "GROUP_RANK=", "RINGSIDE_RUN_ID="};
  for (int lr = 0; lr < o.nproc_per_node; ++lr) {
    for (char** e = environ; *e != nullptr; ++e) {
      bool owned = false;
      for (const char* k : kOwned) owned |= strncmp(*e, k, strlen(k)) == 0;
      if (!owned) envs[lr].push_back(*e);
    }
    const int rank = o.node_rank * o.nproc_per_node + lr;
    envs[lr].push_back(absl::StrCat("RANK=", rank));
    envs[lr].push_back(absl::StrCat("LOCAL_RANK=", lr));
    envs[lr].push_back(absl::StrCat("WORLD_SIZE=", world));
    envs[lr].push_back(absl::StrCat("LOCAL_WORLD_SIZE=", o.nproc_per_node));
    envs[lr].push_back(absl::StrCat("MASTER_ADDR=", o.master_addr));
    envs[lr].push_back(absl::StrCat("MASTER_PORT=", port));
    envs[lr].push_back(absl::StrCat("GROUP_RANK=", o.node_rank));
    envs[lr].push_back(absl::StrCat("RINGSIDE_RUN_ID=", run_id));
    if (lr < static_cast<int>(o.rank_env.size())) {
      for (const std::string& e : o.rank_env[lr]) envs[lr].push_back(e);
    }
    for (std::string& e : envs[lr]) envps[lr].push_back(e.data());
    envps[lr].push_back(nullptr);
    children[lr].rank = rank;
    children[lr].label = lr < static_cast<int>(o.labels.size()) ? o.labels[lr]
                                                                 : absl::StrCat("rank ", rank);
  }

  struct sigaction sa {}, old_int{}, old_term{};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  g_forward_signal.store(0);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  fflush(stdout);
  fflush(stderr);

  absl::Status spawn_error;
  for (int lr = 0; lr < o.nproc_per_node; ++lr) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      spawn_error = absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
      break;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      spawn_error = absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
      close(fds[0]);
      close(fds[1]);
      break;
    }
    if (pid == 0) {
      // Child: restore default signal handling, route output into the pipe, exec.
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      execvpe(argvs[lr][0], argvs[lr].data(), envps[lr].data());
      const char* msg = "launch: cannot execute the command\n";
      (void)!write(STDERR_FILENO, msg, strlen(msg));
      _exit(127);
    }
    close(fds[1]);
    children[lr].pid = pid;
    children[lr].out_fd = fds[0];
  }

  int first_failed = -1;
  int first_status = 0;
  bool stopping = !spawn_error.ok();
  absl::Time kill_at = absl::InfiniteFuture();
  auto stop_all = [&](int sig) {
    for (Child& c : children) {
      if (c.pid > 0 && !c.exited) kill(c.pid, sig);
    }
  };
  if (stopping) {
    stop_all(SIGTERM);
    kill_at = absl::Now() + o.kill_grace;
  }
  char buf[4096];
  absl::Time all_exited_at = absl::InfiniteFuture();
  while (true) {
    // Forward signals the launcher received.
    if (const int sig = g_forward_signal.exchange(0); sig != 0) {
      stop_all(sig);
      if (!stopping) {
        stopping = true;
        kill_at = absl::Now() + o.kill_grace;
      }
    }
    std::vector<pollfd> fds;
    std::vector<Child*> owners;
    for (Child& c : children) {
      if (c.out_fd >= 0) {
        fds.push_back({c.out_fd, POLLIN, 0});
        owners.push_back(&c);
      }
    }
    if (!fds.empty()) poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        Emit(owners[i], buf, static_cast<size_t>(n), false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        Emit(owners[i], "", 0, true);
        close(owners[i]->out_fd);
        owners[i]->out_fd = -1;
      }
    }
    // Reap.
    bool all_exited = true;
    for (Child& c : children) {
      if (c.pid <= 0 || c.exited) continue;
      int status = 0;
      const pid_t r = waitpid(c.pid, &status, WNOHANG);
      if (r == c.pid) {
        c.exited = true;
        c.status = status;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && first_failed < 0 && !stopping) {
          // Protocol step: one rank failed; stop the others (they would hang or fail).
          first_failed = c.rank;
          first_status = status;
          stopping = true;
          stop_all(SIGTERM);
          kill_at = absl::Now() + o.kill_grace;
        }
      } else {
        all_exited = false;
      }
    }
    if (stopping && absl::Now() >= kill_at) {
      stop_all(SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
    bool pipes_open = false;
    for (const Child& c : children) pipes_open |= c.out_fd >= 0;
    if (all_exited) {
      // Drain what is left, but never wait on a pipe some grandchild keeps open.
      if (all_exited_at == absl::InfiniteFuture()) all_exited_at = absl::Now();
      if (!pipes_open || stopping || absl::Now() - all_exited_at > absl::Seconds(2)) break;
    }
  }
  for (Child& c : children) {
    if (c.out_fd >= 0) close(c.out_fd);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);

  if (!spawn_error.ok()) return spawn_error;
  if (first_failed >= 0) {
    std::string label;
    for (const Child& c : children) {
      if (c.rank == first_failed) label = c.label;
    }
    return absl::AbortedError(absl::StrCat(label, " failed: ",
                                           DescribeStatus(first_status),
                                           o.nproc_per_node > 1 ? " (the others were stopped)" : ""));
  }
  for (const Child& c : children) {
    if (!(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) {
      return absl::AbortedError(
          absl::StrCat(c.label, " failed: ", DescribeStatus(c.status)));
    }
  }
  return absl::OkStatus();
}

}  // namespace ringside
