// Binomial-tree reduce (collective_algorithms.h) on posted transfers.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"

namespace ringside {

// A rank's subtree has reported before it sends. A non-root rank sends n floats once
// (the root never) and receives n per child, the broadcast's traffic reversed.
absl::Status BinomialReduce(const CollectiveContext& c, float* data, int64_t n, int root) {
  const int w = c.world_size;
  const int v = (c.rank - root + w) % w;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  const uint64_t slot = c.transfer->Slot(kReduceSlotPrefix, c.tag);
  int top = 1;  // The first round's 2^k: the largest power of two below w.
  while (top * 2 < w) top *= 2;
  bool has_children = false;
  for (int mask = top; mask >= 1; mask /= 2) has_children |= v < mask && v + mask < w;
  // The running sum: `data` itself on the root, a copy on an inner rank, the
  // untouched input on a leaf.
  std::vector<float> copy;
  float* sum = data;
  if (v != 0 && has_children) {
    copy.assign(data, data + n);
    sum = copy.data();
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> sum_buf,
                            c.transfer->Register(sum, bytes));
  std::vector<float>& scratch = *c.scratch;
  std::unique_ptr<TransferBuffer> scratch_buf;
  if (has_children) {
    if (static_cast<int64_t>(scratch.size()) < n) scratch.resize(n);
    RINGSIDE_ASSIGN_OR_RETURN(scratch_buf, c.transfer->Register(scratch.data(), bytes));
  }
  for (int mask = top; mask >= 1; mask /= 2) {
    if (v < mask && v + mask < w) {
      RINGSIDE_RETURN_IF_ERROR(scratch_buf->PostRecv((v + mask + root) % w, slot, 0, bytes));
      RINGSIDE_RETURN_IF_ERROR(scratch_buf->WaitRecv());
      for (int64_t i = 0; i < n; ++i) sum[i] += scratch[i];
    } else if (v >= mask && v < 2 * mask) {
      RINGSIDE_RETURN_IF_ERROR(sum_buf->PostSend((v - mask + root) % w, slot, 0, bytes));
      RINGSIDE_RETURN_IF_ERROR(sum_buf->WaitSend());
    }
  }
  return absl::OkStatus();
}

}  // namespace ringside
