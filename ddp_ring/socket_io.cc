#include "ddp_ring/socket_io.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

// Milliseconds until `deadline`, rounded up, for poll(2); 0 once it has passed.
int PollMillis(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), INT_MAX));
}

}  // namespace

void ScopedFd::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", strerror(errno)));
}

absl::StatusOr<bool> WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    pollfd p = {fd, events, 0};
    const int rc = poll(&p, 1, PollMillis(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return Errno("poll");
  }
}

absl::Status SetNonBlockingNoDelay(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return Errno("fcntl");
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
    return Errno("setsockopt(TCP_NODELAY)");
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const void* data, size_t n, absl::Time deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      RINGSIDE_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, POLLOUT, deadline));
      if (!ready) return absl::DeadlineExceededError("timed out writing");
    } else {
      return Errno("send");
    }
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, void* data, size_t n, absl::Time deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
    } else if (k == 0) {
      return absl::UnavailableError("connection closed by peer");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      RINGSIDE_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, POLLIN, deadline));
      if (!ready) return absl::DeadlineExceededError("timed out reading");
    } else {
      return Errno("recv");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ScopedFd> ConnectTcp(const std::string& host, const std::string& port,
                                    absl::Time deadline) {
  const std::string endpoint = absl::StrCat(host, ":", port);
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve '", endpoint, "': ",
                                                   rc != 0 ? gai_strerror(rc) : "no address"));
  }
  ScopedFd fd(socket(result->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  absl::Status status = fd.get() < 0 ? Errno("socket") : SetNonBlockingNoDelay(fd.get());
  if (status.ok() && connect(fd.get(), result->ai_addr, result->ai_addrlen) < 0 &&
      errno != EINPROGRESS) {
    status = Errno(absl::StrCat("connect to ", endpoint));
  }
  freeaddrinfo(result);
  RINGSIDE_RETURN_IF_ERROR(status);
  RINGSIDE_ASSIGN_OR_RETURN(bool ready, WaitFor(fd.get(), POLLOUT, deadline));
  if (!ready) return absl::DeadlineExceededError(absl::StrCat("connect to ", endpoint, " timed out"));
  int error = 0;
  socklen_t length = sizeof(error);
  getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
  if (error != 0) {
    return absl::UnavailableError(absl::StrCat("connect to ", endpoint, ": ", strerror(error)));
  }
  return fd;
}

}  // namespace ringside
