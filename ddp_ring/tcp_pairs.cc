#include "ddp_ring/tcp_pairs.h"

#include <sys/socket.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/frame_io.h"
#include "common/socket_io.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

constexpr uint32_t kHelloMagic = 0x52534450;  // "RSDP"

struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t world_size;
};

std::string Key(int rank) { return absl::StrCat("tcp_pairs/", rank); }

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
  RINGSIDE_ASSIGN_OR_RETURN(TcpListener listener, ListenTcp(hostname, world_size));
  RINGSIDE_RETURN_IF_ERROR(store->Set(Key(rank), listener.endpoint));

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
    absl::StatusOr<ScopedFd> accepted = AcceptTcp(listener.fd.get(), deadline);
    if (absl::IsDeadlineExceeded(accepted.status())) {
      std::vector<int> missing;
      for (int peer = rank + 1; peer < world_size; ++peer) {
        if (out[peer] < 0) missing.push_back(peer);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "rank(s) ", absl::StrJoin(missing, ", "), " did not connect within ",
          absl::FormatDuration(timeout)));
    }
    RINGSIDE_RETURN_IF_ERROR(accepted.status());
    ScopedFd fd = std::move(*accepted);
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

absl::Status TcpPairs::Exchange(int peer, uint64_t tag, const void* send, size_t send_bytes,
                                void* recv, size_t recv_bytes, absl::Time deadline,
                                absl::FunctionRef<void(size_t, size_t)> progress) {
  if (peer < 0 || peer >= world_size() || peer == rank_) {
    return absl::InternalError(absl::StrCat("no pair with rank ", peer));
  }
  FrameCounts counts;
  absl::Status s = ExchangeFrames(fds_[peer], tag, send, send_bytes, recv, recv_bytes,
                                  deadline, absl::StrCat("rank ", peer),
                                  absl::StrCat("direct TCP pair with rank ", peer), progress,
                                  &counts);
  payload_sent_ += counts.sent;
  payload_received_ += counts.received;
  if (absl::IsInternal(s)) {  // The header check: a peer at another collective.
    return absl::InternalError(
        absl::StrCat(s.message(), ": the ranks disagree on the collectives"));
  }
  return s;
}

}  // namespace ringside
