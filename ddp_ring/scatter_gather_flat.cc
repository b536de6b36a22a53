// Flat scatter and flat gather (collective_algorithms.h) on posted transfers: one
// pattern, run one way or the other.
#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "ddp_ring/collective_algorithms.h"

namespace ringside {
namespace {

enum class Direction { kFromRoot, kToRoot };

// The pattern of Gloo's scatter and gather: the root posts one transfer per rank r !=
// root, all at once, of slice r of its root_buf [world n] (sent from it, or received
// into it), then waits for them; every other rank one transfer of own [n] with the root.
// The root moves (w - 1) n floats, every other rank n. world_size > 1.
absl::Status FlatRooted(const CollectiveContext& c, float* root_buf, float* own, int64_t n,
                        int root, uint8_t prefix, Direction direction) {
  const int w = c.world_size;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  const uint64_t slot = c.transfer->Slot(prefix, c.tag);
  const bool root_sends = direction == Direction::kFromRoot;
  if (c.rank == root) {
    RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> buf,
                              c.transfer->Register(root_buf, bytes * w));
    for (int i = 1; i < w; ++i) {
      const int peer = (root + i) % w;
      RINGSIDE_RETURN_IF_ERROR(root_sends ? buf->PostSend(peer, slot, peer * bytes, bytes)
                                          : buf->PostRecv(peer, slot, peer * bytes, bytes));
    }
    for (int i = 1; i < w; ++i) {
      RINGSIDE_RETURN_IF_ERROR(root_sends ? buf->WaitSend() : buf->WaitRecv());
    }
    return absl::OkStatus();
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<TransferBuffer> buf,
                            c.transfer->Register(own, bytes));
  if (root_sends) {
    RINGSIDE_RETURN_IF_ERROR(buf->PostRecv(root, slot, 0, bytes));
    return buf->WaitRecv();
  }
  RINGSIDE_RETURN_IF_ERROR(buf->PostSend(root, slot, 0, bytes));
  return buf->WaitSend();
}

}  // namespace

absl::Status FlatScatter(const CollectiveContext& c, const float* in, float* out, int64_t n,
                         int root) {
  if (c.rank == root) {
    std::memmove(out, in + static_cast<int64_t>(root) * n, static_cast<size_t>(n) * sizeof(float));
    if (c.world_size == 1) return absl::OkStatus();
  }
  return FlatRooted(c, const_cast<float*>(in), out, n, root, kScatterSlotPrefix,
                    Direction::kFromRoot);
}

absl::Status FlatGather(const CollectiveContext& c, const float* in, float* out, int64_t n,
                        int root) {
  if (c.rank == root) {
    std::memmove(out + static_cast<int64_t>(root) * n, in, static_cast<size_t>(n) * sizeof(float));
    if (c.world_size == 1) return absl::OkStatus();
  }
  return FlatRooted(c, out, const_cast<float*>(in), n, root, kGatherSlotPrefix,
                    Direction::kToRoot);
}

}  // namespace ringside
