#include "ps_worker/ps_strategy.h"

#include <algorithm>
#include <array>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/local_step.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

}  // namespace

// Staging (a GPU model; PsStrategyOptions::stage_through_host on the CPU).
//
// The model's buffers are device memory, written and read only by ops enqueued on its
// stream by the training thread. The senders (one per shard, plus each client's reader
// thread) push from host_grads_ and pull into host_params_ instead, and never call the
// Ops object. Who touches a chunk k of the mirrors, and when, in step n:
//
// Gradients. grads_ready(range) enqueues the range's device -> host copy into
// host_grads_, records an event E after it and files E as chunk k's latest event for
// every chunk the range overlaps; the chunk's floats are counted down in remaining_
// under the same lock. The sender pushes chunk k once remaining_ is 0 and the latest
// event has completed (WaitStaged): events on one stream complete in order, so the
// latest covers every earlier piece of the chunk, and the bytes it pushes are final.
// Backward's hooks are device-ordered: no device-wide wait per announcement.
//
// host_grads_ is not overwritten while it is being pushed: step n+1's first copy into
// it is enqueued by its first grads_ready, after StartPushPull, whose Settle() has
// waited for every sender of step n, and a sender's PushPull returns only once every
// updated chunk is back, i.e. after the shard has read every gradient chunk it sent.
//
// Parameters. The reader thread writes updated chunk k into host_params_ and marks it
// arrived. The training thread enqueues the chunk's host -> device copy when forward
// first asks for it (params_needed: after the wait for its arrival, ahead of the
// kernels that read it in stream order) or, for chunks nobody asked for, at the next
// Settle (SettleParams between steps, FinishStep's without params_arrive_late). The
// model's parameters thus change only between backward of step n (enqueued earlier)
// and forward of step n+1: busy_ has nothing to protect on the device and does not
// gate the mirror. (StartPushPull's Settle, inside backward, finds nothing left to
// copy: forward asked for every parameter, and a forward without hooks -- evaluation
// -- is preceded by SettleParams.)
//
// host_params_ is not overwritten while a copy from it may still run: step n's copy of
// chunk k is enqueued before step n+1's backward announces anything (forward asks for
// every parameter; the settles run between steps). Step n+1's reply for chunk k is
// written only after WaitStaged(k) -- the same test the sender passed before pushing
// chunk k -- so after an event recorded later on the stream than that copy has
// completed, hence after the copy itself. No separate event after the parameter
// copies is needed. (On the CPU backend every copy is done when it returns.)

absl::StatusOr<std::unique_ptr<PsStrategy>> PsStrategy::Create(
    std::vector<std::unique_ptr<ShardClient>> clients, Model* model, Ops* ops,
    const PsStrategyOptions& options) {
  std::vector<int64_t> tensors;
  for (const ParamRange& t : model->TensorRanges()) tensors.push_back(t.size);
  const bool weighted = options.placement == PsPlacement::kBalanced && !options.shard_weights.empty();
  if (weighted && options.shard_weights.size() != clients.size()) {
    return absl::InvalidArgumentError(absl::StrCat(options.shard_weights.size(), " shard weights for ",
                                                   clients.size(), " shards"));
  }
  RINGSIDE_ASSIGN_OR_RETURN(PsPartition partition,
                            weighted ? PsPartition::Weighted(tensors, options.shard_weights)
                                     : PsPartition::Create(tensors, static_cast<int>(clients.size()), options.placement));
  for (size_t s = 0; s < clients.size(); ++s) {
    const PsRange want = partition.shard(static_cast<int>(s));
    if (clients[s]->layout().offset() != want.offset || clients[s]->layout().size() != want.size) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", clients[s]->layout().shard(), " holds parameters [", clients[s]->layout().offset(), ", ",
          clients[s]->layout().offset() + clients[s]->layout().size(), ") where --ps_placement=",
          PsPlacementName(options.placement), " puts [", want.offset, ", ", want.offset + want.size, ")"));
    }
  }
  int64_t covered = 0;
  for (const auto& c : clients) {
    if (c->layout().offset() != covered) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", c->layout().shard(), " starts at parameter ", c->layout().offset(),
          ", expected ", covered, " (are the shards listed in order?)"));
    }
    covered += c->layout().size();
  }
  if (covered != model->num_params()) {
    return absl::FailedPreconditionError(absl::StrCat("the shards hold ", covered,
                                                      " parameters, the model has ",
                                                      model->num_params()));
  }
  std::unique_ptr<PsStrategy> strategy(
      new PsStrategy(std::move(clients), model, ops, options, std::move(partition)));
  if (options.summation) {
    RINGSIDE_ASSIGN_OR_RETURN(Sgd sgd, Sgd::Create(options.hyper, model->num_params(), ops));
    strategy->sgd_.emplace(std::move(sgd));
  }
  if (strategy->staging_) {
    RINGSIDE_ASSIGN_OR_RETURN(strategy->host_grads_,
                              HostArray<float>::Create(ops, model->num_params()));
    RINGSIDE_ASSIGN_OR_RETURN(strategy->host_params_,
                              HostArray<float>::Create(ops, model->num_params()));
  }
  return strategy;
}

