// Test support: runs a check as an unprivileged user, to see the errors a user without
// root gets from the emulations. Test-only (//experiments/netem:unprivileged).
#ifndef RINGSIDE_EXPERIMENTS_NETEM_UNPRIVILEGED_H_
#define RINGSIDE_EXPERIMENTS_NETEM_UNPRIVILEGED_H_

#include <grp.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace ringside {

// `check()`'s text as computed by user and group 65534 (nobody): in a forked child
// when this process runs as root, directly otherwise. Blocks until the child exits;
// Internal if it could not drop privileges or report.
inline absl::StatusOr<std::string> RunAsNobody(absl::FunctionRef<std::string()> check) {
  if (geteuid() != 0) return check();
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  const pid_t child = fork();
  if (child < 0) return absl::InternalError("fork failed");
  if (child == 0) {
    close(fds[0]);
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    const std::string r = check();
    if (write(fds[1], r.data(), r.size()) != static_cast<ssize_t>(r.size())) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) report.append(buf, n);
  close(fds[0]);
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("unprivileged child failed, status ", status));
  }
  return report;
}

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_NETEM_UNPRIVILEGED_H_
