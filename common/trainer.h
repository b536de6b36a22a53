// The training loop, written once. It walks epochs and batches of this rank's shard,
// runs the LocalStep, hands the gradients to a StepStrategy (single: local SGD; PS:
// push-pull; DDP: bucketed all-reduce), evaluates, writes metrics, traces and
// checkpoints, prints progress, and resumes from a checkpoint.
#ifndef RINGSIDE_COMMON_TRAINER_H_
#define RINGSIDE_COMMON_TRAINER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/checkpoint.h"
#include "common/dataset.h"
#include "common/local_step.h"
#include "common/metrics.h"
#include "common/model.h"
#include "common/ops.h"
#include "common/output_files.h"
#include "common/ringside.pb.h"
#include "common/run_config.h"
#include "common/sgd.h"
#include "common/sharder.h"
#include "common/trace.h"

namespace ringside {

// A step's forward and backward run by the strategy instead of the trainer's own
// LocalStep (DataParallel: one process, several replicas on threads; see
// data_parallel.h). Not thread-safe: called on the training thread only.
class StepCompute {
 public:
  virtual ~StepCompute() = default;
  // Forward and backward of one step's `samples` (non-empty): afterwards the trained
  // model's grads() hold (added to what they held, as StepHooks::accumulate_gradients
  // says) the gradients of loss_scale * (sum of the samples' losses). Fills m's data,
  // forward and backward times, loss (mean over `samples`), samples and correct, and
  // whatever phases of its own it times; spans to `trace` (may be nullptr). Blocks.
  virtual absl::Status Run(absl::Span<const int64_t> samples, float loss_scale,
                           StepMetrics* m, TraceWriter* trace) = 0;
};

// What a strategy does with a job, driven by Trainer::Run on the training thread:
//
//   Start(step)                       every process joins; parameters agree
//   per step: forward and backward with hooks(), then FinishStep
//   between steps: SettleParams, ReduceEval (epoch ends), AfterCheckpoint
//   Finish()                          every process done; say goodbye
//
// Trainer::Create calls LoadOptimizerState when resuming, before Start.
class StepStrategy {
 public:
  virtual ~StepStrategy() = default;

  // Role written into metric records ("single", "worker", "rank").
  virtual std::string role() const = 0;

  // Lifecycle. Start is called once the model holds the parameters of `step` (the
  // seed's or the checkpoint's) and before the first step; afterwards every process
  // must hold the job's parameters for `step` (e.g. rank 0's, or the shards'). Finish
  // is called after the last checkpoint; it blocks until every process is done.
  virtual absl::Status Start(int64_t step) { return absl::OkStatus(); }
  virtual absl::Status Finish() { return absl::OkStatus(); }
  // After Start: the step this process joined the job at when it is later than
  // Start's (elastic PS: a worker that rejoins a running job starts at the shards'
  // step, and Trainer::Run moves its position there); -1 otherwise.
  virtual int64_t joined_step() const { return -1; }

  // The step's forward and backward when the strategy runs them itself (borrowed; it
  // lives as long as the strategy); nullptr (the default) for the trainer's LocalStep
  // with hooks(). With its own compute a strategy gets no micro-batches (grad_accum 1)
  // and no prefetch.
  virtual StepCompute* compute() { return nullptr; }

  // The hooks LocalStep passes to forward and backward. Called once by Run, before
  // Start; the hooks stay valid as long as the strategy.
  virtual StepHooks hooks() = 0;
  // After backward: brings model->params() up to date for the next step (or, with
  // forward hooks, starts to). Books `hook_times` and its own communication, wait and
  // update times and byte counts into `m`, and spans into `trace` (may be nullptr).
  virtual absl::Status FinishStep(const HookTimes& hook_times, StepMetrics* m,
                                  TraceWriter* trace) = 0;
  // Blocks until every parameter is in place; the transfer's error, if any. The
  // trainer calls it before evaluating, checkpointing and returning.
  virtual absl::Status SettleParams() { return absl::OkStatus(); }

