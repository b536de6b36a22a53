// Ring reduce-scatter (collective_algorithms.h) on posted transfers.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"
#include "ddp_ring/ring_schedule.h"

namespace ringside {

// In step s rank r sends its running sum of chunk r - s - 1 to rank r + 1 and receives
// rank r - 1's running sum of chunk r - s - 2, adding its own part; after the last step
// it holds the full sum of chunk r: the all-reduce's reduce-scatter as run by rank
// r - 1.
absl::Status RingReduceScatter(const CollectiveContext& c, const float* in, float* out,
                               int64_t n) {
  if (c.world_size == 1) {
    std::memmove(out, in, n * sizeof(float));
    return absl::OkStatus();
  }
  const int w = c.world_size;
  const size_t chunk_bytes = static_cast<size_t>(n) * sizeof(float);
  const int right = (c.rank + 1) % w;
  const int left = (c.rank + w - 1) % w;
  const uint64_t slot = c.transfer->Slot(kReduceScatterSlotPrefix, c.tag);
  auto chunks = [&](int s) {
    return RingStepChunksOf(w, c.rank - 1, RingPhase::kReduceScatter, s);
  };

  // Two accumulators: one being received into while the other is being sent.
  std::vector<float> acc[2] = {std::vector<float>(n), std::vector<float>(n)};
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> in_buf,
                            c.transfer->Register(const_cast<float*>(in), chunk_bytes * w));
  std::unique_ptr<TransferBuffer> acc_buf[2];
  for (int i = 0; i < 2; ++i) {
    RINGSIDE_ASSIGN_OR_RETURN(acc_buf[i], c.transfer->Register(acc[i].data(), chunk_bytes));
  }

  for (int s = 0; s < w - 1; ++s) {
    TransferBuffer* recv = acc_buf[s % 2].get();
    RINGSIDE_RETURN_IF_ERROR(recv->PostRecv(left, slot, 0, chunk_bytes));
    // Step 0 sends this rank's own part straight from `in`; later steps forward the
    // running sum received in the previous step.
    TransferBuffer* send = s == 0 ? in_buf.get() : acc_buf[(s + 1) % 2].get();
    RINGSIDE_RETURN_IF_ERROR(
        send->PostSend(right, slot, s == 0 ? chunks(0).send * chunk_bytes : 0, chunk_bytes));
    RINGSIDE_RETURN_IF_ERROR(recv->WaitRecv());
    RINGSIDE_RETURN_IF_ERROR(send->WaitSend());
    const float* mine = in + static_cast<int64_t>(chunks(s).recv) * n;
    float* sum = acc[s % 2].data();
    if (s == w - 2) {
      // chunks(w - 2).recv == rank: the last sum goes straight to `out`.
      for (int64_t i = 0; i < n; ++i) out[i] = sum[i] + mine[i];
    } else {
      for (int64_t i = 0; i < n; ++i) sum[i] += mine[i];
    }
  }
  return absl::OkStatus();
}

}  // namespace ringside
