// Facts about this process and this host that the CLI needs to start others.
#ifndef RINGSIDE_EXPERIMENTS_SYS_PROCESS_INFO_H_
#define RINGSIDE_EXPERIMENTS_SYS_PROCESS_INFO_H_

#include <sys/types.h>

#include <cstdio>
#include <string>

#include "absl/status/statusor.h"

namespace ringside {

// This binary's path, resolved (commands run through `ip netns exec` cannot use
// /proc/self/exe, which would name `ip`). Internal if /proc is unreadable.
absl::StatusOr<std::string> SelfExePath();

// Whether `stream` is a terminal (isatty), for output that redraws lines (`\r`) only
// where a person watches; false for files, pipes and nullptr.
bool IsTerminal(FILE* stream);

// Whether process `pid` is stopped (state T or t in /proc/<pid>/stat: SIGSTOP, SIGTSTP,
// a tracer): alive, but it runs no code until continued. False when it runs, sleeps,
// has exited, or /proc cannot be read.
bool IsStopped(pid_t pid);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
absl::StatusOr<int> PickFreePort();

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_SYS_PROCESS_INFO_H_
