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
namespace {

// Payload bytes among the first `moved` bytes of a frame (header first).
size_t PayloadOf(size_t moved) {
  return moved > kFrameHeaderBytes ? moved - kFrameHeaderBytes : 0;
}

// One ExchangeFrames call: its arguments (the buffers, strings and `counts` borrowed
// for the call), in its order, then how far each direction has got.
struct FrameExchange {
  const int fd;
  const uint64_t tag;
  const void* const send;
  const size_t send_bytes;
  void* const recv;
  const size_t recv_bytes;
  const absl::string_view peer;
  const absl::string_view link;
  FrameCounts* const counts;
  const FrameHeader out = {tag, send_bytes};
  FrameHeader in = {0, 0};
  // Bytes moved so far in each direction, header included; a direction with nothing to
  // move starts done.
  size_t written = send_bytes > 0 ? 0 : kFrameHeaderBytes + send_bytes;
  size_t read = recv_bytes > 0 ? 0 : kFrameHeaderBytes + recv_bytes;
  const size_t write_total = kFrameHeaderBytes + send_bytes;
  const size_t read_total = kFrameHeaderBytes + recv_bytes;
};

// Where `x` stands, for its errors: "<link>, exchange T: sent A of B bytes, received C
// of D".
std::string Where(const FrameExchange& x) {
  return absl::StrCat(x.link, ", exchange ", x.tag, ": sent ", PayloadOf(x.written), " of ",
                      x.send_bytes, " bytes, received ", PayloadOf(x.read), " of ",
                      x.recv_bytes);
}

// Send side, one non-blocking sendmsg of what `x` has left to send (written <
// write_total); sets *moved if it sent anything. Unavailable if the send failed.
absl::Status SendSome(FrameExchange* x, bool* moved) {
  // Header remainder, then payload remainder, in one call.
  iovec iov[2];
  int count = 0;
  if (x->written < kFrameHeaderBytes) {
    iov[count++] = {const_cast<char*>(reinterpret_cast<const char*>(&x->out)) + x->written,
                    kFrameHeaderBytes - x->written};
  }
  const size_t done = PayloadOf(x->written);
  if (done < x->send_bytes) {
    iov[count++] = {const_cast<char*>(static_cast<const char*>(x->send)) + done,
                    x->send_bytes - done};
  }
  msghdr message = {};
  message.msg_iov = iov;
  message.msg_iovlen = count;
  const ssize_t k = sendmsg(x->fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k > 0) {
    const size_t before = PayloadOf(x->written);
    x->written += static_cast<size_t>(k);
    x->counts->sent += static_cast<int64_t>(PayloadOf(x->written) - before);
    *moved = true;
  } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    return absl::UnavailableError(
        absl::StrCat("send failed: ", strerror(errno), " (", Where(*x), ")"));
  }
  return absl::OkStatus();
}

// Receive side, one readv of what `x` has left to receive (read < read_total), checking
// the header once it is complete; sets *moved if it received anything. Unavailable if
// the peer closed or the receive failed; Internal if the header is not the expected one.
absl::Status ReceiveSome(FrameExchange* x, bool* moved) {
  iovec iov[2];
  int count = 0;
  if (x->read < kFrameHeaderBytes) {
    iov[count++] = {reinterpret_cast<char*>(&x->in) + x->read, kFrameHeaderBytes - x->read};
  }
  const size_t done = PayloadOf(x->read);
  if (done < x->recv_bytes) {
    iov[count++] = {static_cast<char*>(x->recv) + done, x->recv_bytes - done};
  }
  const ssize_t k = readv(x->fd, iov, count);
  if (k == 0) {
    return absl::UnavailableError(absl::StrCat("peer closed the connection (", Where(*x), ")"));
  }
  if (k > 0) {
    const bool had_header = x->read >= kFrameHeaderBytes;
    const size_t before = PayloadOf(x->read);
    x->read += static_cast<size_t>(k);
    x->counts->received += static_cast<int64_t>(PayloadOf(x->read) - before);
    *moved = true;
    // Protocol check: the peer is at the same exchange, moving the same size.
    if (!had_header && x->read >= kFrameHeaderBytes) {
      RINGSIDE_RETURN_IF_ERROR(CheckFrameHeader(x->in, x->tag, x->recv_bytes, x->peer));
    }
  } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    return absl::UnavailableError(
        absl::StrCat("receive failed: ", strerror(errno), " (", Where(*x), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFrameHeader(const FrameHeader& got, uint64_t tag, uint64_t bytes,
                              absl::string_view peer) {
  if (got.tag == tag && got.bytes == bytes) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(peer, " sent ", got.bytes, " bytes for exchange ",
                                          got.tag, " where this end expects ", bytes,
                                          " bytes for exchange ", tag));
}

// One poll loop driving both directions of one socket: each pass sends and receives
// what the socket takes without blocking, and sleeps only when neither moved.
absl::Status ExchangeFrames(int fd, uint64_t tag, const void* send, size_t send_bytes,
                            void* recv, size_t recv_bytes, absl::Time deadline,
                            absl::string_view peer, absl::string_view link,
                            absl::FunctionRef<void(size_t, size_t)> progress,
                            FrameCounts* counts) {
  FrameExchange x{fd, tag, send, send_bytes, recv, recv_bytes, peer, link, counts};
  while (x.written < x.write_total || x.read < x.read_total) {
    bool moved = false;
    if (x.written < x.write_total) RINGSIDE_RETURN_IF_ERROR(SendSome(&x, &moved));
    if (x.read < x.read_total) RINGSIDE_RETURN_IF_ERROR(ReceiveSome(&x, &moved));
    if (moved) {
      progress(PayloadOf(x.written), PayloadOf(x.read));
      continue;
    }
    // Nothing moved: sleep until the socket can move something or the deadline passes.
    const short events = static_cast<short>((x.written < x.write_total ? POLLOUT : 0) |
                                            (x.read < x.read_total ? POLLIN : 0));
    RINGSIDE_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, events, deadline));
    if (!ready) return absl::DeadlineExceededError(absl::StrCat("no progress (", Where(x), ")"));
  }
  return absl::OkStatus();
}

}  // namespace ringside
