// Flat gather (collective_algorithms.h) on posted transfers.
#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"

namespace ringside {

// The root receives (w - 1) n floats, every other rank sends n.
absl::Status FlatGather(const CollectiveContext& c, const float* in, float* out, int64_t n,
                        int root) {
  const int w = c.world_size;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  const uint64_t slot = c.transfer->Slot(kGatherSlotPrefix, c.tag);
  if (c.rank == root) {
    std::memmove(out + static_cast<int64_t>(root) * n, in, bytes);
    if (w == 1) return absl::OkStatus();
    RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> out_buf,
                              c.transfer->Register(out, bytes * w));
    for (int i = 1; i < w; ++i) {
      const int peer = (root + i) % w;
      RINGSIDE_RETURN_IF_ERROR(out_buf->PostRecv(peer, slot, peer * bytes, bytes));
    }
    for (int i = 1; i < w; ++i) RINGSIDE_RETURN_IF_ERROR(out_buf->WaitRecv());
    return absl::OkStatus();
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> in_buf,
                            c.transfer->Register(const_cast<float*>(in), bytes));
  RINGSIDE_RETURN_IF_ERROR(in_buf->PostSend(root, slot, 0, bytes));
  return in_buf->WaitSend();
}

}  // namespace ringside
