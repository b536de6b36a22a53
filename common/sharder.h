// A data sharder with PyTorch DistributedSampler semantics, shared by every strategy
// so that single-process, parameter-server and DDP runs see the same samples.
#ifndef RINGSIDE_COMMON_SHARDER_H_
#define RINGSIDE_COMMON_SHARDER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/bugs.h"

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
  // most one. Training uses it only for the teaching bug uneven_shards (no padding:
  // ranks run different numbers of steps).
  kExact,
};

struct ShardOptions {
  int64_t dataset_size = 0;
  int world_size = 1;
  int rank = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  ShardMode mode = ShardMode::kPad;
  // Teaching bugs (`ringside train --bug`), off by default:
  // false: every epoch draws epoch 0's order, as a DistributedSampler whose set_epoch()
  // is never called (bug no_set_epoch).
  bool set_epoch = true;
  // true: rank r draws its permutation from seed + r, so the ranks' shards overlap and
  // some samples are never visited (bug rank_seeds).
  bool seed_per_rank = false;
};

// The teaching bugs' names, as `--bug` and RunConfig.bugs spell them. RunConfig.bugs is
// a sorted comma-separated list of them (common/run_config.cc validates it).
// The training set's sharding of a run, one definition for the trainer and for the
// checks that recount its visits (ddp_ring/ddp_worker.cc): pad mode (kDropLast with
// drop_last), shuffled from `seed`, with the sharder's bugs of `bug_list` switched on
// (no_set_epoch, rank_seeds; uneven_shards: kExact, no padding).
ShardOptions TrainShardOptions(int64_t dataset_size, int world_size, int rank, uint64_t seed,
                               bool drop_last, absl::string_view bug_list);

// How often each sample of a dataset was visited in one epoch by all ranks together.
struct VisitSummary {
  int64_t samples = 0;   // Dataset size.
  int64_t distinct = 0;  // Samples visited at least once.
  int64_t repeated = 0;  // Samples visited twice or more.
  int64_t never = 0;     // Samples not visited.
  int64_t visits = 0;    // Visits in all.
};

// Summary of `counts` [dataset size]: counts[i] = visits of sample i (whole numbers).
VisitSummary SummarizeVisits(absl::Span<const float> counts);

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
  // every rank and every run; rank r takes positions r, r + world, ... of it. (Bugs:
  // epoch 0 for every epoch without set_epoch; seed + rank with seed_per_rank.)
  std::vector<int64_t> Indices(int64_t epoch) const;

  const ShardOptions& options() const { return options_; }

 private:
  explicit Sharder(const ShardOptions& options);

  ShardOptions options_;
  int64_t num_samples_ = 0;
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_SHARDER_H_
