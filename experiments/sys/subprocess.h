// Child processes: the one place ringside starts, watches and stops another program.
// Every spawn is posix_spawn(p) (safe in a process that already runs gRPC or Gloo
// threads, unlike fork), with the child's signal mask cleared and SIGINT, SIGTERM,
// SIGPIPE, ... back at their defaults, and only fds 0-2 inherited.
#ifndef RINGSIDE_EXPERIMENTS_SYS_SUBPROCESS_H_
#define RINGSIDE_EXPERIMENTS_SYS_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringside {

// Where one of the child's standard streams goes.
enum class ChildStream {
  kInherit,  // This process's stream.
  kNull,     // /dev/null.
  kPipe,     // A pipe whose read end the Subprocess owns (out_fd() / err_fd()).
  kFile,     // Truncated and written: SpawnOptions::out_path / err_path.
  kStdout,   // stderr only: wherever stdout goes (one pipe or file for both).
};

struct SpawnOptions {
  // argv[0] is a path, or a program name searched in PATH.
  std::vector<std::string> argv;
  // The child's environment: this process's, without the variables whose names are in
  // `env_unset`, plus `env_set` (NAME=VALUE; a later entry wins).
  std::vector<std::string> env_unset;
  std::vector<std::string> env_set;
  bool stdin_null = false;  // False: inherit stdin.
  ChildStream out = ChildStream::kInherit;
  std::string out_path;
  ChildStream err = ChildStream::kInherit;
  std::string err_path;
  // The child leads a process group of its own: a terminal's Ctrl-C reaches only this
  // process (which decides what to forward), and Signal() reaches everything the
  // child started.
  bool own_process_group = false;
  // The child's working directory ("": this process's). This process's own working
  // directory never changes.
  std::string cwd;
  // The child gets SIGKILL when this process dies, even by SIGKILL (Linux's
  // PR_SET_PDEATHSIG, which survives exec): no rank of a killed launcher trains on.
  // posix_spawn cannot set it, so the child starts as this program's own binary
  // (SelfExePath) running the guard (RunParentDeathGuard below), which sets it and
  // execs argv. Requires: this program's main calls RunParentDeathGuard first (ringside's
  // does), and the calling thread outlives the child (the signal follows the thread
  // that spawned it). argv[0] is looked up in PATH here, so a missing program is still
  // Spawn's NotFound.
  bool die_with_parent = false;
};

// The guard's half of SpawnOptions::die_with_parent, for a program's main() to call
// before anything else: when argv is a guard invocation (this binary, a marker, the
// parent's pid, the program and its arguments), makes this process receive SIGKILL
// when that parent dies, then execs the program; returns only if that fails (127,
// after one error line) or the parent is already gone (137, as if killed). Returns -1
// for any other argv: the program goes on as usual.
int RunParentDeathGuard(int argc, char** argv);

// "exited with status 3", "killed by signal 9 (Killed)": a waitpid status in words.
std::string DescribeWaitStatus(int wait_status);

// One running (or exited) child. Not thread-safe. Destroying it while the child runs
// kills the child (and its group, if it has one) with SIGKILL and reaps it, so no
// child outlives its owner unnoticed.
class Subprocess {
 public:
  // NotFound when the program does not exist (or is not in PATH); Internal for other
  // spawn failures; PermissionDenied when an output file cannot be created.
  static absl::StatusOr<std::unique_ptr<Subprocess>> Spawn(const SpawnOptions& options);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Read ends of ChildStream::kPipe streams (-1 otherwise, or once closed). Owned.
  int out_fd() const { return out_fd_; }
  int err_fd() const { return err_fd_; }
  void CloseOut();
  void CloseErr();

  // Sends `sig` to the child, or to its whole group with own_process_group. No-op once
  // the child was reaped.
  void Signal(int sig);
  // Reaps the child if it has exited; never blocks. True once it has.
  bool Poll();
  // Blocks until the child exits or `deadline` passes (DeadlineExceeded; the child
  // keeps running). Polls every few milliseconds.
  absl::Status WaitUntil(absl::Time deadline);
  // Blocks until the child exits.
  void Wait();

  bool exited() const { return exited_; }
  // The waitpid status; meaningful once exited().
  int wait_status() const { return wait_status_; }
  // Exited with status 0.
  bool succeeded() const;
  // Ended by a signal (SIGKILL, SIGSEGV, ...) rather than by exiting.
  bool killed_by_signal() const;
  // DescribeWaitStatus(wait_status()), or "still running".
  std::string ExitDescription() const;

 private:
  Subprocess(pid_t pid, bool group, int out_fd, int err_fd)
      : pid_(pid), group_(group), out_fd_(out_fd), err_fd_(err_fd) {}

  const pid_t pid_;
  const bool group_;
  int out_fd_;
  int err_fd_;
  bool exited_ = false;
  int wait_status_ = 0;
};

// Result of RunCommand.
struct CommandOutput {
  int exit_code = -1;    // -1 if killed by a signal.
  int term_signal = 0;   // The signal that killed it, if any.
  std::string stdout_text;  // Each capped at 1 MiB.
  std::string stderr_text;
  bool ok() const { return exit_code == 0; }
};

// Runs `argv` to completion with stdin from /dev/null, stdout and stderr captured, in a
// process group of its own. Blocks at most `timeout`: then the command and everything
// it started are killed (SIGKILL to the group) and the result is DeadlineExceeded. A
// non-zero exit is not an error here (see CommandOutput). NotFound for a missing
// program.
absl::StatusOr<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_SYS_SUBPROCESS_H_
