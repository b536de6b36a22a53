#include "ddp_ring/reducer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringside {

std::vector<Bucket> ComputeBuckets(const std::vector<ParamRange>& layer_ranges,
                                   int64_t first_bucket_bytes, int64_t bucket_cap_bytes) {
  std::vector<Bucket> buckets;
  Bucket current;
  bool open = false;
  for (auto it = layer_ranges.rbegin(); it != layer_ranges.rend(); ++it) {
    const int64_t cap = buckets.empty() ? first_bucket_bytes : bucket_cap_bytes;
    // Ranges arrive in reverse order, so a bucket grows downwards.
    if (open && (current.size + it->size) * static_cast<int64_t>(sizeof(float)) > cap) {
      buckets.push_back(current);
      open = false;
    }
    if (!open) {
      current = {it->offset, 0};
      open = true;
    }
    current.offset = it->offset;
    current.size += it->size;
  }
  if (open) buckets.push_back(current);
  return buckets;
}

absl::StatusOr<std::unique_ptr<Reducer>> Reducer::Create(ProcessGroup* group, Model* model,
                                                         Ops* ops, const SgdHyper& hyper,
                                                         const ReducerOptions& options) {
  if (options.bucket_cap_bytes <= 0 || options.first_bucket_bytes <= 0) {
    return absl::InvalidArgumentError("bucket caps must be positive");
  }
  // Stream contract, producer side: every all-reduce waits for the kernels enqueued
  // before it (a device group); refuses a model on memory the group cannot reduce.
  RINGSIDE_RETURN_IF_ERROR(group->OrderAfter(ops));
  // Top-k with error feedback corrects momentum in its residuals (lossy_compressor.h):
  // the optimizer then steps the sparse sum without momentum of its own.
  const bool topk_momentum = options.lossy.method == Compression::Method::kTopK && options.lossy.error_feedback &&
                             hyper.momentum > 0;
  SgdHyper step_hyper = hyper;
  if (topk_momentum) {
    step_hyper.momentum = 0;
    step_hyper.nesterov = false;
  }
  RINGSIDE_ASSIGN_OR_RETURN(Sgd sgd, Sgd::Create(step_hyper, model->num_params(), ops));
  RINGSIDE_ASSIGN_OR_RETURN(DeviceArray<float> eval_sums, DeviceArray<float>::Create(ops, kEvalResultSums));
  std::vector<Bucket> buckets =
      ComputeBuckets(model->layer_ranges(), options.first_bucket_bytes, options.bucket_cap_bytes);
  const int64_t flags = std::max<int64_t>(1, static_cast<int64_t>(buckets.size()));
  RINGSIDE_ASSIGN_OR_RETURN(DeviceArray<float> nonfinite, DeviceArray<float>::Create(ops, flags));
  RINGSIDE_ASSIGN_OR_RETURN(HostArray<float> host_nonfinite, HostArray<float>::Create(ops, flags));
  std::unique_ptr<Reducer> reducer(new Reducer(group, model, ops, std::move(sgd), options,
                                               std::move(buckets), std::move(eval_sums),
                                               std::move(nonfinite)));
  reducer->host_nonfinite_ = std::move(host_nonfinite);
  if (options.lossy.lossy()) {
    if (ops->kind() != DeviceKind::kCpu) {
      return absl::InvalidArgumentError("--compress=topk and powersgd run on the CPU (--device=cpu, --backend=gloo)");
    }
    std::vector<ParamRange> ranges;
    for (const Bucket& b : reducer->buckets_) ranges.push_back({b.offset, b.size});
    RINGSIDE_ASSIGN_OR_RETURN(reducer->compressor_,
                              LossyCompressor::Create(options.lossy, group, ranges, model->Tensors(),
                                                      options.lossy_seed, topk_momentum ? hyper.momentum : 0.0f));
  }
  return reducer;
}

Reducer::Reducer(ProcessGroup* group, Model* model, Ops* ops, Sgd sgd,
                 const ReducerOptions& options, std::vector<Bucket> buckets,
                 DeviceArray<float> eval_sums, DeviceArray<float> nonfinite)
    : group_(group),
      model_(model),
      ops_(ops),
      sgd_(std::move(sgd)),
      options_(options),
      buckets_(std::move(buckets)),
      eval_sums_(std::move(eval_sums)),
      nonfinite_(std::move(nonfinite)),
      pending_(buckets_.size()),
      work_(buckets_.size()),
      launch_us_(buckets_.size()) {
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].size;
}