PsStrategy::PsStrategy(std::vector<std::unique_ptr<ShardClient>> clients, Model* model,
                       Ops* ops, const PsStrategyOptions& options, PsPartition partition)
    : clients_(std::move(clients)),
      model_(model),
      ops_(ops),
      options_(options),
      staging_(options.stage_through_host || options.summation || ops->kind() != DeviceKind::kCpu ||
               !partition.identity()),
      partition_(std::move(partition)) {
  for (const auto& c : clients_) {
    slices_.push_back(Slice{c->layout().offset(), c->layout().size()});
    senders_.push_back(std::make_unique<TaskThread>());
  }
  on_device_.resize(clients_.size());
  absl::MutexLock l(&mu_);
  remaining_.resize(clients_.size());
  busy_.resize(clients_.size());
  granted_.assign(clients_.size(), 0);
  grad_events_.resize(clients_.size());
  arrived_.resize(clients_.size());
  sender_done_.assign(clients_.size(), false);
}

PsStrategy::~PsStrategy() {
  {
    absl::MutexLock l(&mu_);
    cancelled_ = true;
  }
  WaitForSenders();
}

void PsStrategy::WaitForSenders() {
  for (auto& t : senders_) t->Wait();
}

bool PsStrategy::WaitForZero(const std::vector<std::vector<int64_t>>* counts, int s, int64_t k) {
  absl::MutexLock l(&mu_);
  auto zero = [this, counts, s, k]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return cancelled_ || (*counts)[s][k] == 0;
  };
  mu_.Await(absl::Condition(&zero));
  return !cancelled_;
}

bool PsStrategy::WaitStaged(int s, int64_t k) {
  if (!WaitForZero(&remaining_, s, k)) return false;
  std::shared_ptr<OpsEvent> event;
  {
    absl::MutexLock l(&mu_);
    event = grad_events_[s][k];
  }
  if (event == nullptr) return true;  // Copied synchronously (RecordEvent failed).
  absl::Status status = event->Wait();
  if (status.ok()) return true;
  absl::MutexLock l(&mu_);
  if (event_error_.ok()) {
    event_error_ = Annotate(status, "copying gradients to the host for the push");
  }
  return false;
}

bool PsStrategy::WaitTurn(int s, int64_t k) {
  absl::MutexLock l(&mu_);
  const int64_t mine = clients_[s]->num_chunks();
  const int64_t position = mine - 1 - k;  // Pushed in descending order.
  auto my_turn = [this, s, mine, position]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (cancelled_) return true;
    for (size_t o = 0; o < clients_.size(); ++o) {
      if (static_cast<int>(o) == s || sender_done_[o]) continue;
      const int64_t chunks = clients_[o]->num_chunks();
      const int64_t granted = granted_[o];
      // Abreast (granted / chunks >= position / mine: as far through its slice), or
      // through.
      if (granted * mine >= position * chunks || granted >= chunks) continue;
      // Behind: it holds the link back only if its next chunk is ready to go.
      if (remaining_[o][chunks - 1 - granted] == 0) return false;
    }
    return true;
  };
  mu_.Await(absl::Condition(&my_turn));
  granted_[s] = position + 1;
  return !cancelled_;
}

