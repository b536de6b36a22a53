// Sharder: PyTorch DistributedSampler semantics over a seeded permutation.
#include "common/sharder.h"

#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/random.h"

namespace ringside {

absl::StatusOr<Sharder> Sharder::Create(const ShardOptions& options) {
  if (options.dataset_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharder: dataset_size ", options.dataset_size, " is negative"));
  }
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharder: world_size ", options.world_size, " must be >= 1"));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharder: rank ", options.rank, " is outside [0, ", options.world_size, ")"));
  }
  if (options.mode == ShardMode::kDropLast && options.dataset_size < options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharder: drop-last mode with ", options.dataset_size,
                     " samples and ", options.world_size, " ranks leaves no samples"));
  }
  return Sharder(options);
}

Sharder::Sharder(const ShardOptions& options) : options_(options) {
  const int64_t n = options.dataset_size;
  const int64_t world = options.world_size;
  switch (options.mode) {
    case ShardMode::kPad:
      num_samples_ = (n + world - 1) / world;
      break;
    case ShardMode::kDropLast:
      num_samples_ = n / world;
      break;
    case ShardMode::kExact:
      num_samples_ = n > options.rank ? (n - options.rank + world - 1) / world : 0;
      break;
  }
}

std::vector<int64_t> Sharder::Indices(int64_t epoch) const {
  const int64_t n = options_.dataset_size;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  if (options_.shuffle && n > 1) {
    // Fisher-Yates; the stream depends only on (seed, epoch).
    const uint64_t seed =
        options_.seed + (options_.seed_per_rank ? static_cast<uint64_t>(options_.rank) : 0);
    const int64_t drawn_epoch = options_.set_epoch ? epoch : 0;
    Rng rng(Mix64(Mix64(seed) + static_cast<uint64_t>(drawn_epoch)));
    for (int64_t i = n - 1; i > 0; --i) {
      const int64_t j = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(i) + 1));
      std::swap(order[i], order[j]);
    }
  }
  // Position p of the global (padded or truncated) order is order[p % n]: in pad mode
  // positions >= n wrap to the start of the order, repeating it as often as needed.
  std::vector<int64_t> indices;
  indices.reserve(num_samples_);
  int64_t position = options_.rank;
  for (int64_t i = 0; i < num_samples_; ++i) {
    indices.push_back(order[position % n]);
    position += options_.world_size;
  }
  return indices;
}

ShardOptions TrainShardOptions(int64_t dataset_size, int world_size, int rank, uint64_t seed,
                               bool drop_last, absl::string_view bug_list) {
  ShardOptions o;
  o.dataset_size = dataset_size;
  o.world_size = world_size;
  o.rank = rank;
  o.seed = seed;
  o.shuffle = true;
  o.mode = drop_last ? ShardMode::kDropLast : ShardMode::kPad;
  if (BugListHas(bug_list, kBugUnevenShards)) o.mode = ShardMode::kExact;
  o.set_epoch = !BugListHas(bug_list, kBugNoSetEpoch);
  o.seed_per_rank = BugListHas(bug_list, kBugRankSeeds);
  return o;
}

VisitSummary SummarizeVisits(absl::Span<const float> counts) {
  VisitSummary s;
  s.samples = static_cast<int64_t>(counts.size());
  for (float c : counts) {
    const int64_t k = static_cast<int64_t>(c + 0.5f);
    s.visits += k;
    if (k >= 1) ++s.distinct;
    if (k >= 2) ++s.repeated;
  }
  s.never = s.samples - s.distinct;
  return s;
}

}  // namespace ringside
