#include "common/data_parallel.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/ops_factory.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

// The Ops decorator of WithInterpreterLock. Each locked call measures how long it
// waited for the lock.
class InterpreterLockOps final : public Ops {
 public:
  InterpreterLockOps(std::unique_ptr<Ops> inner, std::shared_ptr<InterpreterLock> lock)
      : inner_(std::move(inner)), lock_(std::move(lock)) {}

  DeviceKind kind() const override { return inner_->kind(); }
  std::string name() const override { return inner_->name(); }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return inner_->Allocate(bytes); }
  void Free(void* ptr) override { inner_->Free(ptr); }
  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    return inner_->AllocateHost(bytes);
  }
  void FreeHost(void* ptr) override { inner_->FreeHost(ptr); }
  absl::Status CopyToDevice(void* dst, const void* host_src, size_t bytes) override {
    return inner_->CopyToDevice(dst, host_src, bytes);
  }
  absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) override {
    return inner_->CopyToHost(host_dst, src, bytes);
  }
  void CopyToDeviceAsync(void* dst, const void* host_src, size_t bytes) override {
    inner_->CopyToDeviceAsync(dst, host_src, bytes);
  }
  void CopyToHostAsync(void* host_dst, const void* src, size_t bytes) override {
    inner_->CopyToHostAsync(host_dst, src, bytes);
  }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  absl::StatusOr<std::unique_ptr<OpsEvent>> RecordEvent() override {
    return inner_->RecordEvent();
  }
  void* native_stream() override { return inner_->native_stream(); }

  void Copy(float* dst, const float* src, int64_t n) override {
    Held h(this);
    inner_->Copy(dst, src, n);
  }
  void GemmStrided(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const float* a, int lda, const float* b, int ldb, float beta, float* c,
                   int ldc) override {
    Held h(this);
    inner_->GemmStrided(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void BiasAdd(float* y, const float* bias, int outer, int channels, int inner) override {
    Held h(this);
    inner_->BiasAdd(y, bias, outer, channels, inner);
  }
  void BiasBroadcast(float* y, const float* bias, int outer, int channels,
                     int inner) override {
    Held h(this);
    inner_->BiasBroadcast(y, bias, outer, channels, inner);
  }
  void BiasGrad(const float* dy, float* db, int outer, int channels, int inner,
                bool accumulate) override {
    Held h(this);
    inner_->BiasGrad(dy, db, outer, channels, inner, accumulate);
  }
  void ReluForward(const float* x, float* y, int64_t n) override {
    Held h(this);
    inner_->ReluForward(x, y, n);
  }
  void ReluBackward(const float* y, const float* dy, float* dx, int64_t n) override {
    Held h(this);
    inner_->ReluBackward(y, dy, dx, n);
  }
  void SoftmaxXentForward(const float* logits, const int32_t* labels, int batch, int classes,
                          float* probs, double* loss_sum, int64_t* correct) override {
    Held h(this);
    inner_->SoftmaxXentForward(logits, labels, batch, classes, probs, loss_sum, correct);
  }
  void SoftmaxXentBackward(const float* probs, const int32_t* labels, int batch, int classes,
                           float scale, float* dlogits) override {
    Held h(this);
    inner_->SoftmaxXentBackward(probs, labels, batch, classes, scale, dlogits);
  }
  void Im2Col(const float* x, int channels, int batch, int height, int width, int kernel,
              int pad, int stride, float* col) override {
    Held h(this);
    inner_->Im2Col(x, channels, batch, height, width, kernel, pad, stride, col);
  }
  void Col2Im(const float* col, int channels, int batch, int height, int width, int kernel,
              int pad, int stride, float* dx) override {
    Held h(this);
    inner_->Col2Im(col, channels, batch, height, width, kernel, pad, stride, dx);
  }
  void MaxPool2x2Forward(const float* x, int planes, int height, int width, float* y,
                         int32_t* argmax) override {
    Held h(this);
    inner_->MaxPool2x2Forward(x, planes, height, width, y, argmax);
  }
  void MaxPool2x2Backward(const float* dy, const int32_t* argmax, int planes, int height,
                          int width, float* dx) override {
    Held h(this);
    inner_->MaxPool2x2Backward(dy, argmax, planes, height, width, dx);
  }
  void SwapAxes01(const float* in, int d0, int d1, int inner, float* out) override {
    Held h(this);
    inner_->SwapAxes01(in, d0, d1, inner, out);
  }
  void SgdUpdate(float* params, float* grads, float* momentum_buf, int64_t n,
                 const SgdHyper& hyper, bool zero_grads) override {
    Held h(this);
    inner_->SgdUpdate(params, grads, momentum_buf, n, hyper, zero_grads);
  }
  void SgdUpdateCarried(float* params, float* acc, int64_t n, const SgdHyper& hyper) override {
    Held h(this);
    inner_->SgdUpdateCarried(params, acc, n, hyper);
  }
  void Fill(float* x, int64_t n, float value) override {
    Held h(this);
    inner_->Fill(x, n, value);
  }
  void Scale(float* x, int64_t n, float alpha) override {
    Held h(this);
    inner_->Scale(x, n, alpha);
  }
  void Axpy(int64_t n, float alpha, const float* x, float* y) override {
    Held h(this);
    inner_->Axpy(n, alpha, x, y);
  }

 private:
  // Holds the lock for one op call, counting the wait.
  class Held {
   public:
    explicit Held(InterpreterLockOps* ops) : lock_(ops->lock_.get()) {
      if (lock_->mu.TryLock()) return;
      const int64_t t0 = NowMicros();
      lock_->mu.Lock();
      lock_->wait_us.fetch_add(NowMicros() - t0, std::memory_order_relaxed);
    }
    ~Held() { lock_->mu.Unlock(); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;

   private:
    InterpreterLock* const lock_;
  };

  const std::unique_ptr<Ops> inner_;
  const std::shared_ptr<InterpreterLock> lock_;
};

// The model `config` names over `ops`, for `data`'s inputs.
absl::StatusOr<std::unique_ptr<Model>> ModelFor(const RunConfig& config,
                                                const DatasetSplits& data, Ops* ops) {
  const Dataset& train = *data.train;
  return Model::Create(config.model(), Shape{train.channels(), train.height(), train.width()},
                       train.num_classes(), ops);
}

}  // namespace

std::unique_ptr<Ops> WithInterpreterLock(std::unique_ptr<Ops> ops,
                                         std::shared_ptr<InterpreterLock> lock) {
  return std::make_unique<InterpreterLockOps>(std::move(ops), std::move(lock));
}

DataParallelStrategy::DataParallelStrategy(Replica* master,
                                           std::unique_ptr<LocalSgdStrategy> sgd,
                                           std::shared_ptr<InterpreterLock> lock)
    : master_(master),
      sgd_(std::move(sgd)),
      lock_(std::move(lock)),
      master_step_(master->model.get(), master->ops.get(), master->data.train.get()) {}

DataParallelStrategy::~DataParallelStrategy() = default;

absl::StatusOr<std::unique_ptr<DataParallelStrategy>> DataParallelStrategy::Create(
    const RunConfig& config, Replica* master) {
  if (config.strategy() != "dp") {
    return absl::InvalidArgumentError(
        absl::StrCat("DataParallelStrategy needs strategy \"dp\", got \"", config.strategy(), "\""));
  }
  RINGSIDE_RETURN_IF_ERROR(ValidateRunConfig(config));
  if (master->ops->kind() != DeviceKind::kCpu) {
    return absl::InvalidArgumentError("--strategy=dp trains on the CPU only");
  }
  RINGSIDE_ASSIGN_OR_RETURN(GemmPrecision precision, ParseGemmPrecision(config.precision()));
  std::shared_ptr<InterpreterLock> lock;
  if (config.dp_interpreter_lock()) {
    lock = std::make_shared<InterpreterLock>();
    // The master's model must compute through the locked ops too: rebuild it over them
    // (its parameters are not initialised yet).
    master->model.reset();
    master->ops = WithInterpreterLock(std::move(master->ops), lock);
    RINGSIDE_ASSIGN_OR_RETURN(master->model, ModelFor(config, master->data, master->ops.get()));
  }
  RINGSIDE_ASSIGN_OR_RETURN(
      std::unique_ptr<LocalSgdStrategy> sgd,
      LocalSgdStrategy::Create(master->hyper, master->model.get(), master->ops.get()));
  std::unique_ptr<DataParallelStrategy> dp(
      new DataParallelStrategy(master, std::move(sgd), lock));
  for (int r = 1; r < config.world_size(); ++r) {
    auto slot = std::make_unique<ReplicaSlot>();
    // OpenBLAS's thread count is process-wide: every replica sets the same one.
    RINGSIDE_ASSIGN_OR_RETURN(slot->ops, NewOps("cpu", 0, config.threads(), precision));
    if (lock != nullptr) slot->ops = WithInterpreterLock(std::move(slot->ops), lock);
    RINGSIDE_ASSIGN_OR_RETURN(slot->model, ModelFor(config, master->data, slot->ops.get()));
    slot->step = std::make_unique<LocalStep>(slot->model.get(), slot->ops.get(),
                                             master->data.train.get());
    slot->thread = std::make_unique<TaskThread>();
    dp->replicas_.push_back(std::move(slot));
  }
  return dp;
}

absl::Status DataParallelStrategy::Run(absl::Span<const int64_t> samples, float loss_scale,
                                       StepMetrics* m, TraceWriter* trace) {
  Model& master = *master_->model;
  Ops& master_ops = *master_->ops;
  const int64_t n = static_cast<int64_t>(samples.size());
  const int64_t num_params = master.num_params();
  // torch.chunk: ceil(n / R) samples a slice; a short step may leave replicas idle
  // (nn.DataParallel then replicates to the used ones only).
  const int64_t chunk = (n + replicas() - 1) / replicas();
  const int active = static_cast<int>((n + chunk - 1) / chunk);
  auto slice_of = [&](int r) {
    const int64_t begin = r * chunk;
    return samples.subspan(begin, std::min(chunk, n - begin));
  };
  if (trace != nullptr && !tracks_named_) {
    for (int r = 1; r < replicas(); ++r) trace->NameTrack(r, absl::StrCat("replica ", r));
    tracks_named_ = true;
  }
  StepTally tally;
  tally.lock_wait0 = lock_ != nullptr ? lock_->wait_us.load() : 0;

  // 1. Replicate: the master's parameters into every used replica.
  tally.t_rep = NowMicros();
  for (int r = 1; r < active; ++r) {
    ReplicaSlot& s = *replicas_[r - 1];
    s.ops->Copy(s.model->params(), master.params(), num_params);
  }
  tally.t_scatter = NowMicros();
  tally.moved = (active - 1) * num_params * static_cast<int64_t>(sizeof(float));

  // 2. Scatter: each replica's slice, gathered and loaded by the master.
  StepMetrics scratch;
  RINGSIDE_RETURN_IF_ERROR(master_step_.Prefetch(slice_of(0), &scratch, nullptr));
  for (int r = 1; r < active; ++r) {
    ReplicaSlot& s = *replicas_[r - 1];
    s.slice = slice_of(r);
    RINGSIDE_RETURN_IF_ERROR(s.step->Prefetch(s.slice, &scratch, nullptr));
  }
  tally.t_apply = NowMicros();

  // 3. Parallel apply and 4. gather.
  RINGSIDE_RETURN_IF_ERROR(ApplyAndGather(slice_of(0), active, loss_scale, trace, &tally));
  tally.t_reduce = NowMicros();

  // 5. Reduce: the replicas' gradients into the master's.
  for (int r = 1; r < active; ++r) {
    master_ops.Axpy(num_params, 1.0f, replicas_[r - 1]->model->grads(), master.grads());
  }
  tally.t_end = NowMicros();

  RecordStep(n, tally, m, trace);
  return absl::OkStatus();
}

absl::Status DataParallelStrategy::ApplyAndGather(absl::Span<const int64_t> master_slice,
                                                  int active, float loss_scale,
                                                  TraceWriter* trace, StepTally* tally) {
  // 3. Parallel apply: replicas 1..active-1 on their threads, the master here. The
  // master's backward adds onto its gradients (which hold the momentum state, see
  // LocalSgdStrategy); the others overwrite theirs.
  for (int r = 1; r < active; ++r) {
    ReplicaSlot* s = replicas_[r - 1].get();
    s->m.Clear();
    s->thread->Run([s, loss_scale] {
      HookTimes unused;
      s->start_us = NowMicros();
      const int64_t cpu0 = ThreadCpuMicros();
      s->status = s->step->Run(s->slice, loss_scale, StepHooks{}, /*announce=*/false,
                               /*accumulate_grads=*/false, &s->m, nullptr, &unused);
      s->cpu_us = ThreadCpuMicros() - cpu0;
    });
  }
  StepMetrics& own = tally->own;
  HookTimes unused;
  const int64_t master_cpu0 = ThreadCpuMicros();
  absl::Status status = master_step_.Run(master_slice, loss_scale, StepHooks{},
                                         /*announce=*/false, /*accumulate_grads=*/true, &own,
                                         trace, &unused);
  tally->t_wait = NowMicros();
  tally->apply_cpu_us = ThreadCpuMicros() - master_cpu0;
  // 4. Gather: every replica's loss and counts (after its thread is done).
  tally->loss_sum = static_cast<double>(own.loss()) * own.samples();
  tally->correct = own.correct();
  for (int r = 1; r < active; ++r) {
    ReplicaSlot& s = *replicas_[r - 1];
    s.thread->Wait();
    if (status.ok() && !s.status.ok()) {
      status = Annotate(s.status, absl::StrCat("replica ", r));
    }
    tally->apply_cpu_us += s.cpu_us;
    tally->loss_sum += static_cast<double>(s.m.loss()) * s.m.samples();
    tally->correct += s.m.correct();
    if (trace != nullptr) {
      // LocalStep::Run ran forward then backward from start_us (its batch was loaded).
      const int64_t f = static_cast<int64_t>(s.m.forward_ms() * 1e3);
      const int64_t b = static_cast<int64_t>(s.m.backward_ms() * 1e3);
      trace->Span("forward", kCatCompute, r, s.start_us, f);
      trace->Span("backward", kCatCompute, r, s.start_us + f, b);
    }
  }
  return status;
}

void DataParallelStrategy::RecordStep(int64_t n, const StepTally& tally, StepMetrics* m,
                                      TraceWriter* trace) const {
  if (trace != nullptr) {
    trace->Span("replicate", kCatComm, kTrainingTrack, tally.t_rep,
                tally.t_scatter - tally.t_rep, {{"bytes", static_cast<double>(tally.moved)}});
    trace->Span("scatter", kCatData, kTrainingTrack, tally.t_scatter,
                tally.t_apply - tally.t_scatter);
    // The master's own forward and backward spans were drawn by its LocalStep.
    if (tally.t_reduce > tally.t_wait) {
      trace->Span("wait for replicas", kCatWait, kTrainingTrack, tally.t_wait,
                  tally.t_reduce - tally.t_wait);
    }
    trace->Span("reduce", kCatComm, kTrainingTrack, tally.t_reduce,
                tally.t_end - tally.t_reduce, {{"bytes", static_cast<double>(tally.moved)}});
  }
  m->set_replicate_ms((tally.t_scatter - tally.t_rep) / 1e3);
  m->set_scatter_ms((tally.t_apply - tally.t_scatter) / 1e3);
  m->set_data_ms(m->scatter_ms());
  m->set_apply_ms((tally.t_reduce - tally.t_apply) / 1e3);
  m->set_apply_cpu_ms(tally.apply_cpu_us / 1e3);
  m->set_forward_ms(tally.own.forward_ms());
  m->set_backward_ms(tally.own.backward_ms());
  m->set_reduce_ms((tally.t_end - tally.t_reduce) / 1e3);
  m->set_comm_ms(m->replicate_ms() + m->reduce_ms());
  m->set_bytes_sent(tally.moved);
  m->set_bytes_received(tally.moved);
  m->set_samples(static_cast<int32_t>(n));
  m->set_correct(static_cast<int32_t>(tally.correct));
  m->set_loss(static_cast<float>(tally.loss_sum / n));
  if (lock_ != nullptr) {
    m->set_emulated(true);
    m->set_lock_wait_ms((lock_->wait_us.load() - tally.lock_wait0) / 1e3);
  }
}

absl::Status DataParallelStrategy::FinishStep(const HookTimes& hook_times, StepMetrics* m,
                                              TraceWriter* trace) {
  // 6. One optimizer step on the master (its hooks never fired: it steps everything).
  RINGSIDE_RETURN_IF_ERROR(sgd_->FinishStep(hook_times, m, trace));
  records_.push_back(*m);
  return absl::OkStatus();
}

DataParallelPhases DataParallelStrategy::phases() const {
  DataParallelPhases p;
  p.steps = static_cast<int64_t>(records_.size());
  if (p.steps == 0) return p;
  // The median of one field over the steps (the mean of the middle two for an even count).
  const auto median = [this](double (StepMetrics::*field)() const) {
    std::vector<double> v;
    v.reserve(records_.size());
    for (const StepMetrics& r : records_) v.push_back((r.*field)());
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  p.replicate_ms = median(&StepMetrics::replicate_ms);
  p.scatter_ms = median(&StepMetrics::scatter_ms);
  p.apply_ms = median(&StepMetrics::apply_ms);
  p.forward_ms = median(&StepMetrics::forward_ms);
  p.backward_ms = median(&StepMetrics::backward_ms);
  p.reduce_ms = median(&StepMetrics::reduce_ms);
  p.update_ms = median(&StepMetrics::update_ms);
  for (const StepMetrics& r : records_) p.lock_wait_ms += r.lock_wait_ms();
  p.lock_wait_ms /= static_cast<double>(p.steps);
  return p;
}

absl::StatusOr<TrainResult> TrainDataParallel(const RunOptions& run, Replica* master,
                                              DataParallelStrategy* dp) {
  // The trainer sees one process training the global batch.
  RunOptions global = run;
  global.config.set_batch(run.config.batch() * dp->replicas());
  RINGSIDE_ASSIGN_OR_RETURN(
      std::unique_ptr<Trainer> trainer,
      Trainer::Create(TrainerOptionsFor(global, /*rank=*/0, /*world_size=*/1,
                                        /*emulated=*/dp->interpreter_lock()),
                      master->model.get(), master->ops.get(), &master->data, dp));
  return trainer->Run();
}

}  // namespace ringside
