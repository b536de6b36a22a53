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
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dataset.h"
#include "common/local_step.h"
#include "common/metrics.h"
#include "common/model.h"
#include "common/ops.h"
#include "common/ringside.pb.h"
#include "common/sgd.h"
#include "common/sharder.h"
#include "common/trace.h"

namespace ringside {

// What a strategy does with the gradients of a step. Called from the training thread.
class StepStrategy {
 public:
  virtual ~StepStrategy() = default;

  // Role written into metric records ("single", "worker", "rank").
  virtual std::string role() const = 0;
  // True: backward adds into model->grads() instead of overwriting them, and the
  // strategy leaves them zeroed once it has consumed them.
  virtual bool accumulates_gradients() const { return false; }
  // Called during backward with each range whose gradients are final
  // (BackwardHooks::grads_ready: the parameters must not change yet) ...
  virtual void OnGradientReady(const ParamRange& range) {}
  // ... and again once backward no longer reads the range's parameters
  // (BackwardHooks::params_free: they may change now).
  virtual void OnParamsFree(const ParamRange& range) {}
  // Flat parameter offsets where backward should split its announcements when it can
  // (BackwardHooks::split_at), e.g. the boundaries of the pieces the strategy sends.
  virtual std::vector<int64_t> SplitAt() const { return {}; }
  // True: FinishStep may return before the next step's parameters are all in place;
  // the next forward then asks for each piece through OnParamsNeeded
  // (ForwardHooks, split at SplitAt()) and computes what has arrived meanwhile.
  virtual bool params_arrive_late() const { return false; }
  // Blocks until `range` holds the parameters the coming forward must use; an error
  // (a failed transfer) stops the step. Called from the training thread.
  virtual absl::Status OnParamsNeeded(const ParamRange& range) { return absl::OkStatus(); }
  // Blocks until every parameter is in place; the transfer's error, if any. The
  // trainer calls it before evaluating, checkpointing and returning.
  virtual absl::Status SettleParams() { return absl::OkStatus(); }
  // After backward: brings model->params() up to date for the next step (or, with
  // params_arrive_late(), starts to). Adds its
  // communication, wait and update times and byte counts to `m`, and spans to `trace`
  // (may be nullptr).
  virtual absl::Status FinishStep(Model* model, StepMetrics* m, TraceWriter* trace) = 0;
  // Combines evaluation counts over all workers (identity for one process).
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
  // Backward adds into model->grads(), which hold the momentum state between steps
  // (or, with Nesterov, zeros: the update consumes them). Create overwrites them.
  bool accumulates_gradients() const override { return true; }
  // Steps the range (the update needs backward to be done with its parameters).
  void OnParamsFree(const ParamRange& range) override;
  absl::Status FinishStep(Model* model, StepMetrics* m, TraceWriter* trace) override;
  absl::StatusOr<std::vector<float>> SaveOptimizerState() override { return sgd_.SaveState(); }
  absl::Status LoadOptimizerState(absl::Span<const float> state) override {
    return sgd_.LoadState(state);
  }

 private:
  LocalSgdStrategy(Sgd sgd, Model* model, Ops* ops)
      : sgd_(std::move(sgd)), model_(model), ops_(ops) {}

  Sgd sgd_;
  Model* const model_;
  Ops* const ops_;
  int64_t stepped_ = 0;  // Parameters stepped during this step's backward.
  std::vector<std::pair<int64_t, int64_t>> spans_;  // (start, duration) of each update.
};

struct TrainerOptions {
  RunConfig config;             // model, epochs, max_steps, batch, seed, drop_last, ...
  int rank = 0;
  int world_size = 1;
  std::string out_dir;          // Created if missing. Empty: write nothing.
  bool resume = false;          // Continue from out_dir/checkpoint.bin.
  int64_t checkpoint_every = 0; // Also checkpoint every N steps (0: epoch ends only).
  bool write_checkpoints = true;  // Rank 0 of a job writes; the others read.
  int eval_batch = 1000;
  FILE* progress = stderr;      // Progress lines; nullptr for silence.
  double progress_interval_s = 2.0;
};

struct TrainResult {
  int64_t steps = 0;            // Global steps completed (including resumed ones).
  int64_t steps_this_run = 0;
  double seconds = 0;           // Wall time of this run's training steps.
  double samples_per_sec = 0;   // This process's training throughput.
  double last_loss = 0;         // Mean training loss of the last step.
  double test_loss = 0;
  double test_accuracy = 0;
};

// File names under TrainerOptions::out_dir.
inline constexpr char kMetricsFile[] = "metrics.jsonl";
inline constexpr char kTraceFile[] = "trace.json";
inline constexpr char kCheckpointFile[] = "checkpoint.bin";

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

  // Trains until config.epochs are done or config.max_steps steps have run, then
  // evaluates on the test set (exact sharding) and writes the final checkpoint.
  absl::StatusOr<TrainResult> Run();

  // Saves the checkpoint now (rank 0 with write_checkpoints writes it), then calls
  // the strategy's AfterCheckpoint on every rank.
  absl::Status SaveCheckpoint();

  // Steps completed so far (after a resume: the checkpoint's).
  int64_t step() const { return step_; }

 private:
  Trainer(const TrainerOptions& options, Model* model, Ops* ops, const DatasetSplits* data,
          StepStrategy* strategy, Sharder train_shard, Sharder test_shard);
  absl::Status Restore();
  absl::Status WriteCheckpointNow();
  absl::StatusOr<EvalResult> EvaluateTest();
  void PrintProgress(const StepMetrics& m, int64_t steps_total, double rate, bool force);

  const TrainerOptions options_;
  Model* const model_;
  Ops* const ops_;
  const DatasetSplits* const data_;
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
