// Deadline-bounded blocking I/O over non-blocking TCP sockets: the few helpers that
// ddp_ring's own TCP code (tcp_pairs.h, the c10d store client) shares.
#ifndef RINGSIDE_DDP_RING_SOCKET_IO_H_
#define RINGSIDE_DDP_RING_SOCKET_IO_H_

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringside {

// Owns a file descriptor: closes it when it goes out of scope unless released.
class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ~ScopedFd() { Reset(); }
  ScopedFd(ScopedFd&& other) : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) {
    if (this != &other) {
      Reset();
      fd_ = other.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void Reset();  // Closes the descriptor now, if any.

 private:
  int fd_;
};

// Unavailable "<what>: <strerror(errno)>".
absl::Status Errno(absl::string_view what);

// Waits until `fd` has one of poll(2)'s `events`; false if `deadline` passed first.
absl::StatusOr<bool> WaitFor(int fd, short events, absl::Time deadline);

// Makes a connected or listening TCP socket non-blocking, with Nagle off.
absl::Status SetNonBlockingNoDelay(int fd);

// Writes or reads exactly `n` bytes of a non-blocking socket before `deadline`.
// DeadlineExceeded on time-out; Unavailable if the connection closes or breaks.
absl::Status WriteAll(int fd, const void* data, size_t n, absl::Time deadline);
absl::Status ReadAll(int fd, void* data, size_t n, absl::Time deadline);

// A non-blocking TCP connection to host:port (a name or a numeric address), set up by
// SetNonBlockingNoDelay. InvalidArgument if the host does not resolve, Unavailable if
// the connection is refused, DeadlineExceeded if it is not made before `deadline`.
absl::StatusOr<ScopedFd> ConnectTcp(const std::string& host, const std::string& port,
                                    absl::Time deadline);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_SOCKET_IO_H_
