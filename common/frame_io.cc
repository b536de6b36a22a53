#include "common/frame_io.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/socket_io.h"
#include "common/status_macros.h"

namespace ringside {

absl::Status CheckFrameHeader(const FrameHeader& got, uint64_t tag, uint64_t bytes,
                              absl::string_view peer) {
  if (got.tag == tag && got.bytes == bytes) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(peer, " sent ", got.bytes, " bytes for exchange ",
                                          got.tag, " where this end expects ", bytes,
                                          " bytes for exchange ", tag));
}

// One poll loop (about 90 lines) driving both directions of one socket: the header
// check, the send side and the receive side share the loop's state.
absl::Status ExchangeFrames(int fd, uint64_t tag, const void* send, size_t send_bytes,
                            void* recv, size_t recv_bytes, absl::Time deadline,
                            absl::string_view peer, absl::string_view link,
                            absl::FunctionRef<void(size_t, size_t)> progress,
                            FrameCounts* counts) {
  const FrameHeader out = {tag, send_bytes};
  FrameHeader in = {0, 0};
  // Bytes moved so far in each direction, header included; a direction with nothing to
  // move starts done.
  size_t written = send_bytes > 0 ? 0 : kFrameHeaderBytes + send_bytes;
  size_t read = recv_bytes > 0 ? 0 : kFrameHeaderBytes + recv_bytes;
  const size_t write_total = kFrameHeaderBytes + send_bytes;
  const size_t read_total = kFrameHeaderBytes + recv_bytes;
  auto payload = [](size_t moved) {
    return moved > kFrameHeaderBytes ? moved - kFrameHeaderBytes : 0;
  };
  auto where = [&] {
    return absl::StrCat(link, ", exchange ", tag, ": sent ", payload(written), " of ",
                        send_bytes, " bytes, received ", payload(read), " of ", recv_bytes);
  };

  while (written < write_total || read < read_total) {
    bool moved = false;
    if (written < write_total) {
      // Header remainder, then payload remainder, in one call.
      iovec iov[2];
      int count = 0;
      if (written < kFrameHeaderBytes) {
        iov[count++] = {const_cast<char*>(reinterpret_cast<const char*>(&out)) + written,
                        kFrameHeaderBytes - written};
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
        counts->sent += static_cast<int64_t>(payload(written) - before);
        moved = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return absl::UnavailableError(
            absl::StrCat("send failed: ", strerror(errno), " (", where(), ")"));
      }
    }
    if (read < read_total) {
      iovec iov[2];
      int count = 0;
      if (read < kFrameHeaderBytes) {
        iov[count++] = {reinterpret_cast<char*>(&in) + read, kFrameHeaderBytes - read};
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
        const bool had_header = read >= kFrameHeaderBytes;
        const size_t before = payload(read);
        read += static_cast<size_t>(k);
        counts->received += static_cast<int64_t>(payload(read) - before);
        moved = true;
        // Protocol check: the peer is at the same exchange, moving the same size.
        if (!had_header && read >= kFrameHeaderBytes) {
          RINGSIDE_RETURN_IF_ERROR(CheckFrameHeader(in, tag, recv_bytes, peer));
        }
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return absl::UnavailableError(
            absl::StrCat("receive failed: ", strerror(errno), " (", where(), ")"));
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
