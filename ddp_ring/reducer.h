// The DDP reducer: PyTorch-DDP-style gradient synchronisation as a StepStrategy.
//
// Gradient buckets are contiguous ranges of the flat gradient buffer, formed in reverse
// layer order (the order backward produces them): the first bucket is capped at
// first_bucket_bytes (1 MiB), the others at bucket_cap_bytes (25 MiB); a layer is never
// split. During backward, the moment the last layer of a bucket announces its gradients,
// the bucket's all-reduce is launched on the process group, in place, and runs while
// backward continues. After backward (FinishStep) the reducer waits for the buckets in
// order and steps SGD locally on each one as soon as it is reduced (FinishStep's parts:
// the host path, the device path, the non-finite verdict). Since the trainer scales
// each rank's loss by 1 / (world * batch), a sum all-reduce already yields the average
// gradient of the global batch.
#ifndef RINGSIDE_DDP_RING_REDUCER_H_
#define RINGSIDE_DDP_RING_REDUCER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/common.h"
#include "ddp_ring/lossy_compressor.h"
#include "ddp_ring/process_group.h"

namespace ringside {

// PyTorch DDP's defaults (c10d reducer.hpp: kDefaultFirstBucketBytes,
// kDefaultBucketBytesCap): a small first bucket starts communication early.
inline constexpr int64_t kDefaultFirstBucketBytes = int64_t{1} << 20;
inline constexpr int64_t kDefaultBucketCapBytes = int64_t{25} << 20;

struct ReducerOptions {
  int64_t bucket_cap_bytes = kDefaultBucketCapBytes;
  int64_t first_bucket_bytes = kDefaultFirstBucketBytes;
  // false: launch every bucket only after backward (the ablation without overlap).
  bool overlap = true;
  // Numerical safety (--nan_policy=skip_step): check each reduced bucket before any
  // update and discard the whole step's update when one holds a non-finite value.
  bool skip_nonfinite = false;
  // --compress=fp16|bf16: every bucket's all-reduce moves 2-byte values
  // (ProcessGroup::AllReduceOnWire); evaluation sums stay float32.
  WireFormat wire = WireFormat::kFp32;
  // --compress=topk:F|powersgd:R (lossy()): every bucket reduced through a
  // LossyCompressor (lossy_compressor.h) instead; CPU ops and a host-memory group only.
  // `lossy_seed`: PowerSGD's first Q, the same on every rank.
  Compression lossy;
  uint64_t lossy_seed = 0;
};

// A bucket: gradient floats [offset, offset + size), covering whole layers.
struct Bucket {
  int64_t offset = 0;
  int64_t size = 0;
};

// Buckets over `layer_ranges` (layer order) in reverse layer order: buckets[0] holds the
// last layers. Pure function, exposed for tests.
std::vector<Bucket> ComputeBuckets(const std::vector<ParamRange>& layer_ranges,
                                   int64_t first_bucket_bytes, int64_t bucket_cap_bytes);

// Not thread-safe (called from the training thread). Borrows the group, model and ops.
class Reducer final : public StepStrategy {
 public:
  static absl::StatusOr<std::unique_ptr<Reducer>> Create(ProcessGroup* group, Model* model,
                                                         Ops* ops, const SgdHyper& hyper,
                                                         const ReducerOptions& options);

