#include "ddp_ring/tcp_pairs.h"

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
#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "ddp_ring/socket_io.h"

namespace ringside {
namespace {

constexpr uint32_t kHelloMagic = 0x52534450;  // "RSDP"

struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t world_size;
};

struct Header {
  uint64_t tag;
  uint64_t bytes;
};
constexpr size_t kHeaderBytes = sizeof(Header);
static_assert(kHeaderBytes == 16, "the wire header is 16 bytes");

std::string Key(int rank) { return absl::StrCat("tcp_pairs/", rank); }

// Protocol step 1: a listening socket on `hostname`, any port; returns it and its
// "numeric-host port".
absl::StatusOr<std::pair<int, std::string>> Listen(const std::string& hostname,
                                                   int backlog) {
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
  return std::make_pair(fd.release(), absl::StrCat(host, " ", port));
}

// Protocol step 2: connects to `endpoint` ("host port") and says hello.
absl::StatusOr<int> ConnectTo(const std::string& endpoint, const Hello& hello,
                              absl::Time deadline) {
  std::vector<std::string> parts = absl::StrSplit(endpoint, ' ');
  if (parts.size() != 2) return absl::InternalError(absl::StrCat("bad endpoint '", endpoint, "'"));
  RINGSIDE_ASSIGN_OR_RETURN(ScopedFd fd, ConnectTcp(parts[0], parts[1], deadline));
  RINGSIDE_RETURN_IF_ERROR(WriteAll(fd.get(), &hello, sizeof(hello), deadline));
  return fd.release();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpPairs>> TcpPairs::Connect(Store* store, int rank,
                                                            int world_size,
                                                            const std::string& hostname,
                                                            absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<int> fds(world_size, -1);
  // Owns the connections until they are handed to the object.
  auto pairs = std::unique_ptr<TcpPairs>(new TcpPairs(rank, fds));
  std::vector<int>& out = pairs->fds_;

  // Step 1: listen and publish.
  RINGSIDE_ASSIGN_OR_RETURN(auto listening, Listen(hostname, world_size));
  ScopedFd listener(listening.first);
  RINGSIDE_RETURN_IF_ERROR(store->Set(Key(rank), listening.second));

  // Step 2: connect to every lower rank.
  const Hello hello = {kHelloMagic, rank, world_size};
  for (int peer = 0; peer < rank; ++peer) {
    absl::StatusOr<std::string> endpoint = store->Get(Key(peer), deadline - absl::Now());
    if (!endpoint.ok()) {
      return absl::Status(endpoint.status().code(),
                          absl::StrCat("rank ", peer, " never published its address: ",
                                       endpoint.status().message()));
    }
    absl::StatusOr<int> fd = ConnectTo(*endpoint, hello, deadline);
    if (!fd.ok()) {
      return absl::Status(fd.status().code(), absl::StrCat("rank ", peer, ": ", fd.status().message()));
    }
    out[peer] = *fd;
  }

  // Step 3: accept every higher rank.
  int expected = world_size - 1 - rank;
  while (expected > 0) {
    RINGSIDE_ASSIGN_OR_RETURN(bool ready, WaitFor(listener.get(), POLLIN, deadline));
    if (!ready) {
      std::vector<int> missing;
      for (int peer = rank + 1; peer < world_size; ++peer) {
        if (out[peer] < 0) missing.push_back(peer);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "rank(s) ", absl::StrJoin(missing, ", "), " did not connect within ",
          absl::FormatDuration(timeout)));
    }
    ScopedFd fd(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return Errno("accept");
    }
    RINGSIDE_RETURN_IF_ERROR(SetNonBlockingNoDelay(fd.get()));
    Hello theirs;
    // A connection that is not a peer's (no or wrong hello) is dropped.
    if (!ReadAll(fd.get(), &theirs, sizeof(theirs), deadline).ok() ||
        theirs.magic != kHelloMagic) {
      continue;
    }
    if (theirs.world_size != world_size) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", theirs.rank, " runs with world size ",
                                                     theirs.world_size, ", this rank with ",
                                                     world_size));
    }
    if (theirs.rank <= rank || theirs.rank >= world_size || out[theirs.rank] >= 0) continue;
    out[theirs.rank] = fd.release();
    --expected;
  }
  return pairs;
}

TcpPairs::~TcpPairs() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
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

