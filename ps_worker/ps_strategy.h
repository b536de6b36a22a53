// The parameter-server StepStrategy: during backward, each shard's gradient chunks are
// pushed as soon as backward announces them (one sender per shard, all shards in
// parallel); the updated parameter chunks stream back into the model. The optimizer
// runs on the shards, not here.
#ifndef RINGSIDE_PS_WORKER_PS_STRATEGY_H_
#define RINGSIDE_PS_WORKER_PS_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/model.h"
#include "common/task_thread.h"
#include "common/trainer.h"
#include "ps_worker/shard_client.h"

namespace ringside {

struct PsStrategyOptions {
  int worker_id = 0;
  int num_workers = 1;
  bool has_momentum = true;            // Whether checkpoints carry a momentum buffer.
  absl::Duration step_delay;           // Test hook: a deliberately slow worker.
  int64_t crash_at_step = -1;          // Test hook: _exit(3) when this step starts.
};

// Not thread-safe (the training thread calls it); owns its sender threads (one
// long-lived TaskThread per shard, handed each step's push-pull).
class PsStrategy final : public StepStrategy {
 public:
  // `clients`: one registered client per shard, in shard order, covering the model's
  // parameters exactly. `model` is borrowed and must outlive the strategy.
  static absl::StatusOr<std::unique_ptr<PsStrategy>> Create(
      std::vector<std::unique_ptr<ShardClient>> clients, Model* model,
      const PsStrategyOptions& options);
  ~PsStrategy() override;

  std::string role() const override { return "worker"; }
  // Starts this step's push-pulls (on the first call) and releases the range's chunks
  // to them.
  void OnGradientReady(const ParamRange& range) override;
  // Lets the push-pulls write the range's updated parameters into the model.
  void OnParamsFree(const ParamRange& range) override;
  // Every chunk's start: backward then announces a chunk as soon as its own rows are
  // computed, so it goes out while backward computes the chunks below it.
  std::vector<int64_t> SplitAt() const override;
  // Waits for every shard's push-pull of this step; the model holds the next step's
  // parameters afterwards.
  absl::Status FinishStep(Model* model, StepMetrics* m, TraceWriter* trace) override;
  // Sums the counts over all workers through a barrier on shard 0.
  absl::StatusOr<EvalResult> ReduceEval(const EvalResult& local) override;
  // Pulls the shards' momentum (call on the worker that writes checkpoints).
  absl::StatusOr<std::vector<float>> SaveOptimizerState() override;
  // Kept until Start, where worker 0 pushes it to the shards.
  absl::Status LoadOptimizerState(absl::Span<const float> state) override;
  absl::Status AfterCheckpoint() override;

  // Protocol start: worker 0 pushes the optimizer state (if restored) and the
  // parameters the model holds for `step`; then every worker pulls them.
  absl::Status Start(int64_t step);
  // Protocol end: a barrier with every worker, then goodbye to each shard.
  absl::Status Finish();

  const std::vector<std::unique_ptr<ShardClient>>& clients() const { return clients_; }

 private:
  PsStrategy(std::vector<std::unique_ptr<ShardClient>> clients, Model* model,
             const PsStrategyOptions& options);
  void StartPushPull();
  // Subtracts from (*counts)[s][k] the floats of `range` in chunk k of shard s.
  void CountDown(const ParamRange& range, std::vector<std::vector<int64_t>>* counts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks until (*counts)[s][k] is 0: with &remaining_, chunk k of shard s has final
  // gradients; with &busy_, backward no longer reads its parameters. False when
  // cancelled.
  bool WaitForZero(const std::vector<std::vector<int64_t>>* counts, int s, int64_t k);
  void WaitForSenders();

  std::vector<std::unique_ptr<ShardClient>> clients_;
  Model* const model_;
  const PsStrategyOptions options_;
  int64_t step_ = 0;          // The step being trained.
  int64_t barriers_ = 0;      // Names successive barriers.
  std::vector<float> restored_state_;
  std::vector<Slice> slices_;  // Per shard.

  absl::Mutex mu_;
  // remaining_[s][k]: gradient floats of chunk k of shard s not yet announced.
  std::vector<std::vector<int64_t>> remaining_ ABSL_GUARDED_BY(mu_);
  // busy_[s][k]: parameter floats of chunk k of shard s that backward may still read
  // (an updated chunk that comes back early waits for them).
  std::vector<std::vector<int64_t>> busy_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;

  bool started_ = false;       // Senders of this step are running.
  int64_t hook_us_ = 0;        // Time spent in the backward hooks this step.
  std::vector<std::unique_ptr<TaskThread>> senders_;  // Per shard.
  std::vector<absl::Status> results_;
  std::vector<PushPullTiming> timings_;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_WORKER_PS_STRATEGY_H_
