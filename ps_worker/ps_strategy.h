// The parameter-server StepStrategy: during backward, each shard's gradient chunks are
// pushed as soon as backward announces them (one sender per shard, all shards in
// parallel); the updated parameter chunks stream back into the model. The optimizer
// runs on the shards, not here -- except against summation servers
// (PsStrategyOptions::summation), which send back the step's mean gradient instead:
// each chunk that comes back is then stepped here, with the same SGD the shards run,
// as forward asks for it.
//
// On a GPU model the shards stay on the CPU and the senders work on two page-locked
// host mirrors of the model's buffers ("staging"): each range backward announces is
// copied to the gradient mirror on the model's stream (CopyToHostAsync) and pushed
// once the event recorded after that copy has completed; updated chunks arrive into the
// parameter mirror and the training thread enqueues their copy to the device the moment
// forward asks for them (or at a settle), ahead of the kernels that read them. See
// "Staging" in ps_strategy.cc for the ordering argument.
#ifndef RINGSIDE_PS_WORKER_PS_STRATEGY_H_
#define RINGSIDE_PS_WORKER_PS_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/model.h"
#include "common/ops.h"
#include "common/ps_placement.h"
#include "common/sgd.h"
#include "common/task_thread.h"
#include "common/trainer.h"
#include "ps_worker/shard_client.h"

namespace ringside {

struct PsStrategyOptions {
  int worker_id = 0;
  int num_workers = 1;
  bool has_momentum = true;            // Whether checkpoints carry a momentum buffer.
  // True: FinishStep returns at once and the next forward waits for each chunk it
  // reads (forward hooks); false: FinishStep waits for every chunk.
  bool params_arrive_late = true;
  // Stage the push-pulls through host mirrors even on the CPU backend (always on
  // another backend): tests run the GPU path's logic on the CPU with it.
  bool stage_through_host = false;
  // Where the shards hold the model's tensors (RunConfig.ps_placement): with a
  // whole-tensor placement the shards' slices are of the PS order
  // (common/ps_placement.h), and the strategy stages through the host mirrors, which
  // then hold the PS order: each announced gradient range is copied to its PS
  // positions, each chunk that comes back to its model positions.
  PsPlacement placement = PsPlacement::kBalanced;
  // The balanced slices' relative sizes, one per shard (PsLayout::ShardWeights; worker
  // summers cut by BytePS's optimum). Empty: equal.
  std::vector<int64_t> shard_weights;
  // Summation servers (RunConfig.ps_mode "summation"): the chunks that come back hold
  // the mean gradient, and the strategy steps SGD with `hyper` on each (staging through
  // the host mirrors: the mean arrives in the parameter mirror and is copied into
  // model->grads(), which backward overwrites next). The optimizer state lives here.
  bool summation = false;
  SgdHyper hyper;
};

// Not thread-safe (the training thread calls it); owns its sender threads (one
// long-lived TaskThread per shard, handed each step's push-pull). The sender threads
// never call `ops`; they only wait for events recorded on it.
class PsStrategy final : public StepStrategy {
 public:
  // `clients`: one registered client per shard, in shard order, covering the model's
  // parameters exactly, each holding the slice options.placement gives it of the
  // model's tensors (FailedPrecondition naming the shard otherwise). `model` and `ops`
  // (the model's backend) are borrowed and must outlive the strategy. Staging
  // (ops->kind() != kCpu, options.stage_through_host, or a placement whose PS order is
  // not the model's, or summation) allocates two host mirrors of num_params floats
  // each. InvalidArgument for bad options.hyper with summation.
  static absl::StatusOr<std::unique_ptr<PsStrategy>> Create(
      std::vector<std::unique_ptr<ShardClient>> clients, Model* model, Ops* ops,
      const PsStrategyOptions& options);
  ~PsStrategy() override;

