// One chunk of a shard's slice: the chunk's optimizer (its own Ops and Sgd over the
// chunk's floats), its consistency state (ChunkClock, changed through the policy), the
// ordered sum of a step's pushes (OrderedSum, when the policy sums) and, for elastic
// PS, the step from which each worker's pushes count. The chunk's parameters are a
// range of the Shard's slice, borrowed; the chunk's lock guards that range too.
//
// Thread-safety: every method may be called from any thread; each takes the chunk's
// own lock, except those named ...Locked, which need it held (ChunkSetLock). Lock
// order: the Shard's mu_ before a chunk's lock, never after; several chunks' locks
// only through ChunkSetLock, in index order. ops.h and sgd.h promise no thread
// safety: this chunk's Ops and Sgd are used only under its lock.
#ifndef RINGSIDE_PS_SERVER_SHARD_CHUNK_H_
#define RINGSIDE_PS_SERVER_SHARD_CHUNK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/ops.h"
#include "common/sgd.h"
#include "common/trace.h"
#include "ps_server/consistency_policy.h"
#include "ps_server/ordered_sum.h"
#include "ps_server/ps.pb.h"
#include "ps_server/sharding.h"

namespace ringside {

class ShardChunk {
 public:
  // Chunk `index` of a slice: the `range` of the slice (offset relative to the slice),
  // whose floats start at `params` (borrowed; it outlives the chunk). `sums`: the
  // policy sums pushes (an accumulator over the chunk is kept). `summation`: a
  // summation server's chunk (BSP only; the Shard checks), whose complete step leaves
  // the mean gradient in the chunk's floats instead of stepping SGD with it (with one
  // worker, that worker's gradient). InvalidArgument for bad `hyper`.
  static absl::StatusOr<std::unique_ptr<ShardChunk>> Create(int64_t index, Slice range,
                                                            float* params, int num_workers,
                                                            const SgdHyper& hyper, bool sums,
                                                            bool summation = false);

  int64_t index() const { return index_; }
  const Slice& range() const { return range_; }
  // The step the chunk's parameters belong to (ChunkClock::version).
  int64_t version() const ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Initialisation by worker 0, before any gradient. ----
  // The chunk's optimizer state / parameters from `data` (range().size floats).
  absl::Status LoadState(const float* data) ABSL_LOCKS_EXCLUDED(mu_);
  void LoadParams(const float* data) ABSL_LOCKS_EXCLUDED(mu_);
  // The parameters are those of `step`: the chunk starts there.
  void Start(int64_t step) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Push (the hot path). ----
  // The spans of one push: summing it, and the update (SGD) it did; empty when none.
  struct PushSpans {
    TraceInterval aggregate;
    TraceInterval update;
  };
  // Worker w's gradient of `step` for this chunk, read block by block through `blocks`
  // (never copied whole): FailedPrecondition, changing nothing, for a worker that does
  // not count in `step` (dropped: a push racing its loss) or a push the policy refuses;
  // else applied as the policy says (SGD at once, or summed in worker-id order and SGD
  // on the mean once the step is complete).
  absl::StatusOr<PushSpans> Push(const ConsistencyPolicy& policy, int w, int64_t step,
                                 OrderedSum::Blocks blocks) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Pull. ----
  // Called with the chunk's payload for a reply (its parameters, or a copy of its
  // optimizer state) and range() while the chunk's lock is held.
  using FillFn = std::function<void(const float* data, const Slice& chunk)>;
  // A pull of `kind` for `worker`, about to run `step`; `start_step`: the worker's
  // first step (the shard's start or its rejoin); `behind`: the shard's clocks do not
  // meet the policy's StepsNeeded(step) yet.
  struct Pull {
    int worker = 0;
    int64_t step = 0;
    ps::TensorKind kind = ps::PARAMS;
    int64_t start_step = 0;
    bool behind = false;
  };
  // Fills the reply when the policy releases the chunk (true), or returns false.
  // FailedPrecondition at once for PARAMS of a step the worker cannot be about to run
  // (past its start while it has not pushed this chunk of step - 1), or of a step the
  // chunk is past.
  absl::StatusOr<bool> Serve(const ConsistencyPolicy& policy, const Pull& pull,
                             const FillFn& fill) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until the policy may release the chunk for a pull of `step` or `aborted`, at
  // most `timeout`.
  void AwaitRelease(const ConsistencyPolicy& policy, int64_t step,
                    const std::atomic<bool>& aborted, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The policy's late workers for a pull of `step` (clocks[w]: whole steps worker w has
  // pushed to the shard), less those the step does not wait for: lost ones and those
  // not counted in step - 1 (elastic PS).
  std::vector<int> LateWorkers(const ConsistencyPolicy& policy, int64_t step,
                               const std::vector<int64_t>& clocks,
                               const std::vector<bool>& lost) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Elastic PS. ----
  // `workers` were lost: they count in no step from now on; a step they already
  // pushed (in part) keeps those pushes. A step that waited only for them completes.
  void Drop(const ConsistencyPolicy& policy, const std::vector<int>& workers)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Under ChunkSetLock: tells the analysis that this chunk's lock is held.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK(mu_) { mu_.AssertHeld(); }
  int64_t VersionLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return clock_.version; }
  // Worker w counts from `step` on (the chunk is at `step` or before). `moving`: w had
  // rejoined at an earlier step and pushed nothing since; it no longer counts in that
  // one (a step that waited only for it completes).
  void RejoinLocked(const ConsistencyPolicy& policy, int w, int64_t step, bool moving)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  friend class ChunkSetLock;
  ShardChunk(int64_t index, Slice range, float* params, int num_workers,
             std::unique_ptr<Ops> ops, bool sums, bool summation);

