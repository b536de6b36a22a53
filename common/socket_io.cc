#include "common/socket_io.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <linux/sockios.h>
#include <linux/tcp.h>  // Not <netinet/tcp.h>: glibc's tcp_info lacks the byte counts.
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstddef>
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

absl::Status CapSendBuffer(int fd, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) < 0) return Errno("setsockopt(SO_SNDBUF)");
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const void* data, size_t n, absl::Time deadline) {
  // One piece of WriteAllVectored's loop (its non-blocking sends keep the deadline on a
  // blocking socket too).
  iovec piece = {const_cast<void*>(data), n};
  return WriteAllVectored(fd, &piece, 1, deadline);
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

absl::Status WriteAllVectored(int fd, iovec* iov, int count, absl::Time deadline) {
  while (count > 0) {
    msghdr message = {};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    const ssize_t k = sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return Errno("send");
      RINGSIDE_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, POLLOUT, deadline));
      if (!ready) return absl::DeadlineExceededError("timed out writing");
      continue;
    }
    // Drop what went out: whole pieces, then the front of a partly written one.
    size_t left = static_cast<size_t>(k);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
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

std::string HostOf(absl::string_view address) {
  const size_t colon = address.rfind(':');
  absl::string_view host = colon == absl::string_view::npos ? address : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::string(host);
}

absl::StatusOr<TcpListener> ListenTcp(const std::string& hostname, int backlog) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(hostname.c_str(), "0", &hints, &result);
  if (rc != 0 || result == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve '", hostname, "': ",
                                                   rc != 0 ? gai_strerror(rc) : "no address"));
  }
  ScopedFd fd(socket(result->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int bound = fd.get() < 0 ? -1 : bind(fd.get(), result->ai_addr, result->ai_addrlen);
  freeaddrinfo(result);
  if (fd.get() < 0) return Errno("socket");
  if (bound < 0) return Errno(absl::StrCat("bind to '", hostname, "'"));
  if (listen(fd.get(), backlog) < 0) return Errno("listen");
  RINGSIDE_RETURN_IF_ERROR(SetNonBlockingNoDelay(fd.get()));
  sockaddr_storage address;
  socklen_t length = sizeof(address);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) < 0) {
    return Errno("getsockname");
  }
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof(host), port,
                  sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return absl::InternalError("getnameinfo failed on the listening address");
  }
  return TcpListener{std::move(fd), absl::StrCat(host, " ", port)};
}

absl::StatusOr<ScopedFd> AcceptTcp(int listener, absl::Time deadline) {
  while (true) {
    RINGSIDE_ASSIGN_OR_RETURN(bool ready, WaitFor(listener, POLLIN, deadline));
    if (!ready) return absl::DeadlineExceededError("no connection came");
    ScopedFd fd(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
          errno == ECONNABORTED) {
        continue;
      }
      return Errno("accept");
    }
    RINGSIDE_RETURN_IF_ERROR(SetNonBlockingNoDelay(fd.get()));
    return fd;
  }
}

absl::StatusOr<std::pair<int64_t, int64_t>> KernelSocketTraffic(int fd) {
  tcp_info info = {};
  socklen_t length = sizeof(info);
  int unsent = 0, unread = 0;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) < 0) return Errno("TCP_INFO");
  // Older kernels fill a shorter struct: the byte counts must be in what came back.
  if (length < offsetof(tcp_info, tcpi_bytes_received) + sizeof(info.tcpi_bytes_received)) {
    return absl::UnavailableError("the kernel's TCP_INFO has no byte counts");
  }
  if (ioctl(fd, SIOCOUTQ, &unsent) < 0) return Errno("SIOCOUTQ");
  if (ioctl(fd, SIOCINQ, &unread) < 0) return Errno("SIOCINQ");
  return std::make_pair(static_cast<int64_t>(info.tcpi_bytes_acked) + unsent,
                        static_cast<int64_t>(info.tcpi_bytes_received) - unread);
}

}  // namespace ringside
