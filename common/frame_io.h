// Framed messages over a connected non-blocking TCP socket (socket_io.h): the wire
// format every non-gRPC byte of ringside travels in (the ring's direct pairs,
// ddp_ring/tcp_pairs.h).
//
// Wire format of a frame: a 16-byte header {tag, payload bytes} (host byte order: both
// ends are the same program), then the payload. The receiver checks the header against
// what it expects as soon as it has it, so peers that disagree on what comes next (a
// collective's order or size, a step) get an error instead of each other's bytes; it
// never reads more than the expected payload, so a peer cannot make it write past its
// buffer.
//
// Thread-compatible: one exchange at a time per socket.
#ifndef RINGSIDE_COMMON_FRAME_IO_H_
#define RINGSIDE_COMMON_FRAME_IO_H_

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringside {

struct FrameHeader {
  uint64_t tag;
  uint64_t bytes;  // Payload bytes after the header.
};
inline constexpr size_t kFrameHeaderBytes = sizeof(FrameHeader);
static_assert(kFrameHeaderBytes == 16, "the wire header is 16 bytes");

// Payload bytes a framed exchange moved, each direction counted as each
// sendmsg/readv returns (a failed exchange counts what moved before it failed);
// headers not included. Accumulates over calls.
struct FrameCounts {
  int64_t sent = 0;
  int64_t received = 0;
};

// Checks a received header against the expected tag and payload size: OK, or
// Internal "<peer> sent N bytes for exchange T where this end expects M bytes for
// exchange U". Pure; the parser the fuzz target drives.
absl::Status CheckFrameHeader(const FrameHeader& got, uint64_t tag, uint64_t bytes,
                              absl::string_view peer);

// Sends one frame {tag, send_bytes} + `send` on `fd` while receiving one frame that must
// be {tag, recv_bytes} into `recv`, both directions driven by the calling thread (a
// zero count skips that direction; the peer makes the mirror call with the same tag).
// After each step of progress calls `progress(payload bytes sent, payload bytes
// received)`, so the caller can consume a prefix of `recv` while the rest is in flight;
// the caller must not change bytes of `send` not yet reported sent. `peer` names the
// other end in errors ("rank 3"); `link` says what the connection is ("direct TCP pair
// with rank 3"). Blocks until done or `deadline`. Errors: DeadlineExceeded (no
// progress before the deadline), Unavailable (the peer closed or the connection broke),
// Internal (CheckFrameHeader's). After an error the connection is out of step: close it.
absl::Status ExchangeFrames(int fd, uint64_t tag, const void* send, size_t send_bytes,
                            void* recv, size_t recv_bytes, absl::Time deadline,
                            absl::string_view peer, absl::string_view link,
                            absl::FunctionRef<void(size_t sent, size_t received)> progress,
                            FrameCounts* counts);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_FRAME_IO_H_