void PsStrategy::CopyChunkToDevice(int s, int64_t k) {
  const Slice c = ChunkOf(slices_[s].size, clients_[s]->layout().chunk_floats(), k);
  // The chunk's pieces (one where the PS order is the model's) to their model offsets.
  // Summation: the chunk is the step's mean gradient; SGD steps its parameters with it
  // (element-wise, so piece by piece equals the whole model at once), in stream order
  // after the copy.
  float* target = options_.summation ? model_->grads() : model_->params();
  partition_.ForEachModelPart(PsRange{slices_[s].offset + c.offset, c.size}, [&](const PsPiece& part) {
    ops_->CopyToDeviceAsync(target + part.model_offset, host_params_.data() + part.ps_offset,
                            static_cast<size_t>(part.size) * sizeof(float));
    if (sgd_.has_value()) {
      const int64_t t0 = NowUs();
      sgd_->StepRange(part.model_offset, part.size, model_->params() + part.model_offset,
                      model_->grads() + part.model_offset);
      sgd_us_ += NowUs() - t0;
    }
  });
  on_device_[s][k] = true;
}

absl::Status PsStrategy::CopyToPsOrder(const float* source, float* ps) {
  for (const PsPiece& p : partition_.pieces()) {
    RINGSIDE_RETURN_IF_ERROR(ops_->CopyToHost(ps + p.ps_offset, source + p.model_offset,
                                              static_cast<size_t>(p.size) * sizeof(float)));
  }
  return absl::OkStatus();
}

absl::Status PsStrategy::CopyFromPsOrder(const float* ps, float* target) {
  for (const PsPiece& p : partition_.pieces()) {
    RINGSIDE_RETURN_IF_ERROR(ops_->CopyToDevice(target + p.model_offset, ps + p.ps_offset,
                                                static_cast<size_t>(p.size) * sizeof(float)));
  }
  return absl::OkStatus();
}

int64_t PsStrategy::CopyArrivedToDevice() {
  int64_t copied = 0;
  absl::MutexLock l(&mu_);
  for (size_t s = 0; s < clients_.size(); ++s) {
    for (size_t k = 0; k < on_device_[s].size(); ++k) {
      if (arrived_[s][k] && !on_device_[s][k]) {
        CopyChunkToDevice(static_cast<int>(s), static_cast<int64_t>(k));
        ++copied;
      }
    }
  }
  return copied;
}

