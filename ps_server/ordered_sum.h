// The sum of one chunk's gradient pushes of a step in a fixed order: g_0 + g_1 + ...
// + g_{N-1}, added left to right in worker-id order whatever the order the pushes
// arrive in, so that a BSP step is the same float sequence every run (see
// consistency_policy.h, "Determinism"). A push whose turn has not come (a lower id that
// counts is missing) is parked, copied aside, and added when the gap closes.
//
// Elastic PS: the order skips the workers that do not count in the step (the caller
// says which, see Advance); a rejoined worker whose turn had passed when it began to
// count is added on arrival (that one step's sum is not in id order).
//
// Thread-safety: not thread-safe; the chunk that owns it (ShardChunk) guards it with
// its lock.
#ifndef RINGSIDE_PS_SERVER_ORDERED_SUM_H_
#define RINGSIDE_PS_SERVER_ORDERED_SUM_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "common/ops.h"

namespace ringside {

class OrderedSum {
 public:
  // One block of a push: `len` floats at `at` of the chunk, in a scratch buffer that
  // the callee may change.
  using Block = absl::FunctionRef<void(int64_t at, float* block, int64_t len)>;
  // Calls its argument for each block of one push, front to back.
  using Blocks = absl::FunctionRef<void(Block)>;
  // Whether worker u counts in the step being summed.
  using Counts = absl::FunctionRef<bool(int u)>;

  // Sums of `size` floats over the pushes of `num_workers` workers; `ops` (borrowed,
  // outlives the sum) does the arithmetic.
  OrderedSum(int num_workers, int64_t size, Ops* ops);

  // Worker w's push of the step, read once through `blocks`: added at once when its
  // turn has come (or passed), else parked (copied; the slot is allocated at w's first
  // early arrival and kept). Call Advance first, so that the turn is up to date.
  void Add(int w, Blocks blocks);
  // Adds the parked pushes the order reaches, skipping the workers that do not count
  // and have not pushed; stops at the first worker that counts and has not pushed.
  void Advance(Counts counts);
  // Whether every worker that counts is in (the order reached the end).
  bool complete() const { return next_ == num_workers_; }
  // Pushes of the step added or parked.
  int contributors() const { return contributors_; }
  // The step is complete (checked): scales the sum to the mean over its contributors
  // (workers scale by 1/num_workers, so fewer contributors multiply by num_workers /
  // contributors) and returns it. The next Add begins the next step's sum; the
  // returned floats are valid until then.
  float* TakeMean();

 private:
  const int num_workers_;
  const int64_t size_;
  Ops* const ops_;
  std::vector<float> acc_;   // g_0 + ... + g_{next_ - 1} of the step.
  int next_ = 0;             // The next worker in the order.
  bool summed_any_ = false;  // acc_ holds a push of the step.
  int contributors_ = 0;
  std::vector<bool> has_parked_;
  std::vector<std::vector<float>> parked_;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_ORDERED_SUM_H_