void Reducer::Launch(size_t b) {
  launch_us_[b] = NowMicros();
  if (compressor_ != nullptr) {
    work_[b] = compressor_->Launch(b, model_->grads() + buckets_[b].offset);
    return;
  }
  work_[b] = group_->AllReduceOnWire(model_->grads() + buckets_[b].offset, buckets_[b].size,
                                     ReduceOp::kSum, options_.wire);
}

StepHooks Reducer::hooks() {
  StepHooks h;
  h.backward.grads_ready = [this](const ParamRange& range) { OnGradientReady(range); };
  h.accumulate_gradients = true;
  // On the GPU the hooks only issue collectives that wait for the gradients' kernels
  // on the device (OrderAfter), so backward need not wait for the device to call them.
  h.backward.device_ordered = ops_->kind() != DeviceKind::kCpu;
  h.backward_hook_span = "launch all-reduce";
  h.backward_hook_cat = kCatComm;
  // A non-finite local loss reaches every rank through the all-reduce (FinishStep).
  h.nonfinite_skip = NonFiniteLossSkip::kPoisonGradients;
  return h;
}

void Reducer::FetchFlags() {
  if (buckets_.empty()) return;
  ops_->CopyToHostAsync(host_nonfinite_.data(), nonfinite_.data(),
                        buckets_.size() * sizeof(float));
}

absl::Status Reducer::CheckFlags(const char* what, const StepMetrics& m) const {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (host_nonfinite_.data()[b] == 0.0f) continue;
    return NonFiniteError(absl::StrCat(
        what, " in bucket ", b, ": ", DescribeParams(*model_, buckets_[b].offset, buckets_[b].size),
        std::isfinite(m.loss()) ? "" : absl::StrCat(" (this rank's loss: ", m.loss(), ")")));
  }
  return absl::OkStatus();
}

void Reducer::OnGradientReady(const ParamRange& range) {
  // Ranges arrive in reverse layer order and buckets hold whole layers, so the ranges
  // fill the buckets one after the other. (A mismatch is reported by FinishStep.)
  if (next_bucket_ >= buckets_.size()) return;
  pending_[next_bucket_] -= range.size;
  if (pending_[next_bucket_] <= 0) {
    // Protocol step: the bucket's last gradient is final; start its all-reduce now,
    // while backward goes on with the layers below.
    if (options_.overlap) Launch(next_bucket_);
    ++next_bucket_;
  }
}

absl::Status Reducer::FinishStep(const HookTimes& hook_times, StepMetrics* m,
                                 TraceWriter* trace) {
  if (next_bucket_ != buckets_.size()) {
    return absl::InternalError(absl::StrCat("backward announced ", next_bucket_, " of ",
                                            buckets_.size(), " buckets"));
  }
  // Backward is done (on a GPU: enqueued; the device path moves backward_end_us to when
  // the host saw it finish).
  StepTimes t;
  t.backward_end_us = NowMicros();
  if (!options_.overlap) {
    for (size_t b = 0; b < buckets_.size(); ++b) Launch(b);
  }
  // Buckets launch in order: bucket 0 first (during backward, with overlap).
  const int64_t first_launch_us = buckets_.empty() ? t.backward_end_us : launch_us_[0];
  absl::Status status = ops_->kind() != DeviceKind::kCpu ? FinishOnDevice(m, trace, &t)
                                                         : UpdateBuckets(trace, &t);
  if (status.ok()) status = NonFiniteVerdict(m, trace, &t);
  const CollectiveBytes bytes = EndStep(status, trace);
  RINGSIDE_RETURN_IF_ERROR(status);
  // Communication on the training thread: launching buckets during backward (time
  // LocalStep took out of backward_ms) plus the exposed waits after it.
  m->set_comm_ms((t.wait_us + hook_times.backward_us) / 1e3);
  // Who was late: the exposed wait (the late rank's is the shortest) and when this
  // rank was ready (StepMetrics).
  m->set_allreduce_wait_ms(t.wait_us / 1e3);
  m->set_backward_end_us(t.backward_end_us);
  m->set_first_bucket_us(first_launch_us);
  m->set_update_ms(t.update_us / 1e3);
  m->set_bytes_sent(bytes.sent);
  m->set_bytes_received(bytes.received);
  return absl::OkStatus();
}