void PsStrategy::StartPushPull() {
  // The last step's push-pulls are normally over (this step's forward waited for
  // every chunk); a failure among them is reported by this step's FinishStep.
  if (absl::Status s = Settle(); !s.ok() && deferred_.ok()) deferred_ = s;
  {
    absl::MutexLock l(&mu_);
    for (size_t s = 0; s < clients_.size(); ++s) {
      const int64_t cf = clients_[s]->layout().chunk_floats();
      const int64_t chunks = clients_[s]->num_chunks();
      remaining_[s].resize(chunks);
      for (int64_t k = 0; k < chunks; ++k) remaining_[s][k] = ChunkOf(slices_[s].size, cf, k).size;
      busy_[s] = remaining_[s];
      granted_[s] = 0;
      arrived_[s].assign(chunks, false);
      sender_done_[s] = false;
      grad_events_[s].assign(chunks, nullptr);
    }
  }
  for (size_t s = 0; s < clients_.size(); ++s) {
    on_device_[s].assign(clients_[s]->num_chunks(), false);
  }
  started_ = true;
  in_flight_ = true;
  results_.assign(clients_.size(), absl::OkStatus());
  {
    absl::MutexLock l(&mu_);
    failure_order_.clear();
  }
  timings_.assign(clients_.size(), PushPullTiming());
  call_start_us_ = NowUs();
  call_step_ = step_;
  const int64_t step = step_;
  // Staging: push from and pull into the host mirrors (see "Staging" above).
  const float* grads = staging_ ? host_grads_.data() : model_->grads();
  float* params = staging_ ? host_params_.data() : model_->params();
  for (size_t s = 0; s < clients_.size(); ++s) {
    senders_[s]->Run([this, s, step, grads, params] {
      const Slice& slice = slices_[s];
      const int shard = static_cast<int>(s);
      absl::Status result = clients_[s]->PushPull(
          step, grads + slice.offset, params + slice.offset,
          [this, shard](int64_t k) {
            const bool ready = staging_ ? WaitStaged(shard, k) : WaitForZero(&remaining_, shard, k);
            return ready && WaitTurn(shard, k);
          },
          [this, shard](int64_t k) {
            return staging_ ? WaitStaged(shard, k) : WaitForZero(&busy_, shard, k);
          },
          [this, s](int64_t k) {
            absl::MutexLock l(&mu_);
            arrived_[s][k] = true;
          },
          &timings_[s]);
      results_[s] = result;
      absl::MutexLock l(&mu_);
      if (!result.ok()) failure_order_.push_back(shard);
      sender_done_[s] = true;
    });
  }
}

absl::Status PsStrategy::Settle() {
  if (!in_flight_) return absl::OkStatus();
  WaitForSenders();
  in_flight_ = false;
  absl::Status status;
  std::vector<int> failed;  // Shards in the order their calls failed.
  {
    // A device failure a sender saw is the cause of its Cancelled.
    absl::MutexLock l(&mu_);
    status = std::move(event_error_);
    event_error_ = absl::OkStatus();
    failed = failure_order_;
  }
  // The chunks that came back and nobody asked for yet (all of them without
  // params_arrive_late) go to the device now, ahead of whatever reads them next.
  if (staging_) CopyArrivedToDevice();
  // The first failure in time, preferring one that is not a Cancelled: a later
  // failure, or a call that ended cancelled, is usually the consequence of the first
  // (a shard that died makes the others abort the step a timeout later).
  for (int s : failed) {
    const bool better = status.ok() || (absl::IsCancelled(status) && !absl::IsCancelled(results_[s]));
    if (better) status = results_[s];
  }
  for (size_t s = 0; s < clients_.size(); ++s) {
    settled_sent_ += timings_[s].bytes_sent;
    settled_received_ += timings_[s].bytes_received;
  }
  // The call's per-shard timings, for the trace of the step that settles it.
  spans_.push_back({call_step_, call_start_us_, timings_});
  return status;
}

absl::Status PsStrategy::SettleParams() {
  const int64_t t0 = NowUs();
  absl::Status s = Settle();
  // Staging: "in place" is on the device. Waiting here books the copies Settle
  // enqueued as this settle's, and ends it with the device idle.
  if (staging_ && ops_->kind() != DeviceKind::kCpu) {
    absl::Status done = ops_->Synchronize();
    if (s.ok()) s = done;
  }
  const int64_t t1 = NowUs();
  settle_us_ += t1 - t0;
  if (t1 > t0) settles_.emplace_back(t0, t1);
  return s;
}

StepHooks PsStrategy::hooks() {
  StepHooks h;
  h.backward.grads_ready = [this](const ParamRange& r) { OnGradientReady(r); };
  h.backward.params_free = [this](const ParamRange& r) { OnParamsFree(r); };
  h.backward.split_at = ChunkStarts();
  // Staging: the hooks only enqueue copies on the model's stream and record events,
  // which order the senders after the kernels that produced each range.
  h.backward.device_ordered = staging_;
  h.backward_hook_span = "push";
  h.backward_hook_cat = kCatComm;
  // Numerical safety, --nan_policy=skip_step: a worker whose loss is non-finite pushes
  // zeros for the step (contributes nothing); the shards own the update.
  h.nonfinite_skip = NonFiniteLossSkip::kZeroGradients;
  if (options_.params_arrive_late) {
    h.forward.params_needed = [this](const ParamRange& r) { return OnParamsNeeded(r); };
    h.forward.split_at = h.backward.split_at;
  }
  return h;
}

