// The one layer over TCP sockets (POSIX sockets, poll(2), the kernel's byte counts):
// deadline-bounded blocking I/O over non-blocking sockets, listening and connecting.
// Every TCP path of ringside that is not gRPC goes through it: the ring's direct pairs
// (ddp_ring/tcp_pairs.h), the c10d store client, and the framed exchanges of
// frame_io.h. Thread-compatible: one thread per socket at a time.
#ifndef RINGSIDE_COMMON_SOCKET_IO_H_
#define RINGSIDE_COMMON_SOCKET_IO_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
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

// Caps the kernel's send buffer of a connected TCP socket at about `bytes` of data
// (SO_SNDBUF; the kernel's own auto-tuning is then off for it). Connections that share
// a link then interleave: none can queue more than this ahead of the others.
absl::Status CapSendBuffer(int fd, int bytes);

// Writes or reads exactly `n` bytes of a non-blocking socket before `deadline`.
// DeadlineExceeded on time-out; Unavailable if the connection closes or breaks.
absl::Status WriteAll(int fd, const void* data, size_t n, absl::Time deadline);
absl::Status ReadAll(int fd, void* data, size_t n, absl::Time deadline);
// Writes the `count` pieces of `iov` in order, whole, before `deadline` (a header and
// its payload in one system call where the socket takes them). Changes `iov`'s
// entries as it goes. Errors as WriteAll's.
absl::Status WriteAllVectored(int fd, iovec* iov, int count, absl::Time deadline);

// A non-blocking TCP connection to host:port (a name or a numeric address), set up by
// SetNonBlockingNoDelay. InvalidArgument if the host does not resolve, Unavailable if
// the connection is refused, DeadlineExceeded if it is not made before `deadline`.
absl::StatusOr<ScopedFd> ConnectTcp(const std::string& host, const std::string& port,
                                    absl::Time deadline);

// The host of a "host:port" address ("[::1]:80" gives "::1"); the whole string when
// it has no colon.
std::string HostOf(absl::string_view address);

// A non-blocking listening TCP socket on `hostname`, port 0 (the kernel picks one), and
// the address it listens on as "numeric-host port". InvalidArgument if `hostname` does
// not resolve; Unavailable if the socket cannot be bound.
struct TcpListener {
  ScopedFd fd;
  std::string endpoint;  // "host port", e.g. "127.0.0.1 41233".
};
absl::StatusOr<TcpListener> ListenTcp(const std::string& hostname, int backlog);

// Accepts one connection on the non-blocking `listener` before `deadline`, set up by
// SetNonBlockingNoDelay. DeadlineExceeded if none came; a transient accept failure
// (the connection went before it was taken) waits for the next.
absl::StatusOr<ScopedFd> AcceptTcp(int listener, absl::Time deadline);

// The bytes the application wrote into (first) and read from (second) the connected
// TCP socket `fd`, as the Linux kernel counts them: TCP_INFO's tcpi_bytes_acked plus
// the bytes still queued for sending (SIOCOUTQ), and tcpi_bytes_received minus the
// bytes not yet read (SIOCINQ). Exact at any moment, whatever is still in flight.
// Unavailable if the kernel does not answer (e.g. `fd` is not a TCP socket).
absl::StatusOr<std::pair<int64_t, int64_t>> KernelSocketTraffic(int fd);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_SOCKET_IO_H_
