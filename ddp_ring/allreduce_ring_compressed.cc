// The pipelined ring all-reduce with 2-byte values on the wire (collective_algorithms.h,
// ring_schedule.h, common/wire_format.h).
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/wire_format.h"
#include "ddp_ring/collective_algorithms.h"
#include "ddp_ring/ring_schedule.h"
#include "ddp_ring/ring_walk.h"
#include "ddp_ring/transfer.h"

namespace ringside {
namespace {

constexpr size_t kHalf = sizeof(uint16_t);

// The rank's buffers of one compressed ring: `wire` [n] holds what it sends (a running
// sum encoded just before its send, or, in the all-gather, the final sums, received
// there or encoded from its own chunk) and, at the end, every chunk's encoded sum;
// `slots` [(lag + 1) x slot] receive the reduce-scatter's running sums.
struct WireBuffers {
  uint16_t* wire = nullptr;
  uint16_t* slots = nullptr;
  std::unique_ptr<TransferBuffer> wire_buf;
  std::unique_ptr<TransferBuffer> slots_buf;
};

// Posts transfer `x`: its receive into slot `slot_at` while reducing, straight into
// `wire` while gathering; then its send from `wire`, encoding `data` there first unless
// the all-gather forwards a sum received in an earlier step (step > 0).
absl::Status Post(const RingTransfer& x, int left, int right, uint64_t reduce_slot,
                  uint64_t gather_slot, int64_t slot_at, const float* data, WireFormat format,
                  WireBuffers& b) {
  if (x.recv_n > 0) {
    if (x.reduce()) {
      RINGSIDE_RETURN_IF_ERROR(b.slots_buf->PostRecv(left, reduce_slot, slot_at * kHalf, x.recv_n * kHalf));
    } else {
      RINGSIDE_RETURN_IF_ERROR(b.wire_buf->PostRecv(left, gather_slot, x.recv_at * kHalf, x.recv_n * kHalf));
    }
  }
  if (x.send_n > 0) {
    // Reduce-scatter: the running sum as it stands (the schedule completed the
    // transfers that fed it). All-gather step 0: this rank's own final sum.
    if (x.reduce() || x.step == 0) EncodeWire(format, data + x.send_at, x.send_n, b.wire + x.send_at);
    RINGSIDE_RETURN_IF_ERROR(b.wire_buf->PostSend(right, x.reduce() ? reduce_slot : gather_slot,
                                                  x.send_at * kHalf, x.send_n * kHalf));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CompressedRingAllReduce(const CollectiveContext& c, float* data, int64_t n, WireFormat format) {
  if (format == WireFormat::kFp32) return RingAllReduce(c, data, n);
  const int w = c.world_size;
  const int right = (c.rank + 1) % w;
  const int left = (c.rank + w - 1) % w;
  const RingSchedule schedule = RingSchedule::Pipelined(n, w, c.rank);
  const int64_t lag = schedule.lag();
  const int64_t slot_n = schedule.slot_floats();
  std::vector<uint16_t>& scratch = *c.wire_scratch;
  if (static_cast<int64_t>(scratch.size()) < n + slot_n * (lag + 1)) scratch.resize(n + slot_n * (lag + 1));
  WireBuffers b;
  b.wire = scratch.data();
  b.slots = scratch.data() + n;
  RINGSIDE_ASSIGN_OR_RETURN(b.wire_buf, c.transfer->Register(b.wire, n * kHalf));
  RINGSIDE_ASSIGN_OR_RETURN(b.slots_buf, c.transfer->Register(b.slots, slot_n * (lag + 1) * kHalf));
  const uint64_t reduce_slot = c.transfer->Slot(kRingReduceSlotPrefix, c.tag);
  const uint64_t gather_slot = c.transfer->Slot(kRingGatherSlotPrefix, c.tag);
  RINGSIDE_RETURN_IF_ERROR(WalkRing(
      schedule,
      [&](const RingTransfer& x, int64_t slot) {
        return Post(x, left, right, reduce_slot, gather_slot, slot * slot_n, data, format, b);
      },
      [&](const RingTransfer& done, int64_t slot) {
        if (done.recv_n > 0) {
          RINGSIDE_RETURN_IF_ERROR(done.reduce() ? b.slots_buf->WaitRecv() : b.wire_buf->WaitRecv());
        }
        if (done.send_n > 0) RINGSIDE_RETURN_IF_ERROR(b.wire_buf->WaitSend());
        // Reduce step: own running sum + the left neighbour's, in float32.
        if (done.reduce()) DecodeAddWire(format, b.slots + slot * slot_n, done.recv_n, data + done.recv_at);
        return absl::OkStatus();
      }));
  // Every rank now holds each chunk's final sum encoded (its own chunk encoded for the
  // all-gather's first send, the others received): all decode the same codes.
  DecodeWire(format, b.wire, n, data);
  return absl::OkStatus();
}

}  // namespace ringside
