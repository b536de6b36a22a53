// The teaching bug switches (common/bugs.h; RunConfig.bugs, `ringside train --bug`) as
// a process-group decorator, the way PyTorch c10d's ProcessGroupWrapper wraps a group to
// check its collectives: BugCheckGroup implements ProcessGroup, forwards every
// collective to the group it wraps, and injects or checks what the bugs need. The DDP
// worker builds it only when a bug is on, puts the Reducer over it and lets the trainer
// drive the Reducer through AroundSteps (the checks that need the step and epoch).
//
// Injection:
//  - no_broadcast: a Broadcast of the model's parameters (the Reducer's Start) completes
//    at once without communicating, so ranks that initialised differently stay apart.
// Checks (their own collectives run on the wrapped group, in the same order on every
// rank; rank 0 prints the symptom lines to stderr):
//  - after every step, the ranks all-gather a fingerprint of their parameters; at the
//    first step where a rank's differs from rank 0's, rank 0 says so (naming the cause
//    with no_broadcast) with the farthest replica's L2 distance, and training goes on;
//    at each later epoch's end rank 0 prints that distance again (it does not shrink);
//  - at each epoch's end (ReduceEval), the ranks all-reduce how often each training
//    sample was visited in that epoch and rank 0 prints the summary (the symptom of
//    rank_seeds: samples seen twice and never). Skipped with uneven_shards;
//  - uneven_shards: rank 0 first says how many steps an epoch has on each rank; at each
//    epoch's end a rank publishes in the job's store that it ran out of data, and waits
//    there for the others; a rank whose step's all-reduce fails reads those keys and
//    names the rank it waited for.
#ifndef RINGSIDE_DDP_RING_BUG_CHECK_GROUP_H_
#define RINGSIDE_DDP_RING_BUG_CHECK_GROUP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/common.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/store.h"

namespace ringside {

// Not thread-safe: the training thread issues the collectives and drives the steps
// (process_group.h's thread-compatibility). Borrows the wrapped group, the model, the
// ops, the job's store and the configuration; all must outlive it.
class BugCheckGroup final : public ProcessGroup {
 public:
  struct Options {
    const RunConfig* config = nullptr;  // bugs, seed, drop_last, batch, grad_accum, epochs.
    int64_t train_size = 0;             // Training samples.
    absl::Duration timeout;             // The wrapped group's, per collective.
  };

  // Allocates the fingerprint buffers and this rank's training shard (as the
  // trainer's). Prints nothing. The rank and world size are the wrapped group's.
  static absl::StatusOr<std::unique_ptr<BugCheckGroup>> Create(ProcessGroup* inner,
                                                               Model* model, Ops* ops,
                                                               Store* job,
                                                               const Options& options);

  // The strategy the trainer drives: forwards every call to `inner` (the Reducer over
  // this group; borrowed) and runs the step and epoch checks around its FinishStep and
  // ReduceEval. Rank 0 prints the uneven_shards description here. The returned
  // strategy borrows this group. Call once.
  std::unique_ptr<StepStrategy> AroundSteps(StepStrategy* inner);

