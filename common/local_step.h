// One local training step, written once for every strategy: gather a batch, copy it
// to the device, forward, backward (announcing gradient readiness), timing each phase.
// The single, parameter-server and DDP loops differ only in what they do afterwards
// with the gradients (see trainer.h).
#ifndef RINGSIDE_COMMON_LOCAL_STEP_H_
#define RINGSIDE_COMMON_LOCAL_STEP_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/dataset.h"
#include "common/model.h"
#include "common/ops.h"
#include "common/ringside.pb.h"
#include "common/trace.h"

namespace ringside {

// Numerical safety: what LocalStep::Run does when a micro-batch's loss is non-finite
// and the job skips such steps (--nan_policy=skip_step; StepHooks::skip_nonfinite). The
// strategy picks the form that discards the step on every process of the job.
enum class NonFiniteLossSkip {
  // No backward: nothing is announced and the gradients are untouched (a strategy with
  // no peers, whose FinishStep then leaves the parameters alone).
  kSkipBackward,
  // Backward runs and every range it announces (and, after it, the whole gradient) is
  // filled with NaN before the hooks see it: an all-reduce carries the NaN to every
  // rank, whose check of the reduced gradient then skips (or stops at) the same step
  // everywhere. Under both policies: with it a non-finite loss is never an error here.
  kPoisonGradients,
  // Backward runs and every announced range is zeroed before the hooks see it: this
  // process contributes nothing to the step (a parameter-server worker's push).
  kZeroGradients,
};

// What a strategy hands the local step: its hooks and whether backward accumulates.
struct StepHooks {
  // Empty unless parameters may still be arriving when forward starts: then forward
  // asks for each piece before reading it (params_needed blocks until it is in place;
  // its error stops the step).
  ForwardHooks forward;
  // Announcements during backward: grads_ready (the range's gradients are final; the
  // parameters must not change yet), params_free (backward no longer reads the range's
  // parameters), split_at (where to cut the announcements, e.g. chunk boundaries).
  BackwardHooks backward;
  // True: backward adds into model->grads() instead of overwriting them, and the
  // strategy leaves them zeroed once it has consumed them.
  bool accumulate_gradients = false;
  // How the trace names what the backward hooks do on the training thread (e.g.
  // "update", kCatUpdate for the local optimizer step; "push", kCatComm).
  const char* backward_hook_span = "backward hooks";
  const char* backward_hook_cat = kCatComm;
  // Numerical safety. A non-finite loss (checked on the host right after forward, which
  // reads it back anyway) stops the step with NonFiniteError before backward, unless
  // skip_nonfinite (set by the trainer for --nan_policy=skip_step): then the step
  // goes on as nonfinite_skip says and StepMetrics.skipped_nonfinite is set. (With
  // kPoisonGradients the step goes on under either policy; see there.)
  bool skip_nonfinite = false;
  NonFiniteLossSkip nonfinite_skip = NonFiniteLossSkip::kSkipBackward;
};

// Numerical safety: the error of a step that saw a non-finite value; `what` names the
// value and where it is ("non-finite loss (nan)", "non-finite update in layer fc2
// (elements 4096-8191)"). The trainer adds the step and rank. IsNonFiniteError tells
// it from other failures (the code is DataLoss and a payload marks it).
absl::Status NonFiniteError(absl::string_view what);
bool IsNonFiniteError(const absl::Status& status);
// The layers of `model` that [offset, offset + size) overlaps and the range itself:
// "layer 2 (fc) (elements 4096-8191)", "layers 1 (conv)..3 (fc) (elements 0-8191)".
std::string DescribeParams(const Model& model, int64_t offset, int64_t size);

// Time the training thread spent inside a strategy's hooks during one step. LocalStep
// measures it (once, for every strategy) and takes it out of forward_ms / backward_ms;
// the trainer hands it to StepStrategy::FinishStep, which books it as its own phase.
struct HookTimes {
  int64_t forward_us = 0;   // In StepHooks::forward.params_needed (waiting for parameters).
  int64_t backward_us = 0;  // In StepHooks::backward's grads_ready and params_free.
};

// One evaluation of the test set, and the training loss of the step before it: summed
// over samples, so that StepStrategy::ReduceEval adds them over the workers and every
// strategy prints the mean over the global batch (what one process at that batch
// prints), not one rank's.
struct EvalResult {
  double loss_sum = 0;  // Test loss summed over `count` samples.
  int64_t correct = 0;
  int64_t count = 0;
  double train_loss_sum = 0;  // The epoch's training losses summed over their samples.
  int64_t train_count = 0;    // Those samples (0: no step ran).
};

// An EvalResult as the sums a reduction over workers adds up (DDP's all-reduce, the
// parameter server's eval barrier), in one order both use, and back (counts rounded
// to the nearest integer: a float all-reduce carries them inexactly past 2^24).
inline constexpr int kEvalResultSums = 5;
std::array<double, kEvalResultSums> EvalResultSums(const EvalResult& r);
EvalResult EvalResultFromSums(absl::Span<const double> sums);  // [kEvalResultSums]

// Not thread-safe. Borrows the model, ops and dataset, which must outlive it.
class LocalStep {
 public:
  LocalStep(Model* model, Ops* ops, const Dataset* dataset)
      : model_(model), ops_(ops), dataset_(dataset) {}

