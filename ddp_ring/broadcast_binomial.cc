// Binomial-tree broadcast (collective_algorithms.h) on posted transfers.
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"

namespace ringside {

absl::Status BinomialBroadcast(const CollectiveContext& c, float* data, int64_t n, int root) {
  const int w = c.world_size;
  const int v = (c.rank - root + w) % w;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> buf,
                            c.transfer->Register(data, bytes));
  const uint64_t slot = c.transfer->Slot(kBroadcastSlotPrefix, c.tag);
  for (int mask = 1; mask < w; mask *= 2) {
    if (v < mask && v + mask < w) {
      RINGSIDE_RETURN_IF_ERROR(buf->PostSend((v + mask + root) % w, slot, 0, bytes));
      RINGSIDE_RETURN_IF_ERROR(buf->WaitSend());
    } else if (v >= mask && v < 2 * mask) {
      RINGSIDE_RETURN_IF_ERROR(buf->PostRecv((v - mask + root) % w, slot, 0, bytes));
      RINGSIDE_RETURN_IF_ERROR(buf->WaitRecv());
    }
  }
  return absl::OkStatus();
}

}  // namespace ringside
