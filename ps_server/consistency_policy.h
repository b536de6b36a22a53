// The consistency model of a parameter-server job, BSP, SSP(K) or ASP, as one unit:
// what a gradient push does to a chunk, when a pull of a step's parameters may be
// served, and who is late when a pull waits too long. The Shard owns the state (the
// workers' clocks, each chunk's ChunkClock, the locks) and asks the policy every
// question whose answer depends on the mode; it never looks at the mode itself.
//
//          push of step s (chunk k)          pull of step s's parameters (chunk k)
//   BSP    sum into the accumulator; the     once chunk k took step s - 1's update
//          N-th push steps SGD on the sum    (every worker pushed chunk k of s - 1)
//   SSP(K) step SGD at once with N x the     once every worker pushed s - K whole
//          gradient (the 1/N is undone)      steps to the shard
//   ASP    as SSP                            at once
//
// Workers scale their loss by 1/N (the mean over the global batch, see Trainer), so
// BSP's sum is the global batch's mean gradient; SSP and ASP undo the 1/N and step
// with each worker's own batch-mean gradient (Downpour).
//
// Determinism. BSP is deterministic at any N: the shard adds a step's pushes of a
// chunk in worker-id order, g_0 + g_1 + ... + g_{N-1} left to right, whatever the order
// they arrive in (Shard parks an early push until the lower ids are in), so a run and
// its repeat, or a resumed run, end with bit-identical parameters. SSP and ASP are
// not, for N >= 2, and cannot be without giving up what they are for: each push is
// applied on arrival to whatever the parameters are then, and a worker computes on
// whatever parameters it pulled, so the arrival order (the OS scheduler, the network)
// changes the trajectory itself, not only float rounding. What does hold under SSP and
// ASP: each single push is applied exactly (element-wise SGD on one worker's gradient,
// no sum), N = 1 is deterministic, and SSP(K) bounds how far the orders can drift.
#ifndef RINGSIDE_PS_SERVER_CONSISTENCY_POLICY_H_
#define RINGSIDE_PS_SERVER_CONSISTENCY_POLICY_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace ringside {

enum class SyncMode { kBsp, kSsp, kAsp };

// A parsed --ps_sync: the value that options carry and tests compare.
struct SyncPolicy {
  SyncMode mode = SyncMode::kBsp;
  int staleness = 0;  // SSP bound K: no worker starts step s before all pushed s - K.
};

// "bsp", "ssp:K" (K >= 0) or "asp". InvalidArgument otherwise.
absl::StatusOr<SyncPolicy> ParseSyncPolicy(const std::string& text);
std::string SyncModeName(SyncMode mode);         // "bsp", "ssp", "asp".
std::string SyncPolicyText(const SyncPolicy& p);  // What ParseSyncPolicy reads back.

// The consistency state of one chunk of a shard's slice. The shard keeps one per
// chunk, guarded by the chunk's lock, and changes it only through the policy.
struct ChunkClock {
  ChunkClock(int num_workers, int64_t start_step)
      : version(start_step), participants(num_workers), pushed(num_workers, -1) {}
  // The step the chunk's parameters belong to: the start step plus the updates a
  // BSP policy completed (SSP and ASP leave it at the start step).
  int64_t version;
  // BSP: workers whose gradient of step `version` is in the accumulator.
  int summed = 0;
  // BSP: pushes that complete step `version`: num_workers, unless an elastic shard
  // (--ps_min_workers) goes on without lost workers (the shard keeps it up to date).
  int participants;
  // Per worker: the last step whose gradient of this chunk it pushed (-1: none).
  std::vector<int64_t> pushed;
};

// What the shard does with one worker's gradient of one chunk.
struct PushAction {
  // false: step SGD on the chunk at once with the gradient times `scale`.
  // true: add the gradient into the chunk's accumulator, then, when `complete`, step
  // SGD on the chunk with the accumulator. `first`: the first push of the step to
  // arrive (the shard sums in worker-id order, not arrival order, and does not use it).
  bool sum = false;
  float scale = 1.0f;
  bool first = false;
  bool complete = false;
};