  // Combines evaluation counts over all workers (identity for one process): every
  // field of EvalResult summed. Every worker calls it at the same point (epoch ends
  // and the run's end); it blocks until all have.
  virtual absl::StatusOr<EvalResult> ReduceEval(const EvalResult& local) { return local; }
  // Optimizer state to checkpoint, and its restore.
  virtual absl::StatusOr<std::vector<float>> SaveOptimizerState() = 0;
  virtual absl::Status LoadOptimizerState(absl::Span<const float> state) = 0;
  // Called on every rank after rank 0 wrote a checkpoint; distributed strategies hold
  // everyone here until it is on disk. Blocks.
  virtual absl::Status AfterCheckpoint() { return absl::OkStatus(); }
};

// The single-process strategy. Each layer's SGD step runs the moment backward
// announces its gradients (optimizer-in-backward): the gradient was just written and
// is still in cache, and backward no longer reads that layer's parameters. Without
// Nesterov the momentum state lives in model->grads() (Sgd::CreateInGradients):
// backward adds each gradient onto it, and the update reads and writes two buffers
// instead of three.
class LocalSgdStrategy final : public StepStrategy {
 public:
  // InvalidArgument for bad hyper-parameters (see Sgd::Create).
  // Steps `model`'s parameters (borrowed; must outlive the strategy).
  static absl::StatusOr<std::unique_ptr<LocalSgdStrategy>> Create(const SgdHyper& hyper,
                                                                   Model* model, Ops* ops);
  std::string role() const override { return "single"; }
  // Steps each range from params_free (the update needs backward to be done with its
  // parameters). Backward adds into model->grads(), which hold the momentum state
  // between steps (or, with Nesterov, zeros: the update consumes them). Create
  // overwrites them.
  StepHooks hooks() override;
  // Steps what backward did not announce; update_ms is the hooks' time plus that.
  // Numerical safety: every update pass also checks the parameters it writes (per
  // layer); a non-finite one is a NonFiniteError naming the layer, after the device is
  // done. A step skipped for a non-finite loss (m->skipped_nonfinite(), no backward:
  // NonFiniteLossSkip::kSkipBackward) changes nothing.
  absl::Status FinishStep(const HookTimes& hook_times, StepMetrics* m,
                          TraceWriter* trace) override;
  absl::StatusOr<std::vector<float>> SaveOptimizerState() override { return sgd_.SaveState(); }
  absl::Status LoadOptimizerState(absl::Span<const float> state) override {
    return sgd_.LoadState(state);
  }

 private:
  LocalSgdStrategy(Sgd sgd, Model* model, Ops* ops)
      : sgd_(std::move(sgd)), model_(model), ops_(ops) {}
  // One optimizer step of `range` (params_free).
  void Step(const ParamRange& range);

  Sgd sgd_;
  Model* const model_;
  Ops* const ops_;
  int64_t stepped_ = 0;  // Parameters stepped during this step's backward.
  // Numerical safety: one flag (SgdHyper::nonfinite) per entry of
  // model->layer_ranges(), and a last one for a range spanning layers; zeroed at the
  // step's first update.
  DeviceArray<float> nonfinite_;
};

struct TrainerOptions {
  RunConfig config;             // model, epochs, max_steps, batch, seed, drop_last, ...
  int rank = 0;
  int world_size = 1;
  std::string out_dir;          // Created if missing. Empty: write nothing.
  bool resume = false;          // Continue from the newest intact checkpoint in out_dir.
  int64_t checkpoint_every = 0; // Also checkpoint every N steps (0: epoch ends only).
  bool write_checkpoints = true;  // Rank 0 of a job writes; the others read.
  int keep_checkpoints = kDefaultKeepCheckpoints;  // >= 1: the newest and older ones.
  int eval_batch = kDefaultEvalBatch;
  FILE* progress = stderr;      // Progress lines; nullptr for silence.
  bool emulated = false;        // Stamped on every record (StepMetrics.emulated).
  double progress_interval_s = 2.0;
};

struct TrainResult {
  int64_t steps = 0;            // Global steps completed (including resumed ones).
  int64_t steps_this_run = 0;
  double seconds = 0;           // Wall time of this run's training steps.
  double samples_per_sec = 0;   // This process's training throughput.
  double job_samples_per_sec = 0;  // All processes together (world_size x this one's).
  double last_loss = 0;         // Mean training loss of the last step.
  double test_loss = 0;
  double test_accuracy = 0;
};

// Files under TrainerOptions::out_dir: the checkpoints (kCheckpointFile and the kept
// older ones, checkpoint.h), and (output_files.h) the metrics and trace of this
// process, per rank when world_size > 1.

// Not thread-safe. Borrows everything it is given; all must outlive it.
class Trainer {
 public:
  // Validates options, opens the outputs and, when resuming, restores parameters,
  // optimizer state and the position in the data from the checkpoint (which must
  // belong to the same model). Otherwise initialises parameters from the seed.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const TrainerOptions& options,
                                                         Model* model, Ops* ops,
                                                         const DatasetSplits* data,
                                                         StepStrategy* strategy);

