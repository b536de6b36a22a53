#include "experiments/sys/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "experiments/sys/process_info.h"

extern char** environ;

namespace ringside {
namespace {

constexpr size_t kMaxCapture = 1 << 20;

// argv[1] of a guard invocation (SpawnOptions::die_with_parent); no user types it.
constexpr char kParentDeathGuard[] = "__ringside_die_with_parent__";

// `program` as posix_spawnp would find it: itself when it names a path, else the first
// executable of that name in PATH; "" when there is none.
std::string FindProgram(const std::string& program) {
  if (absl::StrContains(program, '/')) return access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", program);
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

// The variable name of a NAME=VALUE entry.
absl::string_view EnvName(absl::string_view entry) {
  return entry.substr(0, entry.find('='));
}

std::vector<std::string> ChildEnvironment(const SpawnOptions& o) {
  std::vector<std::string> env;
  auto dropped = [&](absl::string_view name) {
    for (const std::string& u : o.env_unset) {
      if (u == name) return true;
    }
    for (const std::string& s : o.env_set) {
      if (EnvName(s) == name) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!dropped(EnvName(*e))) env.push_back(*e);
  }
  for (const std::string& s : o.env_set) {
    // A later entry for the same name wins.
    env.erase(std::remove_if(env.begin(), env.end(),
                             [&](const std::string& x) { return EnvName(x) == EnvName(s); }),
              env.end());
    env.push_back(s);
  }
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Everything a spawn is made of: the pipes, the output files (opened here, not in the
// child, so that a bad path is this process's error rather than a child that dies
// silently), the file actions and the attributes. Releases all of it when destroyed,
// except the pipes' read ends once taken.
class SpawnPlan {
 public:
  SpawnPlan() {
    posix_spawn_file_actions_init(&actions_);
    posix_spawnattr_init(&attr_);
  }
  ~SpawnPlan() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
    for (int fd : {out_[0], out_[1], err_[0], err_[1], out_file_, err_file_}) {
      if (fd >= 0) close(fd);
    }
  }
  SpawnPlan(const SpawnPlan&) = delete;
  SpawnPlan& operator=(const SpawnPlan&) = delete;

  // Opens the pipes and files `o` asks for and routes the child's streams.
  absl::Status Streams(const SpawnOptions& o) {
    if (o.out == ChildStream::kPipe && pipe2(out_, O_CLOEXEC) != 0) return Errno("pipe");
    if (o.err == ChildStream::kPipe && pipe2(err_, O_CLOEXEC) != 0) return Errno("pipe");
    if (o.out == ChildStream::kFile) RINGSIDE_RETURN_IF_ERROR(OpenFile(o.out_path, &out_file_));
    if (o.err == ChildStream::kFile) RINGSIDE_RETURN_IF_ERROR(OpenFile(o.err_path, &err_file_));
    if (o.stdin_null) posix_spawn_file_actions_addopen(&actions_, 0, "/dev/null", O_RDONLY, 0);
    Route(o.out, 1, out_[1], out_file_);
    Route(o.err, 2, err_[1], err_file_);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&actions_, 3);
#endif
    if (!o.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions_, o.cwd.c_str());
    return absl::OkStatus();
  }

  // The child starts with no signal blocked, the usual signals at their defaults, and
  // optionally as the leader of a new process group.
  void Attributes(bool own_process_group) {
    sigset_t empty, defaults;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM}) {
      sigaddset(&defaults, sig);
    }
    posix_spawnattr_setsigmask(&attr_, &empty);
    posix_spawnattr_setsigdefault(&attr_, &defaults);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (own_process_group) {
      posix_spawnattr_setpgroup(&attr_, 0);
      flags |= POSIX_SPAWN_SETPGROUP;
    }
    posix_spawnattr_setflags(&attr_, flags);
  }