  // ProcessGroup: forwarded to the wrapped group (the same Work, so byte counts and
  // timings are the wrapped group's), except the injected Broadcast above.
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string backend() const override { return inner_->backend(); }
  std::shared_ptr<Work> AllReduce(float* data, int64_t n, ReduceOp op) override {
    return inner_->AllReduce(data, n, op);
  }
  std::shared_ptr<Work> AllReduceOnWire(float* data, int64_t n, ReduceOp op, WireFormat format) override {
    return inner_->AllReduceOnWire(data, n, op, format);
  }
  std::shared_ptr<Work> Broadcast(float* data, int64_t n, int root) override;
  std::shared_ptr<Work> AllGather(const float* in, int64_t n, float* out) override {
    return inner_->AllGather(in, n, out);
  }
  std::shared_ptr<Work> ReduceScatter(const float* in, float* out, int64_t n,
                                      ReduceOp op) override {
    return inner_->ReduceScatter(in, out, n, op);
  }
  std::shared_ptr<Work> Reduce(float* data, int64_t n, ReduceOp op, int root) override {
    return inner_->Reduce(data, n, op, root);
  }
  std::shared_ptr<Work> Scatter(const float* in, float* out, int64_t n, int root) override {
    return inner_->Scatter(in, out, n, root);
  }
  std::shared_ptr<Work> Gather(const float* in, int64_t n, float* out, int root) override {
    return inner_->Gather(in, n, out, root);
  }
  std::shared_ptr<Work> AllToAll(const float* in, float* out, int64_t n) override {
    return inner_->AllToAll(in, out, n);
  }
  std::shared_ptr<Work> Barrier() override { return inner_->Barrier(); }
  absl::Status OrderAfter(Ops* ops) override { return inner_->OrderAfter(ops); }
  bool emulated() const override { return inner_->emulated(); }
  CollectiveBytes total_bytes() const override { return inner_->total_bytes(); }

 private:
  class Steps;  // AroundSteps' strategy.

  BugCheckGroup(ProcessGroup* inner, Model* model, Ops* ops, Store* job, const Options& o);

  // Rank 0, at start (uneven_shards): how many steps an epoch has on each rank.
  void DescribeUnevenShards() const;
  // After step `step` (of `epoch`): counts the epoch's steps, then CheckReplicas.
  absl::Status AfterStep(int64_t step, int epoch);
  // After step `step`: rank 0 reports the first step at which the replicas differ,
  // with their distance.
  absl::Status CheckReplicas(int64_t step);
  // The L2 distance of each rank's parameters from rank 0's (a broadcast of rank 0's
  // into a scratch array and an all-gather of the distances): the farthest rank and
  // its distance, the same on every rank. Collective: every rank calls it alike.
  struct ReplicaDistance {
    int rank = -1;
    double distance = 0;
  };
  absl::StatusOr<ReplicaDistance> FarthestReplica();
  // At an epoch's end once the replicas differ: rank 0 prints their distance now and
  // when they first differed (the symptom of no_broadcast: it does not shrink).
  absl::Status ReportReplicasApart();
  // At an epoch's end: every rank's visits of each training sample, summed, and rank 0
  // prints the summary.
  absl::Status CheckVisits();
  // uneven_shards, before the epoch end's collectives: this rank says how far it got
  // and waits for the others there (up to 2 x timeout + 10 s).
  absl::Status WaitForEveryRankAtEpochEnd();
  // uneven_shards: a step's collective failed after `waited_s`; names the ranks that
  // ran out of data before this step, if any did (else `s` as it is).
  absl::Status NameRanksOutOfData(const absl::Status& s, double waited_s);
  std::string EpochEndKey(int rank) const;

  ProcessGroup* const inner_;
  Model* const model_;
  Ops* const ops_;
  Store* const job_;
  const Options o_;
  const bool uneven_;
  const int64_t step_size_;           // Samples per optimizer step.
  std::unique_ptr<Sharder> shard_;    // This rank's training shard, as the trainer's.
  int64_t per_epoch_ = 0;             // Steps per epoch on this rank.
  DeviceArray<float> print_in_;       // [kPrint] this rank's fingerprint.
  DeviceArray<float> print_all_;      // [kPrint * world] every rank's.
  DeviceArray<float> visits_;         // [train_size], allocated at the first epoch end.
  DeviceArray<float> rank0_params_;   // [num_params] rank 0's, once the replicas differ.
  bool diverged_ = false;
  int64_t diverged_at_ = -1;          // The step the replicas first differed at,
  double first_distance_ = 0;         // and the farthest one's distance then.
  int epoch_ = -1;                    // Epoch of the last step, and its steps in this process.
  int64_t epoch_steps_ = 0;
  int64_t last_step_ = -1;
  int epoch_ends_ = 0;                // Epoch ends passed (uneven_shards' keys).
};

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_BUG_CHECK_GROUP_H_
