// Where a parameter-server job's tensors live (`--ps_placement`, issue 35): shared by the
// shards, which size their slices by it, and the workers, which gather and scatter by it.
//
// The PS order. Shards hold contiguous slices of one flat vector, shard 0's first, as
// always; a placement only chooses which of the model's tensors make up each slice.
// The PS order lists shard 0's tensors (in model order), then shard 1's, and so on:
//   balanced            today's byte-balanced cut of the model's own flat order (slices
//                       differ by at most a float, whatever the layer boundaries): the
//                       PS order is the model order;
//   tensor_round_robin  whole tensors dealt to shards in model order, tensor i to shard
//                       i mod S, as TensorFlow's replica_device_setter places variables;
//   tensor_greedy       whole tensors, largest first, each onto the shard holding the
//                       fewest bytes so far (ties: the lower shard), as a load-aware
//                       placement does.
// A tensor is one weight or one bias of a layer (Model::TensorRanges). Whole-tensor
// placements make the PS order a permutation of the model's: the workers gather their
// gradients into it and scatter the parameters back (ps_worker/ps_strategy.h).
#ifndef RINGSIDE_COMMON_PS_PLACEMENT_H_
#define RINGSIDE_COMMON_PS_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringside {

// RunConfig.ps_placement's values (--ps_placement); "" reads as kPsPlacementBalanced.
inline constexpr char kPsPlacementBalanced[] = "balanced";
inline constexpr char kPsPlacementRoundRobin[] = "tensor_round_robin";
inline constexpr char kPsPlacementGreedy[] = "tensor_greedy";

enum class PsPlacement { kBalanced, kTensorRoundRobin, kTensorGreedy };

// InvalidArgument naming the three for anything else; "" is balanced.
absl::StatusOr<PsPlacement> ParsePsPlacement(const std::string& name);
const char* PsPlacementName(PsPlacement placement);

// The share of the model the busiest of `shards` holds when tensors of `tensor_bytes`
// (model order) are placed so, allowing shards without a tensor (a prediction for
// clusters larger than the model's tensor count, as TensorFlow leaves such servers
// idle): balanced 1 / S; 0 for no tensors or shards < 1.
double BusiestShare(const std::vector<double>& tensor_bytes, int shards, PsPlacement placement);

// A run of floats contiguous in both orders.
struct PsPiece {
  int64_t model_offset = 0;
  int64_t ps_offset = 0;
  int64_t size = 0;
};

// A float range [offset, offset + size).
struct PsRange {
  int64_t offset = 0;
  int64_t size = 0;
};

// The placement of one job: every shard's slice of the PS order and the pieces that map
// it to the model's order.
class PsPartition {
 public:
  // The partition of tensors of `tensor_sizes` floats (model order, each > 0) over
  // `num_shards`. InvalidArgument for no tensors, a size <= 0, num_shards < 1 or more
  // shards than floats (balanced), or a whole-tensor placement that leaves a shard
  // without a tensor (more shards than tensors), each one line.
  static absl::StatusOr<PsPartition> Create(const std::vector<int64_t>& tensor_sizes, int num_shards,
                                            PsPlacement placement);
  // Balanced slices of relative sizes `weights` (one per shard, each > 0; PsLayout::
  // ShardWeights): shard s gets [floor(P W_s / W), floor(P W_{s+1} / W)) of the P floats,
  // W_s the weights before s and W their sum; all 1 is Create(.., num_shards, kBalanced).
  // InvalidArgument for no tensors, a size or weight <= 0, or a shard left empty.
  static absl::StatusOr<PsPartition> Weighted(const std::vector<int64_t>& tensor_sizes,
                                              const std::vector<int64_t>& weights);

  PsPlacement placement() const { return placement_; }
  int num_shards() const { return static_cast<int>(shards_.size()); }
  int64_t num_params() const { return num_params_; }
  // Shard s's slice of the PS order.
  const PsRange& shard(int s) const { return shards_[s]; }
  // True when the PS order is the model order (balanced, or a whole-tensor placement
  // that happens to keep every tensor in place): nothing to gather or scatter.
  bool identity() const { return identity_; }
  // The pieces in PS order; they tile [0, num_params()) in both orders.
  const std::vector<PsPiece>& pieces() const { return pieces_; }

  // Calls fn(piece part) for the parts of `model_range` (model order), in PS order of
  // the pieces, each as {model_offset, ps_offset, size}.
  template <typename Fn>
  void ForEachPsPart(const PsRange& model_range, Fn fn) const {
    const int64_t end = model_range.offset + model_range.size;
    for (const PsPiece& p : by_model_) {
      const int64_t lo = p.model_offset > model_range.offset ? p.model_offset : model_range.offset;
      const int64_t hi = p.model_offset + p.size < end ? p.model_offset + p.size : end;
      if (lo < hi) fn(PsPiece{lo, p.ps_offset + (lo - p.model_offset), hi - lo});
    }
  }
  // The same for `ps_range` (PS order), in model order of the pieces.
  template <typename Fn>
  void ForEachModelPart(const PsRange& ps_range, Fn fn) const {
    const int64_t end = ps_range.offset + ps_range.size;
    for (const PsPiece& p : pieces_) {
      const int64_t lo = p.ps_offset > ps_range.offset ? p.ps_offset : ps_range.offset;
      const int64_t hi = p.ps_offset + p.size < end ? p.ps_offset + p.size : end;
      if (lo < hi) fn(PsPiece{p.model_offset + (lo - p.ps_offset), lo, hi - lo});
    }
  }

  // Copies `n` = num_params() floats from model order to PS order, and back.
  void Gather(const float* model, float* ps) const;
  void Scatter(const float* ps, float* model) const;

 private:
  PsPlacement placement_ = PsPlacement::kBalanced;
  int64_t num_params_ = 0;
  bool identity_ = true;
  std::vector<PsRange> shards_;
  std::vector<PsPiece> pieces_;    // PS order.
  std::vector<PsPiece> by_model_;  // The same, model order.
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_PS_PLACEMENT_H_
