// Flat scatter (collective_algorithms.h) on posted transfers.
#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"

namespace ringside {

// The root sends (w - 1) n floats, every other rank receives n.
absl::Status FlatScatter(const CollectiveContext& c, const float* in, float* out, int64_t n,
                         int root) {
  const int w = c.world_size;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  const uint64_t slot = c.transfer->Slot(kScatterSlotPrefix, c.tag);
  if (c.rank == root) {
    std::memmove(out, in + static_cast<int64_t>(root) * n, bytes);
    if (w == 1) return absl::OkStatus();
    RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> in_buf,
                              c.transfer->Register(const_cast<float*>(in), bytes * w));
    for (int i = 1; i < w; ++i) {
      const int peer = (root + i) % w;
      RINGSIDE_RETURN_IF_ERROR(in_buf->PostSend(peer, slot, peer * bytes, bytes));
    }
    for (int i = 1; i < w; ++i) RINGSIDE_RETURN_IF_ERROR(in_buf->WaitSend());
    return absl::OkStatus();
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> out_buf,
                            c.transfer->Register(out, bytes));
  RINGSIDE_RETURN_IF_ERROR(out_buf->PostRecv(root, slot, 0, bytes));
  return out_buf->WaitRecv();
}

}  // namespace ringside
