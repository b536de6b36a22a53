#include "common/ps_layout.h"

namespace ringside {

PsLayout PsLayout::Of(const RunConfig& config) {
  return PsLayout(config.ps_shards(), config.world_size(), config.ps_colocated(),
                  config.ps_worker_summers());
}

std::vector<int> PsLayout::ShardsHostedBy(int rank) const {
  std::vector<int> hosted;
  for (int s = 0; s < shards(); ++s) {
    if (RankHostingShard(s) == rank) hosted.push_back(s);
  }
  return hosted;
}

std::vector<int64_t> PsLayout::ShardWeights() const {
  if (!worker_summers_) return std::vector<int64_t>(shards(), 1);
  const int64_t n = workers_, k = shards_;
  std::vector<int64_t> weights(shards_, 2 * (n - 1));
  weights.insert(weights.end(), workers_, n - k);
  return weights;
}

}  // namespace ringside