  // Runs samples `indices` (non-empty) through forward and backward; the gradients of
  // loss_scale * (sum of the batch's losses) end up in model->grads(). Fills the data,
  // forward and backward times, loss (mean over the batch), samples and correct of `m`.
  // forward_ms and backward_ms exclude the time spent inside the hooks, which is added
  // to `hook_times` instead (the strategy books it as its own work and waits). With
  // `accumulate_grads` backward adds into model->grads() (see Model::Backward); with
  // `announce` false backward announces nothing (an earlier micro-batch). A non-finite
  // loss: NonFiniteError before backward, or with hooks.skip_nonfinite, see
  // NonFiniteLossSkip (m->skipped_nonfinite is set).
  //
  // Trace (may be nullptr), all on kTrainingTrack and disjoint: "data"; "forward" cut
  // into the pieces between waits for parameters, each wait a "wait for parameters"
  // span (kCatWait); "backward" cut the same way around the backward hook calls, each
  // a hooks.backward_hook_span span. So the forward spans of a step add up to
  // forward_ms, and the backward spans to backward_ms.
  absl::Status Run(absl::Span<const int64_t> indices, float loss_scale, const StepHooks& hooks,
                   bool announce, bool accumulate_grads, StepMetrics* m, TraceWriter* trace,
                   HookTimes* hook_times);

  // Gathers `indices` now and copies them to the device, so that the next Run on the
  // same indices starts at forward (Run gathers anything else as usual). Call it after
  // Run, never between its forward and backward: it overwrites the batch Run read.
  // Adds its time to m->data_ms and a "data (next step)" span to `trace` (may be
  // nullptr).
  absl::Status Prefetch(absl::Span<const int64_t> indices, StepMetrics* m, TraceWriter* trace);

  // Forward only over `indices`, in batches of `batch`: loss and accuracy counts.
  absl::StatusOr<EvalResult> Evaluate(absl::Span<const int64_t> indices, int batch);

 private:
  // Gathers samples into the next staging slot and enqueues their copy to the device
  // (which the forward that reads them follows in stream order). Points x_now_ and
  // y_now_ at the batch as the model must read it.
  absl::Status Load(absl::Span<const int64_t> indices);

  // Time the training thread spent inside one phase's hooks: the total, and each call
  // that took any as [start, end) in NowMicros(), in call order (the trace's cuts).
  struct HookCalls {
    int64_t us = 0;
    std::vector<std::pair<int64_t, int64_t>> spans;
  };

  // Run's forward over the loaded batch (`batch` samples), hooks.forward's params_needed
  // (if any) timed into `waits`. Blocks in those hooks; their error stops it.
  absl::StatusOr<ForwardResult> TimedForward(int batch, const StepHooks& hooks, HookCalls* waits);
  // Run's backward, unless the step skips it (`bad_loss`, see NonFiniteLossSkip): the
  // announcing hooks (none unless `announce`) timed into `calls`, a bad step's ranges filled.
  absl::Status TimedBackward(float loss_scale, const StepHooks& hooks, bool announce,
                             bool accumulate_grads, bool bad_loss, HookCalls* calls);

  // Host staging memory (page-locked on a GPU, so the copy is asynchronous), two slots
  // used in turn: a slot is overwritten two Loads after it was filled, and each batch
  // is run through a forward in between, whose loss read-back waits for the device and
  // so for the slot's copy. The CPU backend's model reads a slot directly.
  struct Staging {
    HostArray<float> x;
    HostArray<int32_t> y;
  };

  Model* const model_;
  Ops* const ops_;
  const Dataset* const dataset_;
  Staging staging_[2];
  int slot_ = 0;
  int64_t capacity_ = 0;  // Samples each slot (and x_, y_) holds.
  DeviceArray<float> x_;
  DeviceArray<int32_t> y_;
  const float* x_now_ = nullptr;  // The loaded batch in backend memory.
  const int32_t* y_now_ = nullptr;
  std::vector<int64_t> prefetched_;  // Indices staged by Prefetch; empty when none.
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_LOCAL_STEP_H_