  // Whether worker u counts in `step`: from_[u] <= step, or it pushed `step` before it
  // was lost.
  bool CountsIn(int u, int64_t step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a summed push of `step` arrived or a worker it waited for was dropped: adds
  // the parked pushes the order reaches and, when `complete`, steps SGD on the mean
  // (a summation server: copies the mean into the chunk's floats).
  // Returns the update's span (empty when none).
  TraceInterval AdvanceSum(int64_t step, bool complete) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets clock_.participants for its current version from from_.
  void CountParticipants() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t index_;
  const Slice range_;
  float* const params_;  // range_.size floats, guarded by mu_.
  const bool summation_;  // params_ holds the last complete step's mean gradient.
  const std::unique_ptr<Ops> ops_;
  mutable absl::Mutex mu_;
  ChunkClock clock_ ABSL_GUARDED_BY(mu_);  // Changed only by the policy (and Start).
  std::optional<Sgd> sgd_ ABSL_GUARDED_BY(mu_);
  std::optional<OrderedSum> sum_ ABSL_GUARDED_BY(mu_);  // When the policy sums.
  // Per worker, the first step whose pushes of this chunk count: kFromStart, a
  // rejoin's step, or kNever while lost.
  std::vector<int64_t> from_ ABSL_GUARDED_BY(mu_);
};

// Holds the locks of `chunks`, taken in index order (the only place the shard holds
// more than one chunk lock: a rejoin must see every chunk at its step or before and
// change them all at once). Clang's analysis cannot follow a set of locks whose size
// is known only at run time: code under a ChunkSetLock names the chunk lock it relies
// on with ShardChunk::AssertHeld.
class ChunkSetLock {
 public:
  explicit ChunkSetLock(const std::vector<std::unique_ptr<ShardChunk>>& chunks);
  ~ChunkSetLock();
  ChunkSetLock(const ChunkSetLock&) = delete;
  ChunkSetLock& operator=(const ChunkSetLock&) = delete;

 private:
  std::vector<std::unique_ptr<absl::MutexLock>> held_;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_SHARD_CHUNK_H_