absl::StatusOr<std::pair<int64_t, int64_t>> TcpPairs::KernelTraffic() const {
  std::pair<int64_t, int64_t> total = {0, 0};
  for (int fd : fds_) {
    if (fd < 0) continue;
    RINGSIDE_ASSIGN_OR_RETURN(auto one, KernelSocketTraffic(fd));
    total.first += one.first;
    total.second += one.second;
  }
  return total;
}

void TcpPairs::Close() {
  for (int fd : fds_) {
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
  }
}

// Exchange is one poll loop (about 90 lines) driving both directions of one socket: the
// header check, the send side and the receive side share the loop's state.
absl::Status TcpPairs::Exchange(int peer, uint64_t tag, const void* send, size_t send_bytes,
                                void* recv, size_t recv_bytes, absl::Time deadline,
                                absl::FunctionRef<void(size_t, size_t)> progress) {
  if (peer < 0 || peer >= world_size() || peer == rank_) {
    return absl::InternalError(absl::StrCat("no pair with rank ", peer));
  }
  const int fd = fds_[peer];
  const Header out = {tag, send_bytes};
  Header in = {0, 0};
  // Bytes moved so far in each direction, header included; a direction with nothing to
  // move starts done.
  size_t written = send_bytes > 0 ? 0 : kHeaderBytes + send_bytes;
  size_t read = recv_bytes > 0 ? 0 : kHeaderBytes + recv_bytes;
  const size_t write_total = kHeaderBytes + send_bytes;
  const size_t read_total = kHeaderBytes + recv_bytes;
  auto payload = [](size_t moved) { return moved > kHeaderBytes ? moved - kHeaderBytes : 0; };
  auto where = [&] {
    return absl::StrCat("direct TCP pair with rank ", peer, ", exchange ", tag, ": sent ",
                        payload(written), " of ", send_bytes, " bytes, received ", payload(read),
                        " of ", recv_bytes);
  };

  while (written < write_total || read < read_total) {
    bool moved = false;
    if (written < write_total) {
      // Header remainder, then payload remainder, in one call.
      iovec iov[2];
      int count = 0;
      if (written < kHeaderBytes) {
        iov[count++] = {const_cast<char*>(reinterpret_cast<const char*>(&out)) + written,
                        kHeaderBytes - written};
      }
      const size_t done = payload(written);
      if (done < send_bytes) {
        iov[count++] = {const_cast<char*>(static_cast<const char*>(send)) + done,
                        send_bytes - done};
      }
      msghdr message = {};
      message.msg_iov = iov;
      message.msg_iovlen = count;
      const ssize_t k = sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        const size_t before = payload(written);
        written += static_cast<size_t>(k);
        payload_sent_ += static_cast<int64_t>(payload(written) - before);
        moved = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat("send failed: ", strerror(errno), " (", where(), ")"));
      }
    }
    if (read < read_total) {
      iovec iov[2];
      int count = 0;
      if (read < kHeaderBytes) {
        iov[count++] = {reinterpret_cast<char*>(&in) + read, kHeaderBytes - read};
      }
      const size_t done = payload(read);
      if (done < recv_bytes) {
        iov[count++] = {static_cast<char*>(recv) + done, recv_bytes - done};
      }
      const ssize_t k = readv(fd, iov, count);
      if (k == 0) {
        return absl::UnavailableError(absl::StrCat("peer closed the connection (", where(), ")"));
      }
      if (k > 0) {
        const bool had_header = read >= kHeaderBytes;
        const size_t before = payload(read);
        read += static_cast<size_t>(k);
        payload_received_ += static_cast<int64_t>(payload(read) - before);
        moved = true;
        // Protocol check: the peer is in the same collective, moving the same size.
        if (!had_header && read >= kHeaderBytes && (in.tag != tag || in.bytes != recv_bytes)) {
          return absl::InternalError(absl::StrCat(
              "rank ", peer, " sent ", in.bytes, " bytes for exchange ", in.tag, " where this rank expects ",
              recv_bytes, " bytes for exchange ", tag, ": the ranks disagree on the collectives"));
        }
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat("receive failed: ", strerror(errno), " (", where(), ")"));
      }
    }
    if (moved) {
      progress(payload(written), payload(read));
      continue;
    }
    // Nothing moved: sleep until the socket can move something or the deadline passes.
    const short events = static_cast<short>((written < write_total ? POLLOUT : 0) |
                                            (read < read_total ? POLLIN : 0));
    RINGSIDE_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, events, deadline));
    if (!ready) return absl::DeadlineExceededError(absl::StrCat("no progress (", where(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace ringside
