// A data sharder with PyTorch DistributedSampler semantics, shared by every strategy
// so that single-process, parameter-server and DDP runs see the same samples.
#ifndef RINGSIDE_COMMON_SHARDER_H_
#define RINGSIDE_COMMON_SHARDER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace ringside {

enum class ShardMode {
  // Pad by repeating indices from the start of the (shuffled) order until the total
  // divides by the world size: every rank gets ceil(n / world) samples, all samples
  // are covered, a few appear twice.
  kPad,
  // Drop the tail so the total divides by the world size: floor(n / world) each.
  kDropLast,
  // Evaluation: rank r gets positions r, r + world, ... of the order, no padding. The
  // ranks' sets are disjoint and their union is the whole dataset; counts differ by at
  // most one.
  kExact,
};

struct ShardOptions {
  int64_t dataset_size = 0;
  int world_size = 1;
  int rank = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  ShardMode mode = ShardMode::kPad;
};

// Immutable and thread-safe after Create().
class Sharder {
 public:
  // InvalidArgument for dataset_size < 0, world_size < 1, rank outside
  // [0, world_size), or kDropLast with fewer samples than ranks.
  static absl::StatusOr<Sharder> Create(const ShardOptions& options);

  // Samples this rank gets per epoch.
  int64_t num_samples() const { return num_samples_; }

  // This rank's dataset indices for `epoch`, in the order to visit them. The global
  // order is a permutation drawn from seed + epoch (identity if !shuffle), identical on
  // every rank and every run; rank r takes positions r, r + world, ... of it.
  std::vector<int64_t> Indices(int64_t epoch) const;

  const ShardOptions& options() const { return options_; }

 private:
  explicit Sharder(const ShardOptions& options);

  ShardOptions options_;
  int64_t num_samples_ = 0;
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_SHARDER_H_
