#include "common/local_step.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

using Intervals = std::vector<std::pair<int64_t, int64_t>>;

// Draws [start, end) as `name` pieces on the training track, cut around `cuts`
// (ascending, disjoint, inside [start, end)), each cut drawn as `cut_name`.
void DrawCut(TraceWriter* trace, const char* name, const char* cat, int64_t start,
             int64_t end, const Intervals& cuts, const char* cut_name, const char* cut_cat) {
  int64_t at = start;
  for (const auto& [c0, c1] : cuts) {
    if (c0 > at) trace->Span(name, cat, kTrainingTrack, at, c0 - at);
    trace->Span(cut_name, cut_cat, kTrainingTrack, c0, c1 - c0);
    at = c1;
  }
  if (end > at || cuts.empty()) trace->Span(name, cat, kTrainingTrack, at, end - at);
}

constexpr char kNonFinitePayload[] = "ringside/nonfinite";

}  // namespace

absl::Status NonFiniteError(absl::string_view what) {
  absl::Status status = absl::DataLossError(what);
  status.SetPayload(kNonFinitePayload, absl::Cord("1"));
  return status;
}

bool IsNonFiniteError(const absl::Status& status) {
  return status.GetPayload(kNonFinitePayload).has_value();
}

std::string DescribeParams(const Model& model, int64_t offset, int64_t size) {
  const int64_t end = offset + size;
  std::vector<std::string> names;
  int64_t at = 0;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const int64_t n = model.layers()[i]->num_params();
    if (n > 0 && at < end && offset < at + n) {
      names.push_back(absl::StrCat(i, " (", model.layers()[i]->name(), ")"));
    }
    at += n;
  }
  std::string where = names.empty() ? "parameters"
                      : names.size() == 1
                          ? absl::StrCat("layer ", names[0])
                          : absl::StrCat("layers ", names.front(), "..", names.back());
  return absl::StrCat(where, " (elements ", offset, "-", end - 1, ")");
}

absl::Status LocalStep::Load(absl::Span<const int64_t> indices) {
  const int64_t n = static_cast<int64_t>(indices.size());
  const int64_t dim = dataset_->input_dim();
  const bool on_cpu = ops_->kind() == DeviceKind::kCpu;
  if (capacity_ < n) {
    for (Staging& s : staging_) {
      RINGSIDE_ASSIGN_OR_RETURN(s.x, HostArray<float>::Create(ops_, n * dim));
      RINGSIDE_ASSIGN_OR_RETURN(s.y, HostArray<int32_t>::Create(ops_, n));
    }
    if (!on_cpu) {
      RINGSIDE_ASSIGN_OR_RETURN(x_, DeviceArray<float>::Create(ops_, n * dim));
      RINGSIDE_ASSIGN_OR_RETURN(y_, DeviceArray<int32_t>::Create(ops_, n));
    }
    capacity_ = n;
  }
  slot_ ^= 1;
  Staging& s = staging_[slot_];
  dataset_->Gather(indices, s.x.data(), s.y.data());
  if (on_cpu) {
    x_now_ = s.x.data();
    y_now_ = s.y.data();
  } else {
    ops_->CopyToDeviceAsync(x_.data(), s.x.data(), n * dim * sizeof(float));
    ops_->CopyToDeviceAsync(y_.data(), s.y.data(), n * sizeof(int32_t));
    x_now_ = x_.data();
    y_now_ = y_.data();
  }
  return absl::OkStatus();
}

absl::StatusOr<ForwardResult> LocalStep::TimedForward(int batch, const StepHooks& hooks,
                                                      HookCalls* waits) {
  ForwardHooks fh;
  if (hooks.forward.params_needed) {
    fh.split_at = hooks.forward.split_at;
    fh.params_needed = [&hooks, waits](const ParamRange& range) {
      const int64_t h0 = NowMicros();
      absl::Status s = hooks.forward.params_needed(range);
      const int64_t h1 = NowMicros();
      waits->us += h1 - h0;
      if (h1 > h0) waits->spans.emplace_back(h0, h1);
      return s;
    };
  }
  return model_->Forward(x_now_, y_now_, batch, fh);
}

absl::Status LocalStep::TimedBackward(float loss_scale, const StepHooks& hooks, bool announce,
                                      bool accumulate_grads, bool bad_loss, HookCalls* calls) {
  const NonFiniteLossSkip skip = hooks.nonfinite_skip;
  const bool run_backward = !bad_loss || skip != NonFiniteLossSkip::kSkipBackward;
  // The value every announced gradient range is overwritten with on a skipped step.
  const float fill = skip == NonFiniteLossSkip::kZeroGradients
                         ? 0.0f
                         : std::numeric_limits<float>::quiet_NaN();
  auto timed = [calls](const GradReadyFn& hook) -> GradReadyFn {
    if (!hook) return nullptr;
    return [&hook, calls](const ParamRange& range) {
      const int64_t h0 = NowMicros();
      hook(range);
      const int64_t h1 = NowMicros();
      calls->us += h1 - h0;
      if (h1 > h0) calls->spans.emplace_back(h0, h1);
    };
  };
  const BackwardHooks none;
  const BackwardHooks& bh = announce ? hooks.backward : none;
  // A skipped step's gradients: each announced range is filled before the hook sees it.
  GradReadyFn grads_ready = timed(bh.grads_ready);
  if (bad_loss && grads_ready) {
    grads_ready = [this, fill, inner = std::move(grads_ready)](const ParamRange& range) {
      ops_->Fill(model_->grads() + range.offset, range.size, fill);
      inner(range);
    };
  }
  if (run_backward) {
    RINGSIDE_RETURN_IF_ERROR(model_->Backward(
        loss_scale,
        BackwardHooks{grads_ready, timed(bh.params_free), bh.split_at, bh.device_ordered},
        accumulate_grads));
    // Ranges nobody announced (an earlier micro-batch) are handed on later: fill them too.
    if (bad_loss && !grads_ready) ops_->Fill(model_->grads(), model_->num_params(), fill);
  }
  return absl::OkStatus();
}

