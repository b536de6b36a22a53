// GlooTransfer: the Transfer (transfer.h) of the Gloo process group: posted transfers on
// Gloo's unbound buffers over a connected Gloo context, exchanges on the direct TCP
// pairs (tcp_pairs.h). Internal to the Gloo backend.
#ifndef RINGSIDE_DDP_RING_GLOO_TRANSFER_H_
#define RINGSIDE_DDP_RING_GLOO_TRANSFER_H_

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/tcp_pairs.h"
#include "ddp_ring/transfer.h"

namespace ringside {

// One per collective (cheap to make): bytes() counts that collective's payload.
// `context` (connected) and `pairs` (null where no doubling may run) are borrowed and
// must outlive the object and its buffers; every wait and exchange is bounded by
// `timeout`. Gloo's exceptions come back as Statuses (GlooExceptionToStatus).
// Thread-compatible: the group's worker thread only.
class GlooTransfer : public Transfer {
 public:
  GlooTransfer(gloo::Context* context, TcpPairs* pairs, absl::Duration timeout);

  absl::StatusOr<std::unique_ptr<TransferBuffer>> Register(void* data, size_t bytes) override;
  uint64_t Slot(uint8_t prefix, uint32_t tag) const override;
  absl::Status Exchange(int peer, uint64_t tag, const void* send, size_t send_bytes, void* recv,
                        size_t recv_bytes,
                        absl::FunctionRef<void(size_t sent, size_t received)> progress) override;
  CollectiveBytes bytes() const override;

 private:
  class Buffer;

  gloo::Context* const context_;
  TcpPairs* const pairs_;
  const absl::Duration timeout_;
  const std::chrono::milliseconds timeout_ms_;
  CollectiveBytes posted_;         // Posted transfers waited for.
  CollectiveBytes pairs_at_start_;  // The pairs' payload counters at construction.
};

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_GLOO_TRANSFER_H_