  std::string role() const override { return "worker"; }
  // Lifecycle start (protocol step 1): worker 0 pushes the optimizer state (if
  // restored) and the parameters the model holds for `step`; then every worker pulls
  // them. Blocks until the shards hold them (and, staging, the device holds them).
  // Elastic PS: a worker that registered again (RegisterResponse.rejoin) pulls the
  // shards' newest step instead (a later one while a shard answers OUT_OF_RANGE) and
  // rejoins the job there (joined_step()); it never pushes parameters.
  absl::Status Start(int64_t step) override;
  int64_t joined_step() const override { return joined_step_; }
  // Lifecycle end: settles, passes a barrier with every worker, then says goodbye to
  // each shard.
  absl::Status Finish() override;
  // Liveness: after a failed run, tells every shard why (ShardClient::Abort, all at
  // once), so that the shards stop at once naming the cause. Blocks at most about
  // 1 s. Call after the last step settled (no push-pull of this worker in flight).
  void ReportFailure(const absl::Status& failure);
  // backward: grads_ready starts this step's push-pulls (on the first call) and
  // releases the range's chunks to them; params_free lets the push-pulls write the
  // range's updated parameters into the model; split_at is every chunk's start, so a
  // chunk goes out while backward computes the chunks below it. forward (with
  // options.params_arrive_late): params_needed blocks until every chunk overlapping
  // the range has come back (or its shard's push-pull failed: then that error), split
  // at the same chunk starts.
  // Staging: backward's hooks are device-ordered (grads_ready enqueues the range's copy
  // to the gradient mirror and records an event; params_free only counts), and
  // params_needed also enqueues the device copy of each chunk that came back.
  StepHooks hooks() override;
  // Waits for every shard's push-pull in flight; the model then holds the next step's
  // parameters (staging: the copies of the chunks not yet on the device are enqueued
  // and waited for).
  absl::Status SettleParams() override;
  // Ends backward's part of the step: starts the push-pulls if no gradient was
  // announced, lets every updated chunk be written, and returns at once (or, without
  // params_arrive_late, once every chunk is back). Records the exposed phases of this
  // step: push_ms (hook_times.backward_us, the hooks during backward), pull_ms (waiting
  // for updated chunks: hook_times.forward_us in this step's forward for the last
  // update, plus any settle; summation: less the SGD steps run meanwhile, booked as
  // update_ms) and the bytes of the push-pulls completed during the step.
  // Trace: the settles as "wait for parameters" on the training track, and each
  // settled push-pull per shard (a lane "push-pull shard S", with its "push" nested;
  // args step, shard, bytes); LocalStep drew backward's hook calls as "push".
  // Staging on a GPU: backward was only enqueued, so FinishStep first waits for the
  // device (backward's kernels and the gradient copies) and books that wait as
  // backward_ms, traced as "backward (device)", as LocalSgdStrategy does; the step thus
  // ends with the device idle (or, without params_arrive_late, with the parameter
  // copies done too, booked in pull_ms).
  absl::Status FinishStep(const HookTimes& hook_times, StepMetrics* m,
                          TraceWriter* trace) override;
  // Sums the counts over all workers through a barrier on shard 0.
  absl::StatusOr<EvalResult> ReduceEval(const EvalResult& local) override;
  // Pulls the shards' momentum (call on the worker that writes checkpoints); with
  // summation servers, this worker's own.
  absl::StatusOr<std::vector<float>> SaveOptimizerState() override;
  // Kept until Start, where worker 0 pushes it to the shards; with summation servers,
  // loaded into this worker's optimizer.
  absl::Status LoadOptimizerState(absl::Span<const float> state) override;
  absl::Status AfterCheckpoint() override;

  const std::vector<std::unique_ptr<ShardClient>>& clients() const { return clients_; }