absl::Status LocalStep::Run(absl::Span<const int64_t> indices, float loss_scale,
                            const StepHooks& hooks, bool announce, bool accumulate_grads,
                            StepMetrics* m, TraceWriter* trace, HookTimes* hook_times) {
  const int64_t t0 = NowMicros();
  const bool staged = !prefetched_.empty() &&
                      absl::MakeConstSpan(prefetched_) == indices;
  prefetched_.clear();
  if (!staged) RINGSIDE_RETURN_IF_ERROR(Load(indices));
  const int64_t t1 = NowMicros();
  const int batch = static_cast<int>(indices.size());
  // Time spent inside the strategy's hooks is the strategy's (waiting for parameters,
  // update or communication launch), not forward's or backward's: measure it and take
  // it out, in the step record and in the trace.
  HookCalls waits;
  RINGSIDE_ASSIGN_OR_RETURN(ForwardResult fwd, TimedForward(batch, hooks, &waits));
  const int64_t t2 = NowMicros();
  // Numerical safety: the loss is on the host already (Forward read it back).
  const bool bad_loss = !std::isfinite(fwd.loss_sum);
  if (bad_loss) {
    if (!hooks.skip_nonfinite && hooks.nonfinite_skip != NonFiniteLossSkip::kPoisonGradients) {
      return NonFiniteError(absl::StrCat("non-finite loss (", fwd.loss_sum / batch, ")"));
    }
    if (hooks.skip_nonfinite) m->set_skipped_nonfinite(true);
  }
  HookCalls calls;
  RINGSIDE_RETURN_IF_ERROR(
      TimedBackward(loss_scale, hooks, announce, accumulate_grads, bad_loss, &calls));
  const int64_t t3 = NowMicros();
  hook_times->forward_us += waits.us;
  hook_times->backward_us += calls.us;
  m->set_data_ms((t1 - t0) / 1e3);
  m->set_forward_ms((t2 - t1 - waits.us) / 1e3);
  m->set_backward_ms((t3 - t2 - calls.us) / 1e3);
  m->set_loss(static_cast<float>(fwd.loss_sum / batch));
  m->set_samples(batch);
  m->set_correct(static_cast<int32_t>(fwd.correct));
  if (trace != nullptr) {
    if (!staged) trace->Span("data", kCatData, kTrainingTrack, t0, t1 - t0);
    DrawCut(trace, "forward", kCatCompute, t1, t2, waits.spans, "wait for parameters", kCatWait);
    DrawCut(trace, "backward", kCatCompute, t2, t3, calls.spans, hooks.backward_hook_span,
            hooks.backward_hook_cat);
  }
  return absl::OkStatus();
}

absl::Status LocalStep::Prefetch(absl::Span<const int64_t> indices, StepMetrics* m,
                                TraceWriter* trace) {
  const int64_t t0 = NowMicros();
  prefetched_.clear();
  RINGSIDE_RETURN_IF_ERROR(Load(indices));
  prefetched_.assign(indices.begin(), indices.end());
  const int64_t t1 = NowMicros();
  m->set_data_ms(m->data_ms() + (t1 - t0) / 1e3);
  if (trace != nullptr) {
    trace->Span("data (next step)", kCatData, kTrainingTrack, t0, t1 - t0);
  }
  return absl::OkStatus();
}

std::array<double, kEvalResultSums> EvalResultSums(const EvalResult& r) {
  return {r.loss_sum, static_cast<double>(r.correct), static_cast<double>(r.count),
          r.train_loss_sum, static_cast<double>(r.train_count)};
}

EvalResult EvalResultFromSums(absl::Span<const double> sums) {
  ABSL_RAW_CHECK(sums.size() == kEvalResultSums, "EvalResultFromSums: not kEvalResultSums sums");
  EvalResult r;
  r.loss_sum = sums[0];
  r.correct = std::llround(sums[1]);
  r.count = std::llround(sums[2]);
  r.train_loss_sum = sums[3];
  r.train_count = std::llround(sums[4]);
  return r;
}

absl::StatusOr<EvalResult> LocalStep::Evaluate(absl::Span<const int64_t> indices,
                                               int batch) {
  EvalResult result;
  prefetched_.clear();  // Evaluation overwrites the staging buffers.
  for (size_t begin = 0; begin < indices.size(); begin += batch) {
    const size_t n = std::min<size_t>(batch, indices.size() - begin);
    RINGSIDE_RETURN_IF_ERROR(Load(indices.subspan(begin, n)));
    RINGSIDE_ASSIGN_OR_RETURN(ForwardResult fwd,
                              model_->Forward(x_now_, y_now_, static_cast<int>(n)));
    result.loss_sum += fwd.loss_sum;
    result.correct += fwd.correct;
    result.count += static_cast<int64_t>(n);
  }
  return result;
}

}  // namespace ringside
