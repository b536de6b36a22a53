// Transfer: the point-to-point layer ringside's collective algorithms
// (collective_algorithms.h) run on, and the one place their payload is counted. Like
// Gloo's transport (pair, unbound buffer), cut down to what the algorithms use:
//   - posted transfers on a registered buffer: post the send or the receive of a byte
//     span of it to or from a peer, then wait for the oldest one posted (Gloo's unbound
//     buffers: the ring, the trees, the flat collectives);
//   - a synchronous full-duplex exchange with one peer (the direct TCP pairs,
//     tcp_pairs.h: the doublings).
// Implementations: gloo_transfer.h (the Gloo process group's). An algorithm over this
// interface is a function of (rank, world size, buffers, transfer) and nothing else.
//
// Errors: every call returns the transport's failure as a Status without a rank or
// operation prefix (the process group adds it): DeadlineExceeded ("timed out after
// ..."), Unavailable (a peer went away), Internal (a broken invariant). After an error
// the transfer is unusable; the process group closes it.
#ifndef RINGSIDE_DDP_RING_TRANSFER_H_
#define RINGSIDE_DDP_RING_TRANSFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ddp_ring/process_group.h"

namespace ringside {

// A caller-owned region of memory registered for posted transfers. Offsets and sizes
// are in bytes. Transfers posted on one buffer in one direction complete in the order
// they were posted to each (peer, slot): a wait finishes the oldest. Thread-compatible.
class TransferBuffer {
 public:
  virtual ~TransferBuffer() = default;

  // Posts the send of bytes [offset, offset + bytes) to `peer` on `slot` (the peer
  // posts the matching receive on the same slot) and returns without blocking. The
  // span must stay unchanged until the send is waited for.
  virtual absl::Status PostSend(int peer, uint64_t slot, size_t offset, size_t bytes) = 0;
  // Posts the receive of `bytes` bytes from `peer` on `slot` into [offset, offset +
  // bytes) and returns without blocking. The span is written until the receive is
  // waited for.
  virtual absl::Status PostRecv(int peer, uint64_t slot, size_t offset, size_t bytes) = 0;
  // Block until the oldest send (receive) posted on this buffer and not yet waited for
  // completed, bounded by the transfer's timeout; its bytes are then counted in the
  // owning Transfer's bytes(). Exactly one wait per post.
  virtual absl::Status WaitSend() = 0;
  virtual absl::Status WaitRecv() = 0;
};

class Transfer {
 public:
  virtual ~Transfer() = default;

  // Registers data [bytes] (caller-owned; it must outlive the returned buffer and every
  // transfer posted on it).
  virtual absl::StatusOr<std::unique_ptr<TransferBuffer>> Register(void* data,
                                                                   size_t bytes) = 0;
  // The slot of one collective's messages: `prefix` names the algorithm (the
  // algorithms' prefixes are distinct), `tag` the collective (the same on every rank).
  virtual uint64_t Slot(uint8_t prefix, uint32_t tag) const = 0;

  // Sends send [send_bytes] to `peer` while receiving recv_bytes from it into `recv`,
  // both directions at once (a zero count skips that direction; the peer makes the
  // mirror call with the same `tag`). After each step of progress calls
  // `progress(bytes sent, bytes received)`, so that the caller can consume a prefix of
  // `recv` while the rest is in flight. Blocks; bounded by the timeout.
  // FailedPrecondition where the transfer has no direct pairs.
  virtual absl::Status Exchange(int peer, uint64_t tag, const void* send, size_t send_bytes,
                                void* recv, size_t recv_bytes,
                                absl::FunctionRef<void(size_t sent, size_t received)> progress) = 0;

  // Payload bytes handed to the transport (sent) and taken from it (received) since
  // construction, over every buffer and exchange: a posted transfer counts once waited
  // for, an exchange as it moves (a failed one counts what moved before it failed).
  // Message headers are not counted. Thread-compatible.
  virtual CollectiveBytes bytes() const = 0;
};

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_TRANSFER_H_
