#include "common/ps_layout.h"

#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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

absl::StatusOr<PsPartition> JobPartition(const RunConfig& config, int num_shards, int64_t num_params,
                                         const std::vector<int64_t>& tensors) {
  RINGSIDE_ASSIGN_OR_RETURN(const PsPlacement placement, ParsePsPlacement(config.ps_placement()));
  if (!tensors.empty() && std::accumulate(tensors.begin(), tensors.end(), int64_t{0}) != num_params) {
    return absl::InvalidArgumentError(
        absl::StrCat("the registration's tensors do not add up to its ", num_params, " parameters"));
  }
  const PsLayout layout = PsLayout::Of(config);
  const std::vector<int64_t> weights =
      layout.worker_summers() ? layout.ShardWeights() : std::vector<int64_t>(num_shards, 1);
  RINGSIDE_ASSIGN_OR_RETURN(
      PsPartition partition,
      placement == PsPlacement::kBalanced
          ? PsPartition::Weighted(tensors.empty() ? std::vector<int64_t>{num_params} : tensors, weights)
          : PsPartition::Create(tensors, num_shards, placement));
  if (partition.num_shards() != num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job's layout has ", partition.num_shards(), " shards, this shard was told ", num_shards));
  }
  return partition;
}

}  // namespace ringside