absl::Status PsStrategy::OnParamsNeeded(const ParamRange& range) {
  if (!in_flight_) return absl::OkStatus();
  bool missing = false;
  {
    absl::MutexLock l(&mu_);
    ForEachChunkIn(range, [&](int s, int64_t k, int64_t, int64_t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      auto here = [this, s, k]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return arrived_[s][k] || sender_done_[s] || cancelled_;
      };
      mu_.Await(absl::Condition(&here));
      missing = !arrived_[s][k];
      return !missing;
    });
  }
  // A chunk that cannot come: its push-pull failed (or was cancelled); its error.
  if (missing) {
    absl::Status s = Settle();
    return s.ok() ? absl::InternalError("a parameter chunk never came back") : s;
  }
  if (staging_) {
    // Every chunk overlapping the range is back in host_params_: enqueue the copies
    // of those not on the device yet, ahead of the forward kernels that read them.
    ForEachChunkIn(range, [this](int s, int64_t k, int64_t, int64_t) {
      if (!on_device_[s][k]) CopyChunkToDevice(s, k);
      return true;
    });
  }
  return absl::OkStatus();
}

void PsStrategy::OnGradientReady(const ParamRange& range) {
  if (!started_) StartPushPull();
  std::shared_ptr<OpsEvent> event;
  if (staging_) {
    // After StartPushPull: its Settle() waited for the senders still pushing the
    // previous step's gradients from host_grads_.
    partition_.ForEachPsPart(PsRange{range.offset, range.size}, [this](const PsPiece& part) {
      ops_->CopyToHostAsync(host_grads_.data() + part.ps_offset, model_->grads() + part.model_offset,
                            static_cast<size_t>(part.size) * sizeof(float));
    });
    absl::StatusOr<std::unique_ptr<OpsEvent>> recorded = ops_->RecordEvent();
    if (recorded.ok()) {
      event = std::move(*recorded);
    } else {
      // Nothing to order the senders with: wait for the copy here (the bytes pushed are
      // then final) and fail the step.
      absl::Status done = ops_->Synchronize();
      if (deferred_.ok()) deferred_ = done.ok() ? recorded.status() : done;
    }
  }
  absl::MutexLock l(&mu_);
  if (staging_) {
    ForEachChunkIn(range, [this, &event](int s, int64_t k, int64_t, int64_t)
                              ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                grad_events_[s][k] = event;
                                return true;
                              });
  }
  CountDown(range, &remaining_);
}

void PsStrategy::OnParamsFree(const ParamRange& range) {
  if (!started_) return;  // Nothing in flight can write yet; FinishStep frees all.
  absl::MutexLock l(&mu_);
  CountDown(range, &busy_);
}

std::vector<int64_t> PsStrategy::ChunkStarts() const {
  std::vector<int64_t> starts;
  for (size_t s = 0; s < clients_.size(); ++s) {
    const int64_t cf = clients_[s]->layout().chunk_floats();
    for (int64_t k = 0; k < clients_[s]->num_chunks(); ++k) {
      // The chunk's first float, at its model offset.
      partition_.ForEachModelPart(PsRange{slices_[s].offset + ChunkOf(slices_[s].size, cf, k).offset, 1},
                                  [&starts](const PsPiece& part) { starts.push_back(part.model_offset); });
    }
  }
  for (const PsPiece& p : partition_.pieces()) starts.push_back(p.model_offset);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  return starts;
}

