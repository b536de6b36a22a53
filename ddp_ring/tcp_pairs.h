// Direct TCP connections between the ranks of a Gloo process group, for ringside's own
// recursive-doubling and halving-doubling all-reduces.
//
// Why not Gloo's transport for this: Gloo's TCP pairs move every received byte on the
// device's event-loop thread, which then wakes the waiting thread through a condition
// variable, and every unbound-buffer message waits for a ready-to-receive notice from
// the receiver first. On the 2-core machines this project is measured on, a swap of
// 2.7 MB between two ranks took 3.0-3.3 ms that way; one thread driving both directions
// of a non-blocking socket with poll(2) moved the same bytes in 1.7 ms
// (docs/benchmarks.md). Gloo keeps the rendezvous, the transport of the other
// collectives and the failure handling around them.
//
// Wire format of an exchange, per direction: one frame of common/frame_io.h (a 16-byte
// header {tag, payload bytes}, then the payload); the receiver checks the header, so
// ranks that disagree on a collective's order or size get an error instead of each
// other's bytes. Sockets and framing are common/'s (socket_io.h, frame_io.h), shared
// with every other TCP path.
#ifndef RINGSIDE_DDP_RING_TCP_PAIRS_H_
#define RINGSIDE_DDP_RING_TCP_PAIRS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ddp_ring/store.h"

namespace ringside {

class TcpPairs {
 public:
  // Connects every pair of ranks. Protocol:
  //   1. listen on `hostname`, port 0, and publish "tcp_pairs/<rank>" = "host port" in
  //      `store` (which the caller prefixes per job);
  //   2. connect to every lower rank and introduce this rank with a hello
  //      {magic, rank, world_size};
  //   3. accept one connection from every higher rank, checking its hello.
  // Every step is bounded by `timeout`; DeadlineExceeded names the ranks missing.
  static absl::StatusOr<std::unique_ptr<TcpPairs>> Connect(Store* store, int rank,
                                                           int world_size,
                                                           const std::string& hostname,
                                                           absl::Duration timeout);
  ~TcpPairs();  // Closes every connection.

  TcpPairs(const TcpPairs&) = delete;
  TcpPairs& operator=(const TcpPairs&) = delete;

  // Sends `send_bytes` from `send` to `peer` while receiving `recv_bytes` from it into
  // `recv`, both directions driven by the calling thread (a zero count skips that
  // direction; the peer must make the mirror call with the same `tag`). After each
  // step of progress calls `progress(payload bytes sent, payload bytes received)`, so
  // the caller can consume a prefix of `recv` while the rest is in flight; it must not
  // write bytes of `send` not yet reported sent. Blocks until done or `deadline`.
  // Errors: DeadlineExceeded, Unavailable (connection closed or broken), Internal (the
  // peer sent a different tag or size). After an error the pair is unusable: call
  // Close. Thread-compatible: one exchange at a time per object.
  absl::Status Exchange(int peer, uint64_t tag, const void* send, size_t send_bytes,
                        void* recv, size_t recv_bytes, absl::Time deadline,
                        absl::FunctionRef<void(size_t sent, size_t received)> progress);

  // Shuts every connection down, so peers blocked on this rank see it closed at once.
  // Idempotent; safe to call from the thread that runs exchanges.
  void Close();

  int rank() const { return rank_; }
  int world_size() const { return static_cast<int>(fds_.size()); }

  // Payload bytes Exchange handed to the sockets (sent) and took from them (received)
  // since Connect, over every peer, counted as each sendmsg/readv returns (so a failed
  // exchange counts what moved before it failed); wire headers not included.
  // Thread-compatible, like Exchange.
  int64_t payload_sent() const { return payload_sent_; }
  int64_t payload_received() const { return payload_received_; }

  // What the kernel counts on this object's sockets, summed over peers (see
  // KernelSocketTraffic in common/socket_io.h): payload plus headers plus the connect hellos.
  absl::StatusOr<std::pair<int64_t, int64_t>> KernelTraffic() const;

 private:
  TcpPairs(int rank, std::vector<int> fds) : rank_(rank), fds_(std::move(fds)) {}

  const int rank_;
  std::vector<int> fds_;  // fds_[peer]: connected, non-blocking; -1 for this rank.
  int64_t payload_sent_ = 0;
  int64_t payload_received_ = 0;
};

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_TCP_PAIRS_H_