absl::Status Reducer::UpdateBuckets(TraceWriter* host_trace, StepTimes* t) {
  // Numerical safety: with skip_nonfinite the loop only checks each reduced bucket and
  // the updates run once every check is in (NonFiniteVerdict); otherwise the update's
  // own pass flags a non-finite parameter.
  const bool skip = options_.skip_nonfinite;
  if (!buckets_.empty()) ops_->Fill(nonfinite_.data(), nonfinite_.size(), 0.0f);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const int64_t w0 = NowMicros();
    absl::Status s = work_[b] != nullptr ? work_[b]->OrderBefore(ops_) : absl::OkStatus();
    const int64_t w1 = NowMicros();
    t->wait_us += w1 - w0;
    if (host_trace != nullptr) {
      host_trace->Span("wait for all-reduce", kCatWait, kTrainingTrack, w0, w1 - w0,
                       {{"bucket", static_cast<double>(b)}});
    }
    if (!s.ok()) {
      return Annotate(s, absl::StrCat("all-reduce of bucket ", b, " (", buckets_[b].size,
                                      " floats)"));
    }
    if (skip) {
      ops_->FlagNonFinite(model_->grads() + buckets_[b].offset, buckets_[b].size,
                          nonfinite_.data() + b);
    } else {
      sgd_.StepRange(buckets_[b].offset, buckets_[b].size, model_->params() + buckets_[b].offset,
                     model_->grads() + buckets_[b].offset, /*zero_grads=*/true,
                     nonfinite_.data() + b);
    }
    const int64_t u1 = NowMicros();
    t->update_us += u1 - w1;
    if (host_trace != nullptr) {
      host_trace->Span("update", kCatUpdate, kTrainingTrack, w1, u1 - w1,
                       {{"bucket", static_cast<double>(b)}});
    }
  }
  // Stop: the update flags come back with the step's one device wait (on the CPU: now).
  if (!skip) FetchFlags();
  return absl::OkStatus();
}

absl::Status Reducer::FinishOnDevice(StepMetrics* m, TraceWriter* trace, StepTimes* t) {
  // Backward's kernels were only enqueued (device-ordered hooks): mark their end,
  // before the updates, to tell backward's device time from communication.
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<OpsEvent> backward_done, ops_->RecordEvent());
  RINGSIDE_RETURN_IF_ERROR(UpdateBuckets(/*host_trace=*/nullptr, t));
  // The step's host waits, in device order: backward's remaining kernels (booked as
  // backward, as the single-GPU strategy does), then the all-reduces (bounded by the
  // group's timeout: a dead peer is an error here, before anything blocks on the
  // device behind it), then the updates queued behind them.
  const int64_t t0 = NowMicros();
  absl::Status status = backward_done->Wait();
  const int64_t t1 = NowMicros();
  t->backward_end_us = t1;
  m->set_backward_ms(m->backward_ms() + (t1 - t0) / 1e3);
  if (trace != nullptr) trace->Span("backward (device)", kCatCompute, kTrainingTrack, t0, t1 - t0);
  for (size_t b = 0; b < buckets_.size() && status.ok(); ++b) {
    if (work_[b] == nullptr) continue;
    if (absl::Status s = work_[b]->Wait(); !s.ok()) {
      status = Annotate(s, absl::StrCat("all-reduce of bucket ", b, " (", buckets_[b].size,
                                        " floats)"));
    }
  }
  const int64_t t2 = NowMicros();
  t->wait_us += t2 - t1;
  if (trace != nullptr) trace->Span("wait for all-reduce", kCatWait, kTrainingTrack, t1, t2 - t1);
  RINGSIDE_RETURN_IF_ERROR(status);
  status = ops_->Synchronize();
  const int64_t t3 = NowMicros();
  t->update_us += t3 - t2;
  if (trace != nullptr) trace->Span("update (device)", kCatUpdate, kTrainingTrack, t2, t3 - t2);
  return status;
}

absl::Status Reducer::NonFiniteVerdict(StepMetrics* m, TraceWriter* trace, StepTimes* t) {
  if (options_.skip_nonfinite) RINGSIDE_RETURN_IF_ERROR(SkipOrUpdate(m, trace, t));
  // Stop: a non-finite parameter written by this step's updates (a non-finite reduced
  // gradient, or an update that overflowed) ends the job on every rank.
  if (m->skipped_nonfinite()) return absl::OkStatus();
  return CheckFlags("non-finite gradient or update", *m);
}