  std::string role() const override { return "rank"; }
  // Lifecycle start: every rank continues from rank 0's parameters (a broadcast of
  // model->params(); the teaching bug no_broadcast skips it in BugCheckGroup). Blocks.
  absl::Status Start(int64_t step) override;
  // Lifecycle end: a barrier, so that nobody leaves (and rank 0 does not stop the
  // store) before all are done. Blocks.
  absl::Status Finish() override;
  // grads_ready launches a bucket's all-reduce once its last layer is announced. The
  // SGD step zeroes each gradient as it consumes it, so backward accumulates into
  // zeros and BLAS skips its zeroing pass (as in the single-process strategy).
  StepHooks hooks() override;
  // Waits for the buckets in launch order (launching those not launched yet) and steps
  // SGD on each bucket's range as soon as its all-reduce is done. Fills
  // comm_ms (communication on the training thread: launching buckets during backward,
  // hook_times.backward_us, plus allreduce_wait_ms), allreduce_wait_ms (the time
  // blocked after backward waiting for the all-reduces, i.e. the exposed communication,
  // which includes waiting for late ranks: the latest rank waits least),
  // backward_end_us and first_bucket_us (wall clock; StepMetrics), update_ms and the
  // bytes this rank sent and received for the step's buckets, as the process group
  // counted them (the sum of Work::bytes). Trace: "wait for all-reduce" (kCatWait) and "update" per bucket on
  // the training track, and each bucket's all-reduce on a lane of "all-reduce" (args
  // bucket, bytes); LocalStep drew the launches during backward.
  //
  // Numerical safety: every rank checks the same reduced gradients, so all agree. A
  // non-finite local loss fills this rank's gradients with NaN before their all-reduce
  // (NonFiniteLossSkip::kPoisonGradients), so that every rank sees it there. Stop
  // (default): each bucket's SGD pass also flags a non-finite parameter it writes; one
  // is a NonFiniteError naming the bucket's layers and elements. skip_nonfinite: each
  // bucket is checked once its all-reduce is done (Ops::FlagNonFinite, one read) and
  // the updates wait for all the checks; if one fired, the gradients are zeroed, no
  // parameter or momentum changes and m->skipped_nonfinite is set (on every rank).
  absl::Status FinishStep(const HookTimes& hook_times, StepMetrics* m,
                          TraceWriter* trace) override;
  absl::StatusOr<EvalResult> ReduceEval(const EvalResult& local) override;
  absl::Status AfterCheckpoint() override { return group_->Barrier()->Wait(); }
  absl::StatusOr<std::vector<float>> SaveOptimizerState() override { return sgd_.SaveState(); }
  absl::Status LoadOptimizerState(absl::Span<const float> state) override {
    return sgd_.LoadState(state);
  }

  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  Reducer(ProcessGroup* group, Model* model, Ops* ops, Sgd sgd, const ReducerOptions& options,
          std::vector<Bucket> buckets, DeviceArray<float> eval_sums,
          DeviceArray<float> nonfinite);
  // What FinishStep's parts book for the step (microseconds): the exposed wait for the
  // all-reduces, the update time, and when backward was seen done (wall clock).
  struct StepTimes {
    int64_t wait_us = 0;
    int64_t update_us = 0;
    int64_t backward_end_us = 0;
  };
  // FinishStep's parts, in the order it runs them; each adds its times to `t` and, where
  // `trace` is not null, its spans. On an error each returns at once; EndStep then
  // waits for the step's all-reduces.
  //
  // Protocol step, both paths (and the whole host path, CPU ops): in launch order,
  // queue each bucket's SGD step (with skip_nonfinite: only its non-finite check)
  // behind its all-reduce (every rank then holds the same averaged gradients there),
  // so that the update of one bucket overlaps the all-reduces still in flight.
  // Host-memory groups: OrderBefore waits for the all-reduce and the step runs at once;
  // spans "wait for all-reduce" and "update" per bucket to `host_trace`. Device groups
  // (host_trace null): both are only enqueued (the stream contract). Zeroes the
  // buckets' flags first; without skip_nonfinite enqueues the update flags' copy last.
  // Error: the first failed all-reduce, naming its bucket.
  absl::Status UpdateBuckets(TraceWriter* host_trace, StepTimes* t);
  // The device path: marks backward's end on the device, UpdateBuckets (enqueued
  // only), then the step's host waits in device order: backward's remaining kernels
  // (added to m's backward_ms, span "backward (device)"; moves t->backward_end_us to
  // then), the all-reduces (each bounded by the group's timeout; span "wait for
  // all-reduce"), the updates ("update (device)"). Never a device wait per bucket.
  absl::Status FinishOnDevice(StepMetrics* m, TraceWriter* trace, StepTimes* t);
  // The non-finite verdict, once every bucket is reduced (and updated, without
  // skip_nonfinite). skip_nonfinite: SkipOrUpdate. Then, unless the step was skipped, the
  // stop check: a NonFiniteError naming the first bucket whose update flag is set.
  absl::Status NonFiniteVerdict(StepMetrics* m, TraceWriter* trace, StepTimes* t);
  // skip_nonfinite: reads every bucket's check (one device wait); one set: zeroes the
  // gradients and sets m->skipped_nonfinite (no parameter or momentum changes);
  // none: runs every bucket's update and fetches its flags. Blocks for the device;
  // span "update".
  absl::Status SkipOrUpdate(StepMetrics* m, TraceWriter* trace, StepTimes* t);
  // Ends the step whatever its status: on failure waits for every launched all-reduce
  // (their buffers are the gradients), draws the all-reduces (TraceAllReduces), resets
  // the per-step state; returns the bytes the group counted for the step's buckets.
  CollectiveBytes EndStep(const absl::Status& status, TraceWriter* trace);
  // Numerical safety: enqueues the flags' copy to host_nonfinite_ (a device backend:
  // it is there once the step's Synchronize has returned; the CPU: at once).
  void FetchFlags();
  // NonFiniteError naming the first bucket whose flag (as fetched) is set; OK when
  // none is.
  absl::Status CheckFlags(const char* what, const StepMetrics& m) const;
  void Launch(size_t bucket);
  // Draws this step's all-reduces (those still unfinished end at `end_us`).
  void TraceAllReduces(int64_t end_us, TraceWriter* trace) const;
  // Counts `range`'s gradients into its bucket; launches the bucket once complete.
  void OnGradientReady(const ParamRange& range);

  ProcessGroup* const group_;
  Model* const model_;
  Ops* const ops_;
  Sgd sgd_;
  const ReducerOptions options_;
  const std::vector<Bucket> buckets_;
  // With options_.lossy: reduces the buckets in Launch's stead (null otherwise).
  std::unique_ptr<LossyCompressor> compressor_;
  // ReduceEval's sums (EvalResult's five fields), in the group's memory.
  DeviceArray<float> eval_sums_;  // [kEvalResultSums] (common/local_step.h)
  DeviceArray<float> nonfinite_;  // [buckets] Non-finite flags, zeroed every step.
  HostArray<float> host_nonfinite_;  // [buckets] Their copy, read after the step's sync.
  // Per step: floats still missing per bucket, and the launched all-reduces.
  std::vector<int64_t> pending_;
  std::vector<std::shared_ptr<Work>> work_;
  std::vector<int64_t> launch_us_;
  size_t next_bucket_ = 0;  // Buckets complete in order; the next one to complete.
};

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_REDUCER_H_
