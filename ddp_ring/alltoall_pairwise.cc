// Pairwise all-to-all (collective_algorithms.h) on posted transfers.
#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"

namespace ringside {

// Each rank sends and receives (w - 1) n floats.
absl::Status PairwiseAllToAll(const CollectiveContext& c, const float* in, float* out,
                              int64_t n) {
  const int w = c.world_size;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  std::memmove(out + static_cast<int64_t>(c.rank) * n, in + static_cast<int64_t>(c.rank) * n,
               bytes);
  if (w == 1) return absl::OkStatus();
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> in_buf,
                            c.transfer->Register(const_cast<float*>(in), bytes * w));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> out_buf,
                            c.transfer->Register(out, bytes * w));
  const uint64_t slot = c.transfer->Slot(kAllToAllSlotPrefix, c.tag);
  for (int i = 1; i < w; ++i) {
    const int from = (c.rank - i + w) % w;
    const int to = (c.rank + i) % w;
    RINGSIDE_RETURN_IF_ERROR(out_buf->PostRecv(from, slot, from * bytes, bytes));
    RINGSIDE_RETURN_IF_ERROR(in_buf->PostSend(to, slot, to * bytes, bytes));
  }
  for (int i = 1; i < w; ++i) {
    RINGSIDE_RETURN_IF_ERROR(out_buf->WaitRecv());
    RINGSIDE_RETURN_IF_ERROR(in_buf->WaitSend());
  }
  return absl::OkStatus();
}

}  // namespace ringside
