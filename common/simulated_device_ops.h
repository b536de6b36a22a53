// Test support: the CPU backend dressed as a device backend, so that the code paths a
// GPU takes (device-ordered hooks, the stream contract of ops.h and
// ddp_ring/process_group.h) run, and are checked, on machines without one.
//
// SimulatedDeviceOps forwards every op to a CPU Ops object (so results are the CPU's,
// bit for bit) but reports DeviceKind::kCuda, a name "cuda:0" and a non-null
// native_stream(), and appends what a device backend would make the host wait for, or
// order, to a log: "sync" (Synchronize and the blocking copies), "event" (RecordEvent),
// "d2h async", "h2d async", and "sgd" (an optimizer step, SgdUpdate or
// SgdUpdateCarried). The log is shared with test doubles of other components (e.g. a
// process group that writes "issue 3"), so the test can check the order of both.
// Not thread-safe, like every Ops object; the log's lock lets another thread append.
#ifndef RINGSIDE_COMMON_SIMULATED_DEVICE_OPS_H_
#define RINGSIDE_COMMON_SIMULATED_DEVICE_OPS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/ops.h"

namespace ringside {

// An ordered record of events, appended to from any thread.
class EventLog {
 public:
  void Add(std::string entry) {
    absl::MutexLock lock(&mu_);
    entries_.push_back(std::move(entry));
  }
  std::vector<std::string> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(entries_, {});
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> entries_ ABSL_GUARDED_BY(mu_);
};

class SimulatedDeviceOps final : public Ops {
 public:
  // Borrows `log`, which must outlive this object.
  SimulatedDeviceOps(std::unique_ptr<Ops> cpu, EventLog* log) : cpu_(std::move(cpu)), log_(log) {}

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string name() const override { return "cuda:0"; }
  void* native_stream() override { return this; }

  absl::StatusOr<void*> Allocate(size_t bytes) override { return cpu_->Allocate(bytes); }
  void Free(void* ptr) override { cpu_->Free(ptr); }
  absl::StatusOr<void*> AllocateHost(size_t bytes) override { return cpu_->AllocateHost(bytes); }
  void FreeHost(void* ptr) override { cpu_->FreeHost(ptr); }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    log_->Add("sync");
    return cpu_->CopyToDevice(dst, src, bytes);
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    log_->Add("sync");
    return cpu_->CopyToHost(dst, src, bytes);
  }
  void CopyToDeviceAsync(void* dst, const void* src, size_t bytes) override {
    log_->Add("h2d async");
    cpu_->CopyToDeviceAsync(dst, src, bytes);
  }
  void CopyToHostAsync(void* dst, const void* src, size_t bytes) override {
    log_->Add("d2h async");
    cpu_->CopyToHostAsync(dst, src, bytes);
  }
  void Copy(float* dst, const float* src, int64_t n) override { cpu_->Copy(dst, src, n); }
  absl::Status Synchronize() override {
    log_->Add("sync");
    return cpu_->Synchronize();
  }
  absl::StatusOr<std::unique_ptr<OpsEvent>> RecordEvent() override {
    log_->Add("event");
    return cpu_->RecordEvent();
  }

  void GemmStrided(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                   int lda, const float* b, int ldb, float beta, float* c, int ldc) override {
    cpu_->GemmStrided(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void BiasAdd(float* y, const float* bias, int outer, int channels, int inner) override {
    cpu_->BiasAdd(y, bias, outer, channels, inner);
  }
  void BiasBroadcast(float* y, const float* bias, int outer, int channels, int inner) override {
    cpu_->BiasBroadcast(y, bias, outer, channels, inner);
  }
  void BiasGrad(const float* dy, float* db, int outer, int channels, int inner,
                bool accumulate) override {
    cpu_->BiasGrad(dy, db, outer, channels, inner, accumulate);
  }
  void ReluForward(const float* x, float* y, int64_t n) override { cpu_->ReluForward(x, y, n); }
  void ReluBackward(const float* y, const float* dy, float* dx, int64_t n) override {
    cpu_->ReluBackward(y, dy, dx, n);
  }
  void SoftmaxXentForward(const float* logits, const int32_t* labels, int batch, int classes,
                          float* probs, double* loss_sum, int64_t* correct) override {
    log_->Add("sync");  // The loss is read back to the host.
    cpu_->SoftmaxXentForward(logits, labels, batch, classes, probs, loss_sum, correct);
  }
  void SoftmaxXentBackward(const float* probs, const int32_t* labels, int batch, int classes,
                           float scale, float* dlogits) override {
    cpu_->SoftmaxXentBackward(probs, labels, batch, classes, scale, dlogits);
  }
  void Im2Col(const float* x, int channels, int batch, int height, int width, int kernel,
              int pad, int stride, float* col) override {
    cpu_->Im2Col(x, channels, batch, height, width, kernel, pad, stride, col);
  }
  void Col2Im(const float* col, int channels, int batch, int height, int width, int kernel,
              int pad, int stride, float* dx) override {
    cpu_->Col2Im(col, channels, batch, height, width, kernel, pad, stride, dx);
  }
  void MaxPool2x2Forward(const float* x, int planes, int height, int width, float* y,
                         int32_t* argmax) override {
    cpu_->MaxPool2x2Forward(x, planes, height, width, y, argmax);
  }
  void MaxPool2x2Backward(const float* dy, const int32_t* argmax, int planes, int height,
                          int width, float* dx) override {
    cpu_->MaxPool2x2Backward(dy, argmax, planes, height, width, dx);
  }
  void SwapAxes01(const float* in, int d0, int d1, int inner, float* out) override {
    cpu_->SwapAxes01(in, d0, d1, inner, out);
  }
  void SgdUpdate(float* params, float* grads, float* momentum_buf, int64_t n,
                 const SgdHyper& hyper, bool zero_grads) override {
    log_->Add("sgd");
    cpu_->SgdUpdate(params, grads, momentum_buf, n, hyper, zero_grads);
  }
  void SgdUpdateCarried(float* params, float* acc, int64_t n, const SgdHyper& hyper) override {
    log_->Add("sgd");
    cpu_->SgdUpdateCarried(params, acc, n, hyper);
  }
  void Fill(float* x, int64_t n, float value) override { cpu_->Fill(x, n, value); }
  void Scale(float* x, int64_t n, float alpha) override { cpu_->Scale(x, n, alpha); }
  void Axpy(int64_t n, float alpha, const float* x, float* y) override {
    cpu_->Axpy(n, alpha, x, y);
  }

 private:
  const std::unique_ptr<Ops> cpu_;
  EventLog* const log_;
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_SIMULATED_DEVICE_OPS_H_
