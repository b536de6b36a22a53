// Which process of a parameter-server job plays which role, written once. A PS job of
// S shards and N workers runs, in the launcher's rank order (launch/local_job.h,
// `ringside launch`, torchrun):
//
//   dedicated shards:  ranks 0..S-1 host shard 0..S-1, ranks S..S+N-1 are workers 0..N-1
//   colocated:         ranks 0..N-1 are workers 0..N-1; worker 0 also hosts every shard
//   worker summers:    as dedicated shards (S of them, S >= 0), and worker w also hosts
//                      shard S + w: S + N shards in all (BytePS's summation service
//                      beside each worker, `--ps_worker_summers`); the slices follow
//                      BytePS's optimum (ShardWeights)
//
// Everything that places, starts, names or finds a PS process asks this class: the
// local job's plan and its --ps_servers, a launched rank's role, the shards'
// address discovery, the emulated nodes' roles, and the worker that hosts the shards.
#ifndef RINGSIDE_COMMON_PS_LAYOUT_H_
#define RINGSIDE_COMMON_PS_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ps_placement.h"
#include "common/ringside.pb.h"

namespace ringside {

// A value; thread-compatible. Callers check shards >= 1 and workers >= 1 first
// (the command line's --ps_shards and --workers checks); the answers below assume it.
class PsLayout {
 public:
  PsLayout() = default;
  PsLayout(int shards, int workers, bool colocated, bool worker_summers = false)
      : shards_(shards), workers_(workers), colocated_(colocated), worker_summers_(worker_summers) {}
  // The layout a RunConfig names (ps_shards, world_size = workers, ps_colocated,
  // ps_worker_summers).
  static PsLayout Of(const RunConfig& config);

  // Every shard of the job: the dedicated ones, and one per worker with worker summers.
  int shards() const { return shards_ + (worker_summers_ ? workers_ : 0); }
  // The shards --ps_shards names: hosted by processes of their own (or, colocated, by
  // worker 0).
  int dedicated_shards() const { return shards_; }
  int workers() const { return workers_; }
  bool colocated() const { return colocated_; }
  bool worker_summers() const { return worker_summers_; }

  // Processes that host shards and nothing else: S, or 0 when colocated.
  int shard_processes() const { return colocated_ ? 0 : shards_; }
  // Every process of the job: N + shard_processes().
  int num_processes() const { return workers_ + shard_processes(); }

  // Whether process `rank` is a dedicated shard (then it hosts shard `rank`).
  bool IsShardProcess(int rank) const { return rank >= 0 && rank < shard_processes(); }
  // The worker id of process `rank` (a worker process: !IsShardProcess(rank)).
  int WorkerOf(int rank) const { return rank - shard_processes(); }
  // The process of worker `worker`.
  int RankOfWorker(int worker) const { return shard_processes() + worker; }
  // The process that hosts shard `shard`: that shard's own, worker 0's when colocated,
  // worker w's for shard S + w with worker summers.
  int RankHostingShard(int shard) const {
    if (colocated_) return RankOfWorker(0);
    return shard < shards_ ? shard : RankOfWorker(shard - shards_);
  }
  // The shards process `rank` hosts, ascending: {rank} for a dedicated shard, all of
  // them for worker 0 when colocated, {S + w} for worker w with worker summers, none
  // otherwise.
  std::vector<int> ShardsHostedBy(int rank) const;

  // The relative sizes of the shards' slices, shard order (common/ps_placement.h cuts
  // the balanced slices by them): all 1, or with worker summers BytePS's optimum for n
  // workers and k = S servers (Jiang et al., OSDI'20, section 4.1): 2(n - 1) for each
  // server, n - k for each worker's summer, out of n^2 + kn - 2k. Every weight is > 0
  // when k < n (the caller checks; at k >= n the optimum leaves the workers nothing).
  std::vector<int64_t> ShardWeights() const;

  bool operator==(const PsLayout& o) const {
    return shards_ == o.shards_ && workers_ == o.workers_ && colocated_ == o.colocated_ &&
           worker_summers_ == o.worker_summers_;
  }
  bool operator!=(const PsLayout& o) const { return !(*this == o); }

 private:
  int shards_ = 1;
  int workers_ = 1;
  bool colocated_ = false;
  bool worker_summers_ = false;
};

// The cut of a job's parameters over `num_shards` shards, as RunConfig.ps_placement
// says: balanced slices of the flat order (of `tensors`, or of one tensor of
// `num_params` where none are given), cut evenly or, with worker summers, by
// PsLayout::Of(config).ShardWeights(); or whole tensors dealt to the shards
// (PsPartition::Create). Every shard and `explain ps` take this one cut.
// InvalidArgument for an unknown placement, `tensors` that do not add up to
// `num_params`, a cut PsPartition refuses, or one of another shard count (the
// summers' weights name the job's).
absl::StatusOr<PsPartition> JobPartition(const RunConfig& config, int num_shards, int64_t num_params,
                                         const std::vector<int64_t>& tensors);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_PS_LAYOUT_H_
