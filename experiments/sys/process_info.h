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

// A TCP port held for a server that another process (or a later line of this one)
// starts: a socket bound to 127.0.0.1:0 with SO_REUSEADDR and never listened on. While
// it is held the kernel hands the port to no one else (no bind to port 0, no outgoing
// connection's local port) yet a server that sets SO_REUSEADDR, as gRPC's do, binds
// and listens on it; connections to it are refused until one does. Closing it (the
// destructor) gives the port back. Held reservations are distinct ports. Move-only;
// not thread-safe.
class ReservedPort {
 public:
  ReservedPort(ReservedPort&& other) noexcept;
  ReservedPort& operator=(ReservedPort&& other) noexcept;
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  ~ReservedPort();

  int port() const { return port_; }

 private:
  friend absl::StatusOr<ReservedPort> ReserveFreePort();
  ReservedPort(int fd, int port) : fd_(fd), port_(port) {}

  int fd_ = -1;
  int port_ = 0;
};

// Reserves a free TCP port (above). Internal if no socket can be bound.
absl::StatusOr<ReservedPort> ReserveFreePort();

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_SYS_PROCESS_INFO_H_