 private:
  PsStrategy(std::vector<std::unique_ptr<ShardClient>> clients, Model* model, Ops* ops,
             const PsStrategyOptions& options, PsPartition partition);
  void StartPushPull();
  // Staging. The sender's readiness test for chunk k of shard s (also the reader's
  // before it overwrites the chunk's parameter mirror): its gradients were all
  // announced and the event after their copy to the mirror has completed. False when
  // cancelled or when the event reports a device failure (kept in event_error_).
  bool WaitStaged(int s, int64_t k);
  // The senders' pacing, after chunk k of shard s is ready: blocks while another
  // shard's sender is behind this one, by the share of its own chunks pushed (in the
  // order each pushes them; with equal slices, more than one chunk behind), with its
  // next chunk ready too, so that the pushes to every shard go out abreast over the
  // worker's one link instead of one shard's whole slice ahead of the others' (every
  // shard answers a chunk only once each worker pushed it: a shard whose chunks come
  // last answers nobody until then), and slices of other sizes (worker summers,
  // whole-tensor placements) each take their share of the link throughout. A sender
  // waiting for gradients holds nobody back; the ready sender furthest behind never
  // waits. False when cancelled.
  bool WaitTurn(int s, int64_t k);
  // Enqueues the copy of chunk k of shard s from the parameter mirror to the model
  // (summation: to model->grads(), and the SGD step of those parameters with it).
  void CopyChunkToDevice(int s, int64_t k);
  // Enqueues the copies of every chunk that came back and is not on the device yet;
  // how many.
  int64_t CopyArrivedToDevice();
  // The hooks (see hooks()).
  void OnGradientReady(const ParamRange& range);
  void OnParamsFree(const ParamRange& range);
  absl::Status OnParamsNeeded(const ParamRange& range);
  // Every chunk's start and every piece's (partition_), model offsets, ascending.
  std::vector<int64_t> ChunkStarts() const;
  // Calls fn(s, k, lo, hi) for each chunk k of shard s that overlaps `range` (model
  // offsets; [lo, hi) the overlap, PS offsets), the range's pieces in model order and
  // each piece's chunks in ascending order, until fn returns false.
  void ForEachChunkIn(const ParamRange& range,
                      absl::FunctionRef<bool(int, int64_t, int64_t, int64_t)> fn) const;
  // The same over `ps_range` (PS offsets); false once fn returned false.
  bool ForEachChunkInPs(const PsRange& ps_range,
                        absl::FunctionRef<bool(int, int64_t, int64_t, int64_t)> fn) const;
  // Staging, blocking: the whole model's `source` (device) into `ps` (host, PS order),
  // and back.
  absl::Status CopyToPsOrder(const float* source, float* ps);
  absl::Status CopyFromPsOrder(const float* ps, float* target);
  // Subtracts from (*counts)[s][k] the floats of `range` in chunk k of shard s.
  void CountDown(const ParamRange& range, std::vector<std::vector<int64_t>>* counts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks until (*counts)[s][k] is 0: with &remaining_, chunk k of shard s has final
  // gradients; with &busy_, backward no longer reads its parameters. False when
  // cancelled.
  bool WaitForZero(const std::vector<std::vector<int64_t>>* counts, int s, int64_t k);
  void WaitForSenders();
  // Waits for the senders of the step in flight, if any, and records their timings;
  // the first error.
  absl::Status Settle();
  // Draws the settles and the settled calls since the last record.
  void Trace(TraceWriter* trace) const;

  std::vector<std::unique_ptr<ShardClient>> clients_;
  Model* const model_;
  Ops* const ops_;
  const PsStrategyOptions options_;
  const bool staging_;  // The senders work on the host mirrors below.
  // Staging: page-locked host mirrors of model->grads() and model->params(), which the
  // senders push from and pull into; see "Staging" in ps_strategy.cc for who may touch
  // which chunk when.
  HostArray<float> host_grads_;
  HostArray<float> host_params_;
  // Staging, training thread only: on_device_[s][k], the copy of chunk k of shard s from
  // host_params_ to the model has been enqueued since the chunk last came back.
  std::vector<std::vector<bool>> on_device_;
  int64_t step_ = 0;          // The step being trained.
  int64_t barriers_ = 0;      // Names successive barriers.
  int64_t joined_step_ = -1;  // Elastic PS: the step rejoined at (Start), or -1.
  std::vector<float> restored_state_;  // Model order.
  std::optional<Sgd> sgd_;             // Summation servers: the optimizer, model order.
  const PsPartition partition_;        // Where the shards hold the tensors.
  std::vector<Slice> slices_;          // Per shard, PS offsets.

  absl::Mutex mu_;
  // remaining_[s][k]: gradient floats of chunk k of shard s not yet announced.
  std::vector<std::vector<int64_t>> remaining_ ABSL_GUARDED_BY(mu_);
  // busy_[s][k]: parameter floats of chunk k of shard s that backward may still read
  // (an updated chunk that comes back early waits for them).
  std::vector<std::vector<int64_t>> busy_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  // Staging: grad_events_[s][k], the event after the copy of chunk k's last announced
  // piece to host_grads_ (events of one stream complete in order, so it covers every
  // earlier piece too); null before the first. event_error_: the first failure an
  // event reported to a sender.
  std::vector<std::vector<std::shared_ptr<OpsEvent>>> grad_events_ ABSL_GUARDED_BY(mu_);
  absl::Status event_error_ ABSL_GUARDED_BY(mu_);
  // arrived_[s][k]: chunk k of shard s is back in the model; sender_done_[s]: shard s's
  // push-pull returned (all back, or failed).
  std::vector<std::vector<bool>> arrived_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> sender_done_ ABSL_GUARDED_BY(mu_);
  // granted_[s]: chunks shard s's sender has been let push this step (WaitTurn).
  std::vector<int64_t> granted_ ABSL_GUARDED_BY(mu_);
  // The shards whose push-pull failed, in the order the failures ended their calls:
  // Settle reports the first (the cause; a later one is often its consequence).
  std::vector<int> failure_order_ ABSL_GUARDED_BY(mu_);

  bool started_ = false;       // Senders of this step are running.
  bool in_flight_ = false;     // Senders started and not yet settled.
  int64_t settle_us_ = 0;      // Time spent in SettleParams since the last record.
  int64_t sgd_us_ = 0;         // Summation: time in SGD steps since the last record.
  int64_t settled_sent_ = 0;   // Bytes of the push-pulls settled since the last record.
  int64_t settled_received_ = 0;
  absl::Status deferred_;      // A settled failure, for the next FinishStep.
  int64_t call_start_us_ = 0;  // When this step's push-pulls started.
  int64_t call_step_ = 0;      // The step they push.
  struct CallSpan {
    int64_t step, start_us;               // The step pushed; when the calls started.
    std::vector<PushPullTiming> shards;  // Per shard.
  };
  std::vector<CallSpan> spans_;  // Settled calls not yet traced.
  // (start, end) of the SettleParams calls since the last record that waited.
  std::vector<std::pair<int64_t, int64_t>> settles_;
  std::vector<std::unique_ptr<TaskThread>> senders_;  // Per shard.
  std::vector<absl::Status> results_;
  std::vector<PushPullTiming> timings_;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_WORKER_PS_STRATEGY_H_