void PsStrategy::ForEachChunkIn(
    const ParamRange& range, absl::FunctionRef<bool(int, int64_t, int64_t, int64_t)> fn) const {
  bool going = true;
  partition_.ForEachPsPart(PsRange{range.offset, range.size}, [&](const PsPiece& part) {
    if (going) going = ForEachChunkInPs(PsRange{part.ps_offset, part.size}, fn);
  });
}

bool PsStrategy::ForEachChunkInPs(const PsRange& range,
                                  absl::FunctionRef<bool(int, int64_t, int64_t, int64_t)> fn) const {
  const int64_t end = range.offset + range.size;
  for (size_t s = 0; s < slices_.size(); ++s) {
    const int64_t lo = std::max(range.offset, slices_[s].offset);
    const int64_t hi = std::min(end, slices_[s].offset + slices_[s].size);
    if (lo >= hi) continue;
    const int64_t cf = clients_[s]->layout().chunk_floats();
    const int64_t chunks = clients_[s]->num_chunks();
    // Chunks of shard s overlapping [lo, hi).
    const int64_t base = slices_[s].offset;
    for (int64_t k = ChunkHolding(slices_[s].size, cf, lo - base); k < chunks; ++k) {
      const Slice c = ChunkOf(slices_[s].size, cf, k);
      if (base + c.offset >= hi) break;
      if (!fn(static_cast<int>(s), k, std::max(lo, base + c.offset),
              std::min(hi, base + c.offset + c.size))) {
        return false;
      }
    }
  }
  return true;
}

void PsStrategy::CountDown(const ParamRange& range, std::vector<std::vector<int64_t>>* counts) {
  ForEachChunkIn(range, [counts](int s, int64_t k, int64_t lo, int64_t hi) {
    (*counts)[s][k] -= hi - lo;
    return true;
  });
}

absl::Status PsStrategy::FinishStep(const HookTimes& hook_times, StepMetrics* m,
                                    TraceWriter* trace) {
  if (!started_) {
    // No gradient was announced (an empty model range never is): all are final now.
    OnGradientReady(ParamRange{0, model_->num_params()});
  }
  {
    // Backward is over: every updated chunk may be written now.
    absl::MutexLock l(&mu_);
    for (auto& shard : busy_) std::fill(shard.begin(), shard.end(), 0);
  }
  started_ = false;
  if (staging_) {
    // Backward, its gradient copies (and a prefetched batch's copy) were only
    // enqueued: the step ends when the device is done with them. That wait is
    // backward's, as for LocalSgdStrategy (nothing on the CPU backend).
    const int64_t w0 = NowUs();
    absl::Status done = ops_->Synchronize();
    const int64_t waited = NowUs() - w0;
    if (ops_->kind() != DeviceKind::kCpu) {
      m->set_backward_ms(m->backward_ms() + waited / 1e3);
      if (trace != nullptr) {
        trace->Span("backward (device)", kCatCompute, kTrainingTrack, w0, waited);
      }
    }
    if (!done.ok() && deferred_.ok()) deferred_ = done;
  }
  absl::Status deferred = std::move(deferred_);
  deferred_ = absl::OkStatus();
  RINGSIDE_RETURN_IF_ERROR(deferred);
  if (!options_.params_arrive_late) RINGSIDE_RETURN_IF_ERROR(SettleParams());
  // Exposed phases of this step on the training thread: push_ms, the hooks' time
  // during backward (starting the senders, releasing chunks); pull_ms, the time this
  // step's forward (or a settle) waited for the last update's chunks. The push-pulls
  // themselves run on, behind the next step's data and forward.
  m->set_push_ms(hook_times.backward_us / 1e3);
  m->set_wait_ms(0);
  // Summation: the SGD steps ran inside those waits (CopyChunkToDevice); they are the
  // update's, not communication.
  m->set_pull_ms(std::max<int64_t>(0, hook_times.forward_us + settle_us_ - sgd_us_) / 1e3);
  m->set_comm_ms(m->push_ms() + m->pull_ms());
  if (sgd_.has_value()) m->set_update_ms(sgd_us_ / 1e3);
  if (trace != nullptr) Trace(trace);
  spans_.clear();
  settles_.clear();
  m->set_bytes_sent(settled_sent_);
  m->set_bytes_received(settled_received_);
  settle_us_ = 0;
  sgd_us_ = 0;
  settled_sent_ = 0;
  settled_received_ = 0;
  ++step_;
  return absl::OkStatus();
}

