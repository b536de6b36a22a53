#include "common/ps_layout.h"

namespace ringside {

PsLayout PsLayout::Of(const RunConfig& config) {
  return PsLayout(config.ps_shards(), config.world_size(), config.ps_colocated());
}

std::vector<int> PsLayout::ShardsHostedBy(int rank) const {
  std::vector<int> hosted;
  for (int s = 0; s < shards_; ++s) {
    if (RankHostingShard(s) == rank) hosted.push_back(s);
  }
  return hosted;
}

}  // namespace ringside