  // posix_spawnp's error number (0: started).
  int Spawn(char* const argv[], char* const envp[], pid_t* pid) {
    return posix_spawnp(pid, argv[0], &actions_, &attr_, argv, envp);
  }

  // The read end of the stdout (or stderr) pipe, now the caller's (-1 if none).
  int TakeOut() { return std::exchange(out_[0], -1); }
  int TakeErr() { return std::exchange(err_[0], -1); }

 private:
  static absl::Status Errno(const char* what) {
    return absl::InternalError(absl::StrCat(what, ": ", strerror(errno)));
  }
  static absl::Status OpenFile(const std::string& path, int* fd) {
    *fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (*fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
    return absl::OkStatus();
  }
  void Route(ChildStream how, int target, int pipe_write, int file) {
    switch (how) {
      case ChildStream::kInherit: break;
      case ChildStream::kNull:
        posix_spawn_file_actions_addopen(&actions_, target, "/dev/null", O_WRONLY, 0);
        break;
      case ChildStream::kPipe: posix_spawn_file_actions_adddup2(&actions_, pipe_write, target); break;
      case ChildStream::kFile: posix_spawn_file_actions_adddup2(&actions_, file, target); break;
      case ChildStream::kStdout: posix_spawn_file_actions_adddup2(&actions_, 1, target); break;
    }
  }

  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
  int out_[2] = {-1, -1};  // stdout pipe: read end, write end.
  int err_[2] = {-1, -1};
  int out_file_ = -1;
  int err_file_ = -1;
};

}  // namespace

int RunParentDeathGuard(int argc, char** argv) {
  // argv: this binary, the marker, the parent's pid, the program's path, its argv.
  if (argc < 5 || strcmp(argv[1], kParentDeathGuard) != 0) return -1;
  pid_t parent = 0;
  if (!absl::SimpleAtoi(argv[2], &parent)) return -1;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent may have died between the spawn and prctl: then nobody would signal us.
  if (getppid() != parent) return 128 + SIGKILL;
  execv(argv[3], argv + 4);
  fprintf(stderr, "ringside: error: cannot start %s: %s\n", argv[3], strerror(errno));
  return 127;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                        ")");
  }
  return "stopped";
}

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return absl::InvalidArgumentError("Subprocess::Spawn: empty argv");
  if (o.out == ChildStream::kStdout) {
    return absl::InvalidArgumentError("Subprocess::Spawn: stdout cannot follow stdout");
  }
  if (struct stat st {}; !o.cwd.empty() && (stat(o.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    return absl::NotFoundError(absl::StrCat("cannot run ", o.argv[0], " in ", o.cwd, ": no such directory"));
  }
  std::vector<std::string> args = o.argv;
  if (o.die_with_parent) {
    const std::string program = FindProgram(o.argv[0]);
    if (program.empty()) {
      return absl::NotFoundError(absl::StrCat(o.argv[0], ": not found (", strerror(ENOENT), ")"));
    }
    RINGSIDE_ASSIGN_OR_RETURN(std::string self, SelfExePath());
    // The guard execs `program` with the caller's argv (argv[0] as given).
    args = {self, kParentDeathGuard, absl::StrCat(getpid()), program};
    args.insert(args.end(), o.argv.begin(), o.argv.end());
  }
  SpawnPlan plan;
  RINGSIDE_RETURN_IF_ERROR(plan.Streams(o));
  plan.Attributes(o.own_process_group);
  std::vector<std::string> env = ChildEnvironment(o);
  std::vector<char*> argv = CStrings(args);
  std::vector<char*> envp = CStrings(env);
  pid_t pid = -1;
  if (const int rc = plan.Spawn(argv.data(), envp.data(), &pid); rc != 0) {
    // EACCES from a PATH search: no directory we may read has an executable of it.
    if (rc == ENOENT || (rc == EACCES && !absl::StrContains(o.argv[0], '/'))) {
      return absl::NotFoundError(absl::StrCat(o.argv[0], ": not found (", strerror(rc), ")"));
    }
    return absl::InternalError(absl::StrCat("cannot start ", o.argv[0], ": ", strerror(rc)));
  }
  return std::unique_ptr<Subprocess>(
      new Subprocess(pid, o.own_process_group, plan.TakeOut(), plan.TakeErr()));
}

Subprocess::~Subprocess() {
  if (!exited_) {
    Signal(SIGKILL);
    Wait();
  }
  CloseOut();
  CloseErr();
}

void Subprocess::CloseOut() {
  if (out_fd_ >= 0) close(out_fd_);
  out_fd_ = -1;
}

void Subprocess::CloseErr() {
  if (err_fd_ >= 0) close(err_fd_);
  err_fd_ = -1;
}

void Subprocess::Signal(int sig) {
  if (exited_) return;
  kill(group_ ? -pid_ : pid_, sig);
}

bool Subprocess::Poll() {
  if (exited_) return true;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    wait_status_ = status;
  } else if (r < 0 && errno == ECHILD) {
    // Reaped elsewhere (a SIGCHLD of SIG_IGN): report it as lost rather than spin.
    exited_ = true;
    wait_status_ = W_EXITCODE(255, 0);
  }
  return exited_;
}