void PsStrategy::Trace(TraceWriter* trace) const {
  // Settles ran on the training thread between this step's spans.
  for (const auto& [t0, t1] : settles_) {
    trace->Span("wait for parameters", kCatWait, kTrainingTrack, t0, t1 - t0);
  }
  // Per shard: the push-pull, with its push (until the last gradient chunk was out)
  // and its pull (updated chunks arriving) nested in it. A shard's calls follow one
  // another, so its lane is reused.
  for (const CallSpan& c : spans_) {
    for (size_t s = 0; s < c.shards.size(); ++s) {
      const PushPullTiming& t = c.shards[s];
      const int64_t push_done = std::max(c.start_us, t.push_done_us);
      // The pull: the updated chunks arriving, from the first (not before the push is
      // out, so that the two stay disjoint on the lane) to the last, at least 1 us so
      // that a one-chunk reply can be drawn; a merged timeline draws the flow from the
      // shard's update to it (experiments/timeline).
      const int64_t pull_start = std::max(push_done, t.first_chunk_us);
      const int64_t pull_end = std::max(t.last_chunk_us, pull_start + 1);
      const bool pulled = t.last_chunk_us > 0;
      const int64_t last = std::max({c.start_us, push_done, pulled ? pull_end : 0});
      const int tid = trace->Lane(absl::StrCat("push-pull shard ", s), c.start_us, last);
      const TraceArgs args = {{"step", static_cast<double>(c.step)},
                              {"shard", static_cast<double>(s)},
                              {"bytes_sent", static_cast<double>(t.bytes_sent)},
                              {"bytes_received", static_cast<double>(t.bytes_received)},
                              {"bytes", static_cast<double>(t.bytes_sent + t.bytes_received)}};
      trace->Span("push-pull", kCatComm, tid, c.start_us, last - c.start_us, args);
      trace->Span("push", kCatComm, tid, c.start_us, push_done - c.start_us, args);
      if (pulled) trace->Span("pull", kCatComm, tid, pull_start, pull_end - pull_start, args);
    }
  }
}

absl::StatusOr<EvalResult> PsStrategy::ReduceEval(const EvalResult& local) {
  const std::array<double, kEvalResultSums> mine = EvalResultSums(local);
  RINGSIDE_ASSIGN_OR_RETURN(
      std::vector<double> sums,
      clients_[0]->Barrier(absl::StrCat("eval/", barriers_++),
                           std::vector<double>(mine.begin(), mine.end())));
  if (sums.size() != kEvalResultSums) {
    return absl::InternalError(absl::StrCat("eval barrier: ", sums.size(), " sums, expected ",
                                            kEvalResultSums));
  }
  return EvalResultFromSums(sums);
}

absl::StatusOr<std::vector<float>> PsStrategy::SaveOptimizerState() {
  RINGSIDE_RETURN_IF_ERROR(Settle());
  if (sgd_.has_value()) return sgd_->SaveState();
  if (!options_.has_momentum) return std::vector<float>();
  // Pulled in the PS order, returned in the model's.
  std::vector<float> ps_state(model_->num_params());
  for (size_t s = 0; s < clients_.size(); ++s) {
    RINGSIDE_RETURN_IF_ERROR(
        clients_[s]->Pull(step_, ps::OPTIMIZER_STATE, ps_state.data() + slices_[s].offset));
  }
  std::vector<float> state(model_->num_params());
  partition_.Scatter(ps_state.data(), state.data());
  return state;
}

