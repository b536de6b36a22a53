#include "common/ps_placement.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace ringside {

absl::StatusOr<PsPlacement> ParsePsPlacement(const std::string& name) {
  if (name.empty() || name == kPsPlacementBalanced) return PsPlacement::kBalanced;
  if (name == kPsPlacementRoundRobin) return PsPlacement::kTensorRoundRobin;
  if (name == kPsPlacementGreedy) return PsPlacement::kTensorGreedy;
  return absl::InvalidArgumentError(absl::StrCat("unknown --ps_placement '", name, "' (expected ",
                                                 kPsPlacementBalanced, ", ", kPsPlacementRoundRobin, " or ",
                                                 kPsPlacementGreedy, ")"));
}

const char* PsPlacementName(PsPlacement placement) {
  switch (placement) {
    case PsPlacement::kBalanced:
      return kPsPlacementBalanced;
    case PsPlacement::kTensorRoundRobin:
      return kPsPlacementRoundRobin;
    case PsPlacement::kTensorGreedy:
      return kPsPlacementGreedy;
  }
  return kPsPlacementBalanced;
}

double BusiestShare(const std::vector<double>& tensor_bytes, int shards, PsPlacement placement) {
  const double total = std::accumulate(tensor_bytes.begin(), tensor_bytes.end(), 0.0);
  if (shards < 1 || !(total > 0)) return 0;
  if (placement == PsPlacement::kBalanced) return 1.0 / shards;
  std::vector<double> load(shards, 0);
  if (placement == PsPlacement::kTensorRoundRobin) {
    for (size_t i = 0; i < tensor_bytes.size(); ++i) load[i % shards] += tensor_bytes[i];
  } else {
    std::vector<double> sorted = tensor_bytes;
    std::stable_sort(sorted.begin(), sorted.end(), [](double a, double b) { return a > b; });
    for (double t : sorted) *std::min_element(load.begin(), load.end()) += t;
  }
  return *std::max_element(load.begin(), load.end()) / total;
}

absl::StatusOr<PsPartition> PsPartition::Create(const std::vector<int64_t>& tensor_sizes, int num_shards,
                                                PsPlacement placement) {
  if (tensor_sizes.empty()) return absl::InvalidArgumentError("a PS placement needs the model's tensors");
  if (num_shards < 1) return absl::InvalidArgumentError(absl::StrCat("--ps_shards must be >= 1, got ", num_shards));
  for (int64_t size : tensor_sizes) {
    if (size <= 0) return absl::InvalidArgumentError(absl::StrCat("a tensor of ", size, " floats"));
  }
  PsPartition p;
  p.placement_ = placement;
  p.num_params_ = std::accumulate(tensor_sizes.begin(), tensor_sizes.end(), int64_t{0});
  const int n = static_cast<int>(tensor_sizes.size());
  if (placement == PsPlacement::kBalanced) {
    // Shard s: [floor(s P / S), floor((s + 1) P / S)): the even weighted cut.
    return Weighted(tensor_sizes, std::vector<int64_t>(num_shards, 1));
  }
  if (num_shards > n) {
    return absl::InvalidArgumentError(absl::StrCat("--ps_placement=", PsPlacementName(placement), " deals ", n,
                                                   " whole tensors: ", num_shards,
                                                   " shards would leave one without a tensor"));
  }
  // Each tensor's shard.
  std::vector<int> owner(n);
  if (placement == PsPlacement::kTensorRoundRobin) {
    for (int i = 0; i < n; ++i) owner[i] = i % num_shards;
  } else {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return tensor_sizes[a] > tensor_sizes[b]; });
    std::vector<int64_t> load(num_shards, 0);
    for (int i : order) {
      const int s = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      owner[i] = s;
      load[s] += tensor_sizes[i];
    }
    // Largest first onto the least loaded: the first S tensors land one a shard, so no
    // shard is empty when S <= n.
  }
  std::vector<int64_t> model_offset(n, 0);
  for (int i = 1; i < n; ++i) model_offset[i] = model_offset[i - 1] + tensor_sizes[i - 1];
  int64_t at = 0;
  for (int s = 0; s < num_shards; ++s) {
    const int64_t start = at;
    for (int i = 0; i < n; ++i) {
      if (owner[i] != s) continue;
      // Adjacent in both orders: one piece.
      if (!p.pieces_.empty() && p.pieces_.back().model_offset + p.pieces_.back().size == model_offset[i] &&
          p.pieces_.back().ps_offset + p.pieces_.back().size == at) {
        p.pieces_.back().size += tensor_sizes[i];
      } else {
        p.pieces_.push_back({model_offset[i], at, tensor_sizes[i]});
      }
      at += tensor_sizes[i];
    }
    p.shards_.push_back({start, at - start});
  }
  p.identity_ = p.pieces_.size() == 1;
  p.by_model_ = p.pieces_;
  std::sort(p.by_model_.begin(), p.by_model_.end(),
            [](const PsPiece& a, const PsPiece& b) { return a.model_offset < b.model_offset; });
  return p;
}

absl::StatusOr<PsPartition> PsPartition::Weighted(const std::vector<int64_t>& tensor_sizes,
                                                  const std::vector<int64_t>& weights) {
  if (tensor_sizes.empty()) return absl::InvalidArgumentError("a PS placement needs the model's tensors");
  if (weights.empty()) return absl::InvalidArgumentError("--ps_shards must be >= 1, got 0");
  for (int64_t size : tensor_sizes) {
    if (size <= 0) return absl::InvalidArgumentError(absl::StrCat("a tensor of ", size, " floats"));
  }
  int64_t total = 0;
  for (int64_t w : weights) {
    if (w <= 0) return absl::InvalidArgumentError(absl::StrCat("a shard of weight ", w));
    total += w;
  }
  PsPartition p;
  p.num_params_ = std::accumulate(tensor_sizes.begin(), tensor_sizes.end(), int64_t{0});
  // P x W fits in 64 bits for any model that fits in memory and any weights a layout
  // gives (W = n^2 + kn - 2k).
  int64_t before = 0;
  for (size_t s = 0; s < weights.size(); ++s) {
    const int64_t lo = p.num_params_ * before / total;
    before += weights[s];
    const int64_t hi = p.num_params_ * before / total;
    if (hi == lo) {
      return absl::InvalidArgumentError(absl::StrCat(weights.size(), " shards for ", p.num_params_,
                                                     " parameters: a shard would hold none"));
    }
    p.shards_.push_back({lo, hi - lo});
  }
  p.pieces_ = {{0, 0, p.num_params_}};
  p.by_model_ = p.pieces_;
  return p;
}

void PsPartition::Gather(const float* model, float* ps) const {
  for (const PsPiece& p : pieces_) {
    std::memcpy(ps + p.ps_offset, model + p.model_offset, static_cast<size_t>(p.size) * sizeof(float));
  }
}

void PsPartition::Scatter(const float* ps, float* model) const {
  for (const PsPiece& p : pieces_) {
    std::memcpy(model + p.model_offset, ps + p.ps_offset, static_cast<size_t>(p.size) * sizeof(float));
  }
}

}  // namespace ringside
