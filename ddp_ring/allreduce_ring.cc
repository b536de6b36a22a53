// The pipelined ring all-reduce (collective_algorithms.h, ring_schedule.h).
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"
#include "ddp_ring/ring_schedule.h"
#include "ddp_ring/ring_walk.h"
#include "ddp_ring/transfer.h"

namespace ringside {
namespace {

constexpr size_t kFloat = sizeof(float);

// Posts transfer `x` (its receive into scratch slot `scratch_at` while reducing,
// straight into `data` while gathering; then its send from `data`).
absl::Status Post(const RingTransfer& x, int left, int right, uint64_t reduce_slot,
                  uint64_t gather_slot, int64_t scratch_at, TransferBuffer& data_buf,
                  TransferBuffer& scratch_buf) {
  if (x.recv_n > 0) {
    if (x.reduce()) {
      RINGSIDE_RETURN_IF_ERROR(
          scratch_buf.PostRecv(left, reduce_slot, scratch_at * kFloat, x.recv_n * kFloat));
    } else {
      RINGSIDE_RETURN_IF_ERROR(
          data_buf.PostRecv(left, gather_slot, x.recv_at * kFloat, x.recv_n * kFloat));
    }
  }
  if (x.send_n > 0) {
    RINGSIDE_RETURN_IF_ERROR(data_buf.PostSend(right, x.reduce() ? reduce_slot : gather_slot,
                                               x.send_at * kFloat, x.send_n * kFloat));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RingAllReduce(const CollectiveContext& c, float* data, int64_t n) {
  const int w = c.world_size;
  const int right = (c.rank + 1) % w;
  const int left = (c.rank + w - 1) % w;
  const RingSchedule schedule = RingSchedule::Pipelined(n, w, c.rank);
  const int64_t lag = schedule.lag();
  // Receive slots in scratch: one per reduce-scatter transfer in flight.
  const int64_t slot_floats = schedule.slot_floats();
  const int64_t scratch_n = slot_floats * (lag + 1);
  std::vector<float>& scratch = *c.scratch;
  if (static_cast<int64_t>(scratch.size()) < scratch_n) scratch.resize(scratch_n);
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> data_buf,
                            c.transfer->Register(data, n * kFloat));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> scratch_buf,
                            c.transfer->Register(scratch.data(), scratch_n * kFloat));
  const uint64_t reduce_slot = c.transfer->Slot(kRingReduceSlotPrefix, c.tag);
  const uint64_t gather_slot = c.transfer->Slot(kRingGatherSlotPrefix, c.tag);
  return WalkRing(
      schedule,
      [&](const RingTransfer& x, int64_t slot) {
        return Post(x, left, right, reduce_slot, gather_slot, slot * slot_floats, *data_buf, *scratch_buf);
      },
      [&](const RingTransfer& done, int64_t slot) {
        if (done.recv_n > 0) {
          RINGSIDE_RETURN_IF_ERROR(done.reduce() ? scratch_buf->WaitRecv() : data_buf->WaitRecv());
        }
        if (done.send_n > 0) RINGSIDE_RETURN_IF_ERROR(data_buf->WaitSend());
        if (!done.reduce()) return absl::OkStatus();
        const float* received = scratch.data() + slot * slot_floats;
        float* sum = data + done.recv_at;
        for (int64_t i = 0; i < done.recv_n; ++i) sum[i] += received[i];
        return absl::OkStatus();
      });
}

}  // namespace ringside