absl::Status Reducer::SkipOrUpdate(StepMetrics* m, TraceWriter* trace, StepTimes* t) {
  // Every bucket is reduced and checked (the flags' read waits for the device): the
  // same verdict on every rank, since all hold the same reduced gradients.
  const int64_t u0 = NowMicros();
  FetchFlags();
  absl::Status status;
  absl::Status checked = ops_->Synchronize();  // The verdict is needed on the host now.
  if (checked.ok()) checked = CheckFlags("non-finite gradient", *m);
  if (IsNonFiniteError(checked)) {
    ops_->Fill(model_->grads(), model_->num_params(), 0.0f);  // Discard the step.
    m->set_skipped_nonfinite(true);
  } else if (checked.ok()) {
    ops_->Fill(nonfinite_.data(), nonfinite_.size(), 0.0f);
    for (size_t b = 0; b < buckets_.size(); ++b) {
      sgd_.StepRange(buckets_[b].offset, buckets_[b].size, model_->params() + buckets_[b].offset,
                     model_->grads() + buckets_[b].offset, /*zero_grads=*/true,
                     nonfinite_.data() + b);
    }
    FetchFlags();  // The update's own flags, for the stop check.
  } else {
    status = checked;
  }
  if (status.ok()) status = ops_->Synchronize();
  const int64_t u1 = NowMicros();
  t->update_us += u1 - u0;
  if (trace != nullptr) trace->Span("update", kCatUpdate, kTrainingTrack, u0, u1 - u0);
  return status;
}

CollectiveBytes Reducer::EndStep(const absl::Status& status, TraceWriter* trace) {
  // On failure the remaining all-reduces are waited for too (their buffers are the
  // model's gradients), then the error is returned.
  const int64_t end = NowMicros();
  CollectiveBytes bytes;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!status.ok() && work_[b] != nullptr) work_[b]->Wait().IgnoreError();
    // What the process group counted for the bucket's all-reduce, whichever algorithm
    // ran (ProcessGroup's CollectiveBytes).
    if (work_[b] != nullptr) bytes += work_[b]->bytes();
  }
  if (trace != nullptr) TraceAllReduces(end, trace);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    work_[b].reset();
    pending_[b] = buckets_[b].size;
  }
  next_bucket_ = 0;
  return bytes;
}

void Reducer::TraceAllReduces(int64_t end_us, TraceWriter* trace) const {
  // Buckets may be in flight at once: each span goes to a lane of the "all-reduce"
  // group where it overlaps nothing (drawn in start order).
  struct Drawn {
    int64_t start, stop;
    size_t bucket;
  };
  std::vector<Drawn> spans;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (work_[b] == nullptr) continue;
    const int64_t start = work_[b]->start_us() > 0 ? work_[b]->start_us() : launch_us_[b];
    const int64_t stop = work_[b]->end_us() > 0 ? work_[b]->end_us() : end_us;
    spans.push_back({start, std::max(start, stop), b});
  }
  std::sort(spans.begin(), spans.end(),
            [](const Drawn& a, const Drawn& b) { return a.start < b.start; });
  for (const Drawn& d : spans) {
    const CollectiveBytes bytes = work_[d.bucket]->bytes();
    trace->Span(absl::StrCat("all-reduce bucket ", d.bucket), kCatComm,
                trace->Lane("all-reduce", d.start, d.stop), d.start, d.stop - d.start,
                {{"bucket", static_cast<double>(d.bucket)},
                 {"bytes", static_cast<double>(buckets_[d.bucket].size * sizeof(float))},
                 {"bytes_sent", static_cast<double>(bytes.sent)},
                 {"bytes_received", static_cast<double>(bytes.received)},
                 // When its last gradient was ready (its launch): the merged timeline's
                 // flow from readiness to this all-reduce starts here.
                 {"ready_us", static_cast<double>(launch_us_[d.bucket])}});
  }
}

absl::StatusOr<EvalResult> Reducer::ReduceEval(const EvalResult& local) {
  // The counts go through backend memory (device scratch for NCCL, which reduces only
  // GPU memory). Counts stay exact in float up to 2^24 samples per evaluation.
  const std::array<double, kEvalResultSums> mine = EvalResultSums(local);
  float sums[kEvalResultSums];
  for (int i = 0; i < kEvalResultSums; ++i) sums[i] = static_cast<float>(mine[i]);
  RINGSIDE_RETURN_IF_ERROR(ops_->CopyToDevice(eval_sums_.data(), sums, sizeof(sums)));
  RINGSIDE_RETURN_IF_ERROR(
      group_->AllReduce(eval_sums_.data(), kEvalResultSums, ReduceOp::kSum)->Wait());
  RINGSIDE_RETURN_IF_ERROR(ops_->CopyToHost(sums, eval_sums_.data(), sizeof(sums)));
  const std::array<double, kEvalResultSums> total = {sums[0], sums[1], sums[2], sums[3], sums[4]};
  return EvalResultFromSums(total);
}

absl::Status Reducer::Start(int64_t step) {
  return Annotate(group_->Broadcast(model_->params(), model_->num_params(), 0)->Wait(),
                  "broadcast of rank 0's parameters");
}

absl::Status Reducer::Finish() {
  return Annotate(group_->Barrier()->Wait(), "final barrier");
}

}  // namespace ringside
