#include "ddp_ring/doubling_steps.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "ddp_ring/collective_algorithms.h"

namespace ringside {

int PowerOfTwoRanks(int world_size) {
  int p2 = 1;
  while (p2 * 2 <= world_size) p2 *= 2;
  return p2;
}

absl::Status ExchangeWithPeer(const CollectiveContext& c, int peer, uint64_t step,
                              const float* send, int64_t send_n, float* recv, int64_t recv_n,
                              bool add) {
  std::vector<float>& scratch = *c.scratch;
  if (add && static_cast<int64_t>(scratch.size()) < recv_n) scratch.resize(recv_n);
  float* recv_into = add ? scratch.data() : recv;
  const bool in_place = send_n > 0 && send == recv;  // Recursive doubling's swap.
  int64_t added = 0;
  auto on_progress = [&](size_t sent, size_t received) {
    if (!add) return;
    const int64_t ready =
        static_cast<int64_t>((in_place ? std::min(sent, received) : received) / sizeof(float));
    for (int64_t i = added; i < ready; ++i) recv[i] += recv_into[i];
    added = std::max(added, ready);
  };
  return c.transfer->Exchange(peer, step, send, static_cast<size_t>(send_n) * sizeof(float),
                              recv_into, static_cast<size_t>(recv_n) * sizeof(float),
                              on_progress);
}

absl::Status FoldIn(const CollectiveContext& c, float* data, int64_t n, uint64_t step) {
  const int p2 = PowerOfTwoRanks(c.world_size);
  if (c.rank >= p2) {
    return ExchangeWithPeer(c, c.rank - p2, step, data, n, nullptr, 0, /*add=*/false);
  }
  if (c.rank < c.world_size - p2) {
    return ExchangeWithPeer(c, c.rank + p2, step, nullptr, 0, data, n, /*add=*/true);
  }
  return absl::OkStatus();
}

absl::Status FoldOut(const CollectiveContext& c, float* data, int64_t n, uint64_t step) {
  const int p2 = PowerOfTwoRanks(c.world_size);
  if (c.rank >= p2) {
    return ExchangeWithPeer(c, c.rank - p2, step, nullptr, 0, data, n, /*add=*/false);
  }
  if (c.rank < c.world_size - p2) {
    return ExchangeWithPeer(c, c.rank + p2, step, data, n, nullptr, 0, /*add=*/false);
  }
  return absl::OkStatus();
}

}  // namespace ringside