absl::Status Subprocess::WaitUntil(absl::Time deadline) {
  while (!Poll()) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("pid ", pid_, " still running"));
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  return absl::OkStatus();
}

void Subprocess::Wait() {
  while (!exited_) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, 0);
    if (r == pid_) {
      exited_ = true;
      wait_status_ = status;
    } else if (r < 0 && errno != EINTR) {
      exited_ = true;
      wait_status_ = W_EXITCODE(255, 0);
    }
  }
}

bool Subprocess::succeeded() const {
  return exited_ && WIFEXITED(wait_status_) && WEXITSTATUS(wait_status_) == 0;
}

bool Subprocess::killed_by_signal() const { return exited_ && WIFSIGNALED(wait_status_); }

std::string Subprocess::ExitDescription() const {
  return exited_ ? DescribeWaitStatus(wait_status_) : "still running";
}

absl::StatusOr<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout) {
  SpawnOptions o;
  o.argv = argv;
  o.stdin_null = true;
  o.out = ChildStream::kPipe;
  o.err = ChildStream::kPipe;
  o.own_process_group = true;
  absl::StatusOr<std::unique_ptr<Subprocess>> child = Subprocess::Spawn(o);
  if (!child.ok()) return child.status();
  Subprocess& c = **child;
  const absl::Time deadline = absl::Now() + timeout;
  CommandOutput result;
  bool timed_out = false;
  char buf[8192];
  // Read both streams until they close (the command and whatever it started exited).
  while (c.out_fd() >= 0 || c.err_fd() >= 0) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    pollfd fds[2];
    int n = 0;
    if (c.out_fd() >= 0) fds[n++] = {c.out_fd(), POLLIN, 0};
    if (c.err_fd() >= 0) fds[n++] = {c.err_fd(), POLLIN, 0};
    const int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000));
    if (poll(fds, n, ms) < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      const bool is_out = fds[i].fd == c.out_fd();
      std::string* text = is_out ? &result.stdout_text : &result.stderr_text;
      const ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        if (text->size() < kMaxCapture) {
          text->append(buf, std::min<size_t>(got, kMaxCapture - text->size()));
        }
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        is_out ? c.CloseOut() : c.CloseErr();
      }
    }
  }
  if (!timed_out && !c.WaitUntil(deadline).ok()) timed_out = true;
  if (timed_out) {
    c.Signal(SIGKILL);  // The command and whatever it started.
    c.Wait();
    return absl::DeadlineExceededError(absl::StrCat(argv[0], " did not finish within ",
                                                    absl::FormatDuration(timeout), " (killed)"));
  }
  const int status = c.wait_status();
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace ringside