absl::Status PsStrategy::LoadOptimizerState(absl::Span<const float> state) {
  if (sgd_.has_value()) return sgd_->LoadState(state);
  const int64_t expected = options_.has_momentum ? model_->num_params() : 0;
  if (static_cast<int64_t>(state.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer state has ", state.size(),
                                                   " floats, expected ", expected));
  }
  restored_state_.assign(state.begin(), state.end());
  return absl::OkStatus();
}

absl::Status PsStrategy::AfterCheckpoint() {
  return clients_[0]->Barrier(absl::StrCat("checkpoint/", barriers_++), {}).status();
}

absl::Status PsStrategy::Start(int64_t step) {
  step_ = step;
  // Staging: through the parameter mirror, with blocking copies (nothing is in flight).
  float* params = staging_ ? host_params_.data() : model_->params();
  // Elastic PS: registered again after being lost. Rejoin at the newest step of the
  // shards' parameters; a shard that moved past it answers OUT_OF_RANGE (changing
  // nothing there), and every shard is asked again for the next step (a shard that
  // accepted the earlier one moves the rejoin: the worker has pushed nothing yet).
  bool rejoin = false;
  int64_t at = step;
  for (const auto& c : clients_) {
    if (c->layout().rejoin()) {
      rejoin = true;
      at = std::max(at, c->layout().step());
    }
  }
  if (rejoin) {
    constexpr int kRejoinAttempts = 100;
    for (int attempt = 0;; ++attempt) {
      absl::Status s;
      for (size_t i = 0; i < clients_.size() && s.ok(); ++i) {
        s = clients_[i]->Pull(at, ps::PARAMS, params + slices_[i].offset);
      }
      if (s.ok()) break;
      if (!absl::IsOutOfRange(s) || attempt + 1 >= kRejoinAttempts) return s;
      ++at;
    }
    if (staging_) RINGSIDE_RETURN_IF_ERROR(CopyFromPsOrder(params, model_->params()));
    step_ = at;
    joined_step_ = at;
    absl::FPrintF(stderr, "ps: worker %d rejoined the job at step %d\n", options_.worker_id, at);
    return absl::OkStatus();
  }
  if (options_.worker_id == 0) {
    if (staging_) RINGSIDE_RETURN_IF_ERROR(CopyToPsOrder(model_->params(), params));
    // The restored momentum, in the PS order.
    std::vector<float> state;
    if (!restored_state_.empty()) {
      state.resize(restored_state_.size());
      partition_.Gather(restored_state_.data(), state.data());
    }
    // Optimizer state first: the parameters' arrival releases the other workers.
    for (size_t s = 0; s < clients_.size(); ++s) {
      if (!state.empty()) {
        RINGSIDE_RETURN_IF_ERROR(clients_[s]->Push(step, ps::OPTIMIZER_STATE, state.data() + slices_[s].offset));
      }
      RINGSIDE_RETURN_IF_ERROR(clients_[s]->Push(step, ps::PARAMS, params + slices_[s].offset));
    }
  }
  for (size_t s = 0; s < clients_.size(); ++s) {
    RINGSIDE_RETURN_IF_ERROR(clients_[s]->Pull(step, ps::PARAMS, params + slices_[s].offset));
  }
  if (staging_) RINGSIDE_RETURN_IF_ERROR(CopyFromPsOrder(params, model_->params()));
  return absl::OkStatus();
}

void PsStrategy::ReportFailure(const absl::Status& failure) {
  std::vector<std::thread> calls;
  for (const std::unique_ptr<ShardClient>& client : clients_) {
    ShardClient* c = client.get();
    const std::string reason(failure.message());
    calls.emplace_back([c, reason] { c->Abort(reason).IgnoreError(); });
  }
  for (std::thread& t : calls) t.join();
}

absl::Status PsStrategy::Finish() {
  absl::Status s = Settle();
  if (s.ok()) s = clients_[0]->Barrier("end", {}).status();
  for (size_t i = 0; i < clients_.size() && s.ok(); ++i) s = clients_[i]->Shutdown();
  return Annotate(s, "finishing");
}

}  // namespace ringside