// The answer about one chunk to a pull of a step's parameters.
enum class ChunkRelease {
  kNow,    // Serve it.
  kWait,   // Not yet: an update the step needs is still missing.
  kStale,  // Never: the chunk is past that step (a caller bug or a lost worker).
};

// Immutable after Create; every method is const and may be called from any thread.
// The state passed in (clocks, ChunkClock) is the caller's, under the caller's locks.
class ConsistencyPolicy {
 public:
  // No requirement on the workers' clocks (StepsNeeded).
  static constexpr int64_t kNoNeed = std::numeric_limits<int64_t>::min();

  // The policy of `sync` for `num_workers` (>= 1) workers.
  static std::unique_ptr<ConsistencyPolicy> Create(const SyncPolicy& sync, int num_workers);
  virtual ~ConsistencyPolicy() = default;

  const SyncPolicy& sync() const { return sync_; }
  int num_workers() const { return num_workers_; }

  // ---- Push. ----
  // Whether pushes are summed (the shard then keeps an accumulator over its slice).
  virtual bool sums_pushes() const = 0;
  // Worker `worker` pushes its gradient of `step` for chunk `chunk`, whose state is
  // `clock`. FailedPrecondition, with `clock` unchanged, for a chunk pushed twice in a
  // step or (BSP) a step the chunk is not at. Otherwise records the push in `clock`
  // (the update it completes included) and says what to do with the gradient. The
  // caller checked that `step` is the worker's current step.
  absl::StatusOr<PushAction> OnPush(int worker, int64_t step, int64_t chunk,
                                    ChunkClock* clock) const;
  // Elastic PS: the shard lowered clock->participants (a worker that had not pushed
  // step `version` was lost). Returns true, and moves the clock to the next step, when
  // the pushes already summed now complete the step (the shard then steps SGD on the
  // accumulator). BSP only; the others never sum.
  virtual bool CompleteIfDue(ChunkClock* clock) const { return false; }

  // ---- Pull: a worker about to run `step` asks for a chunk of the parameters. ----
  // It is served once (1) every worker has pushed at least StepsNeeded(step) whole
  // steps to the shard (kNoNeed: no such bound) and (2) ReleaseOf(chunk's clock, step)
  // says kNow. (1) reads the shard's clocks, (2) one chunk's: two locks.
  virtual int64_t StepsNeeded(int64_t step) const = 0;
  virtual ChunkRelease ReleaseOf(const ChunkClock& clock, int64_t step) const = 0;
  // Whether a reply may borrow the shard's parameter memory rather than copy it: true
  // when the chunk cannot change before every worker has received it (BSP: its next
  // update needs every worker's next push, which needs this reply).
  virtual bool replies_borrow() const = 0;

  // ---- Who is late. ----
  // The workers a pull of `step` (for the chunk at `clock`) waits for, ascending.
  // clocks[w]: whole steps worker w has pushed to the shard.
  virtual std::vector<int> LateWorkers(int64_t step, absl::Span<const int64_t> clocks,
                                       const ChunkClock& clock) const = 0;
  // The reason a job is aborted when worker `worker`'s pull of `step` waited `waited`
  // for the `late` workers, e.g. "worker(s) 1 did not push step 4 within 5s".
  virtual std::string LateReason(int worker, int64_t step, absl::Span<const int> late,
                                 absl::Duration waited) const;

 protected:
  ConsistencyPolicy(const SyncPolicy& sync, int num_workers)
      : sync_(sync), num_workers_(num_workers) {}
  // OnPush after the duplicate check.
  virtual absl::StatusOr<PushAction> Push(int worker, int64_t step, int64_t chunk,
                                          ChunkClock* clock) const = 0;

 private:
  const SyncPolicy sync_;
  const int num_workers_;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_CONSISTENCY_POLICY_H_