  // Starts the strategy at step(), trains until config.epochs are done or
  // config.max_steps steps have run, evaluates on the test set (exact sharding), writes
  // the final checkpoint and finishes the strategy (see StepStrategy). Call once.
  absl::StatusOr<TrainResult> Run();

  // Saves the checkpoint now (rank 0 with write_checkpoints writes it), then calls
  // the strategy's AfterCheckpoint on every rank.
  absl::Status SaveCheckpoint();

  // Steps completed so far (after a resume: the checkpoint's).
  int64_t step() const { return step_; }

 private:
  Trainer(const TrainerOptions& options, Model* model, Ops* ops, const DatasetSplits* data,
          StepStrategy* strategy, Sharder train_shard, Sharder test_shard);
  // Trainer::Run's plan and running totals, shared by its epochs and steps.
  struct RunState {
    int64_t step_size = 0;    // Samples per optimizer step (batch x grad_accum).
    int64_t per_epoch = 0;    // Steps per epoch of this rank's shard.
    int64_t steps_total = 0;  // The step the run ends at (epochs, or max_steps).
    StepHooks hooks;          // The strategy's, with the nan_policy set.
    int64_t start_us = 0;     // When the first step of this run started.
    int64_t samples = 0;      // Samples this run trained on.
    int64_t steps_run = 0;    // Steps this run completed.
    double last_loss = 0;     // Mean training loss of the last step.
    // This rank's training loss over the steps of the current epoch that this run
    // completed (skipped non-finite steps left out), weighted by their samples; reset
    // at each epoch's end.
    double epoch_loss_sum = 0;
    int64_t epoch_samples = 0;
    StepMetrics m;            // The last step's record.
  };

  absl::Status Restore();
  // Creates out_dir and opens the metrics (continued from step_ when resuming) and a
  // new trace file; nothing without an out_dir.
  absl::Status OpenOutputs();
  // The rest of epoch_ from batch_in_epoch_: rank 0's order line with a teaching bug
  // on, then RunStep until the epoch or steps_total ends. Leaves batch_in_epoch_ at
  // per_epoch when the epoch is complete.
  absl::Status RunEpoch(RunState* run);
  // One step at (epoch_, batch_in_epoch_) of `order` (the epoch's sample order):
  // forward and backward, the strategy's FinishStep, the metrics record and progress;
  // advances step_ and the totals; saves the every-N-steps checkpoint. A non-finite
  // value ends it with StopNonFinite's line (nothing written for the step); another
  // error from FinishStep is annotated "step N".
  absl::Status RunStep(const std::vector<int64_t>& order, RunState* run);
  // Epoch finished: moves the position to the next epoch's start, evaluates, prints
  // the epoch line, checks the parameters and saves the checkpoint.
  absl::StatusOr<EvalResult> EndEpoch(RunState* run);
  // The stop path of --nan_policy: one line naming the step, the process and the
  // range. Nothing more runs (no metrics record, no checkpoint), so the last
  // checkpoint on disk is the last good one.
  absl::Status StopNonFinite(const absl::Status& s) const;
  // Before each checkpoint, the writer (rank 0 with write_checkpoints and an out_dir)
  // settles and checks the parameters it is about to write; OK elsewhere.
  absl::Status CheckParamsBeforeCheckpoint();
  // Forward and backward of one step's `samples` in micro-batches of config.batch
  // (only the last announces through hooks.backward); fills m's phase times, loss,
  // samples and correct, and adds the hooks' time to `hook_times`.
  absl::Status RunMicroBatches(absl::Span<const int64_t> samples, const StepHooks& hooks,
                               StepMetrics* m, HookTimes* hook_times);
  absl::Status WriteCheckpointNow();
  // The test set evaluated on the settled parameters, with `run`'s epoch training loss
  // (RunState::epoch_loss_sum over epoch_samples), reduced over the workers
  // (StepStrategy::ReduceEval): the epoch's mean over the global batch.
  absl::StatusOr<EvalResult> EvaluateTest(const RunState& run);
  void PrintProgress(const StepMetrics& m, int64_t steps_total, double rate, bool force);

  const TrainerOptions options_;
  Model* const model_;
  Ops* const ops_;
  StepStrategy* const strategy_;
  const Sharder train_shard_;
  const Sharder test_shard_;
  LocalStep train_step_;
  LocalStep test_step_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<TraceWriter> trace_;
  // Position: steps completed, and where the next step starts.
  int64_t step_ = 0;
  int epoch_ = 0;
  int64_t batch_in_epoch_ = 0;
  int64_t last_progress_us_ = 0;
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_TRAINER_H_
