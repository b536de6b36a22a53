// Ring all-gather (collective_algorithms.h) on posted transfers.
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"
#include "ddp_ring/ring_schedule.h"

namespace ringside {

// In step s rank r sends slice r - s to r + 1 and receives slice r - s - 1 from r - 1:
// the all-reduce's all-gather as run by rank r - 1.
absl::Status RingAllGather(const CollectiveContext& c, float* out, int64_t n) {
  const int w = c.world_size;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> buf,
                            c.transfer->Register(out, bytes * w));
  const uint64_t slot = c.transfer->Slot(kAllGatherSlotPrefix, c.tag);
  for (int s = 0; s < w - 1; ++s) {
    const RingStepChunks slices = RingStepChunksOf(w, c.rank - 1, RingPhase::kAllGather, s);
    RINGSIDE_RETURN_IF_ERROR(buf->PostRecv((c.rank + w - 1) % w, slot, slices.recv * bytes, bytes));
    RINGSIDE_RETURN_IF_ERROR(buf->PostSend((c.rank + 1) % w, slot, slices.send * bytes, bytes));
    RINGSIDE_RETURN_IF_ERROR(buf->WaitRecv());
    RINGSIDE_RETURN_IF_ERROR(buf->WaitSend());
  }
  return absl::OkStatus();
}

}  // namespace ringside
