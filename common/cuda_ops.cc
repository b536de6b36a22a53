// The CUDA backend. Ownership: one device, one non-blocking stream and one cuBLAS handle
// per object, every op enqueued on that stream in call order. Errors: each launch's and
// each cuBLAS call's status is latched (the first one wins) and returned by the next
// Synchronize() or blocking copy, as ops.h promises. Not thread-safe (one object per
// thread of computation); each entry point makes its device current on the calling
// thread first, so the object may be used from any one thread at a time.
#include "common/cuda_ops.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "common/device.h"
#include "common/kernels/kernels.h"

namespace ringside {
namespace {

// Set-up errors are tagged "not in a distributed job" (rank -1): the callers that
// know the rank (DDP, PS) annotate the Status they pass on.
constexpr int kNoRank = -1;

cublasComputeType_t ComputeTypeFor(GemmPrecision precision) {
  switch (precision) {
    case GemmPrecision::kTf32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    case GemmPrecision::kBf16:
      return CUBLAS_COMPUTE_32F_FAST_16BF;
    case GemmPrecision::kFp32:
      break;
  }
  return CUBLAS_COMPUTE_32F;
}

// An event recorded on a CudaOps stream. Owns the cudaEvent_t. Thread-safe: CUDA events
// may be waited for from any thread; each call makes the event's device current on the
// calling thread first.
class CudaEvent final : public OpsEvent {
 public:
  CudaEvent(int device, cudaEvent_t event) : device_(device), event_(event) {}
  ~CudaEvent() override {
    cudaSetDevice(device_);
    cudaEventDestroy(event_);
  }

  absl::Status Wait() override {
    RINGSIDE_CUDA_RETURN_IF_ERROR(kNoRank, cudaSetDevice(device_));
    RINGSIDE_CUDA_RETURN_IF_ERROR(kNoRank, cudaEventSynchronize(event_));
    return absl::OkStatus();
  }

  bool Done() override {
    if (cudaSetDevice(device_) != cudaSuccess) return false;
    return cudaEventQuery(event_) == cudaSuccess;
  }

 private:
  const int device_;
  cudaEvent_t const event_;
};

class CudaOps final : public Ops {
 public:
  CudaOps(int device, GemmPrecision precision)
      : device_(device), compute_(ComputeTypeFor(precision)) {}

  ~CudaOps() override {
    if (stream_ != nullptr) {
      cudaSetDevice(device_);
      cudaStreamSynchronize(stream_);
    }
    cudaFree(row_loss_);
    cudaFree(row_hit_);
    cudaFree(totals_device_);
    cudaFreeHost(totals_host_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Creates the stream, the cuBLAS handle and the loss read-back buffers.
  absl::Status Init() {
    RINGSIDE_CUDA_RETURN_IF_ERROR(kNoRank, cudaSetDevice(device_));
    RINGSIDE_CUDA_RETURN_IF_ERROR(kNoRank,
                                  cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    RINGSIDE_CUBLAS_RETURN_IF_ERROR(kNoRank, cublasCreate(&cublas_));
    RINGSIDE_CUBLAS_RETURN_IF_ERROR(kNoRank, cublasSetStream(cublas_, stream_));
    // FP32 stays FP32 (no TF32 behind the caller's back); the faster modes are chosen
    // per call through the compute type.
    RINGSIDE_CUBLAS_RETURN_IF_ERROR(kNoRank, cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    RINGSIDE_CUDA_RETURN_IF_ERROR(
        kNoRank, cudaMalloc(reinterpret_cast<void**>(&totals_device_), sizeof(kernels::XentTotals)));
    RINGSIDE_CUDA_RETURN_IF_ERROR(
        kNoRank, cudaMallocHost(reinterpret_cast<void**>(&totals_host_), sizeof(kernels::XentTotals)));
    return absl::OkStatus();
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string name() const override { return absl::StrCat("cuda:", device_); }

  // ---- Memory. ----
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    Use();
    void* ptr = nullptr;
    // cudaMalloc aligns to at least 256 bytes; 0 bytes still gets a real block.
    const cudaError_t err = cudaMalloc(&ptr, std::max<size_t>(bytes, 1));
    if (err != cudaSuccess) {
      cudaGetLastError();  // Not sticky: clear it so no later launch reports it.
      return OutOfMemory("Allocate", bytes, err);
    }
    return ptr;
  }

  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    Use();
    Latch(cudaFree(ptr), "cudaFree");
  }

  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    Use();
    void* ptr = nullptr;
    const cudaError_t err = cudaMallocHost(&ptr, std::max<size_t>(bytes, 1));
    if (err != cudaSuccess) {
      cudaGetLastError();
      return OutOfMemory("AllocateHost (page-locked host memory)", bytes, err);
    }
    return ptr;
  }

  void FreeHost(void* ptr) override {
    if (ptr == nullptr) return;
    Use();
    Latch(cudaFreeHost(ptr), "cudaFreeHost");
  }

  absl::Status CopyToDevice(void* dst, const void* host_src, size_t bytes) override {
    Use();
    if (bytes > 0) {
      Latch(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync(host to device)");
    }
    return Synchronize();
  }

  absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) override {
    Use();
    if (bytes > 0) {
      Latch(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync(device to host)");
    }
    return Synchronize();
  }

  void CopyToDeviceAsync(void* dst, const void* host_src, size_t bytes) override {
    if (bytes == 0) return;
    Use();
    Latch(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync(host to device, enqueued)");
  }

  void CopyToHostAsync(void* host_dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    Use();
    Latch(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync(device to host, enqueued)");
  }

  void Copy(float* dst, const float* src, int64_t n) override {
    if (n <= 0 || dst == src) return;
    Use();
    Latch(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync(device to device)");
  }

  absl::Status Synchronize() override {
    Use();
    Latch(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    absl::Status status = std::move(latched_);
    latched_ = absl::OkStatus();
    return status;
  }

  absl::StatusOr<std::unique_ptr<OpsEvent>> RecordEvent() override {
    RINGSIDE_CUDA_RETURN_IF_ERROR(kNoRank, cudaSetDevice(device_));
    cudaEvent_t event = nullptr;
    // Blocking sync: a thread that waits for it sleeps instead of spinning on a core
    // the training thread may need. No timing: cheaper to record.
    RINGSIDE_CUDA_RETURN_IF_ERROR(
        kNoRank, cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync));
    if (cudaError_t err = cudaEventRecord(event, stream_); err != cudaSuccess) {
      cudaEventDestroy(event);
      return CudaError(err, "cudaEventRecord", __FILE__, __LINE__, kNoRank);
    }
    return std::unique_ptr<OpsEvent>(new CudaEvent(device_, event));
  }

  void* native_stream() override { return stream_; }

  // ---- Dense linear algebra. ----
  // Row-major C [m, n] = op(A) op(B) is column-major C^T [n, m] = op(B)^T op(A)^T, and a
  // row-major matrix with row length ld is, to cuBLAS, its column-major transpose with
  // leading dimension ld: so cuBLAS gets B before A, the same transpose flags, and
  // n and m swapped.
  void GemmStrided(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const float* a, int lda, const float* b, int ldb, float beta, float* c,
                   int ldc) override {
    if (m <= 0 || n <= 0) return;
    Use();
    if (k <= 0) {
      // C = beta * C; cuBLAS is not asked about k == 0 (the CPU backend does the same).
      Latch(kernels::ScaleMatrix(c, m, n, ldc, beta, stream_), "ScaleMatrix");
      return;
    }
    LatchCublas(cublasGemmEx(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                             trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_32F,
                             ldb, a, CUDA_R_32F, lda, &beta, c, CUDA_R_32F, ldc, compute_,
                             CUBLAS_GEMM_DEFAULT),
                "cublasGemmEx");
  }

  void BiasAdd(float* y, const float* bias, int outer, int channels, int inner) override {
    Use();
    Latch(kernels::BiasAdd(y, bias, outer, channels, inner, stream_), "BiasAdd");
  }

  void BiasBroadcast(float* y, const float* bias, int outer, int channels,
                     int inner) override {
    Use();
    Latch(kernels::BiasBroadcast(y, bias, outer, channels, inner, stream_), "BiasBroadcast");
  }

  void BiasGrad(const float* dy, float* db, int outer, int channels, int inner,
                bool accumulate) override {
    Use();
    Latch(kernels::BiasGrad(dy, db, outer, channels, inner, accumulate, stream_), "BiasGrad");
  }

  // ---- Activations and loss. ----
  void ReluForward(const float* x, float* y, int64_t n) override {
    Use();
    Latch(kernels::ReluForward(x, y, n, stream_), "ReluForward");
  }

  void ReluBackward(const float* y, const float* dy, float* dx, int64_t n) override {
    Use();
    Latch(kernels::ReluBackward(y, dy, dx, n, stream_), "ReluBackward");
  }

  // The one op that waits for the device: the batch's loss and hit count come back to
  // the host (ops.h). On a latched failure both are 0 and the next Synchronize()
  // reports it.
  void SoftmaxXentForward(const float* logits, const int32_t* labels, int batch,
                          int classes, float* probs, double* loss_sum,
                          int64_t* correct) override {
    Use();
    *loss_sum = 0;
    *correct = 0;
    if (!ReserveRows(batch)) return;
    Latch(kernels::SoftmaxXentForward(logits, labels, batch, classes, probs, row_loss_,
                                      row_hit_, totals_device_, stream_),
          "SoftmaxXentForward");
    Latch(cudaMemcpyAsync(totals_host_, totals_device_, sizeof(kernels::XentTotals),
                          cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync(loss read-back)");
    Latch(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(loss read-back)");
    if (!latched_.ok()) return;
    *loss_sum = totals_host_->loss_sum;
    *correct = totals_host_->correct;
  }

  void SoftmaxXentBackward(const float* probs, const int32_t* labels, int batch,
                           int classes, float scale, float* dlogits) override {
    Use();
    Latch(kernels::SoftmaxXentBackward(probs, labels, batch, classes, scale, dlogits, stream_),
          "SoftmaxXentBackward");
  }

  // ---- Convolution helpers. ----
  void Im2Col(const float* x, int channels, int batch, int height, int width, int kernel,
              int pad, int stride, float* col) override {
    Use();
    Latch(kernels::Im2Col(x, channels, batch, height, width, kernel, pad, stride, col, stream_),
          "Im2Col");
  }

  void Col2Im(const float* col, int channels, int batch, int height, int width,
              int kernel, int pad, int stride, float* dx) override {
    Use();
    Latch(kernels::Col2Im(col, channels, batch, height, width, kernel, pad, stride, dx, stream_),
          "Col2Im");
  }

  void MaxPool2x2Forward(const float* x, int planes, int height, int width, float* y,
                         int32_t* argmax) override {
    Use();
    Latch(kernels::MaxPool2x2Forward(x, planes, height, width, y, argmax, stream_),
          "MaxPool2x2Forward");
  }

  void MaxPool2x2Backward(const float* dy, const int32_t* argmax, int planes, int height,
                          int width, float* dx) override {
    Use();
    Latch(kernels::MaxPool2x2Backward(dy, argmax, planes, height, width, dx, stream_),
          "MaxPool2x2Backward");
  }

  void SwapAxes01(const float* in, int d0, int d1, int inner, float* out) override {
    Use();
    Latch(kernels::SwapAxes01(in, d0, d1, inner, out, stream_), "SwapAxes01");
  }

  // ---- Optimizer and BLAS-1. ----
  void SgdUpdate(float* params, float* grads, float* momentum_buf, int64_t n,
                 const SgdHyper& hyper, bool zero_grads) override {
    Use();
    Latch(kernels::SgdUpdate(params, grads, momentum_buf, n, hyper.lr, hyper.momentum,
                             hyper.weight_decay, hyper.nesterov, zero_grads, hyper.nonfinite,
                             stream_),
          "SgdUpdate");
  }

  void SgdUpdateCarried(float* params, float* acc, int64_t n, const SgdHyper& hyper) override {
    Use();
    Latch(kernels::SgdUpdateCarried(params, acc, n, hyper.lr, hyper.momentum,
                                    hyper.weight_decay, hyper.nonfinite, stream_),
          "SgdUpdateCarried");
  }

  void FlagNonFinite(const float* x, int64_t n, float* flag) override {
    Use();
    Latch(kernels::FlagNonFinite(x, n, flag, stream_), "FlagNonFinite");
  }

  void Fill(float* x, int64_t n, float value) override {
    Use();
    Latch(kernels::Fill(x, n, value, stream_), "Fill");
  }

  void Scale(float* x, int64_t n, float alpha) override {
    Use();
    Latch(kernels::Scale(x, n, alpha, stream_), "Scale");
  }

  void Axpy(int64_t n, float alpha, const float* x, float* y) override {
    Use();
    Latch(kernels::Axpy(n, alpha, x, y, stream_), "Axpy");
  }

 private:
  // Makes this object's device current on the calling thread (cheap when it already
  // is). A failure is latched like any other.
  void Use() { Latch(cudaSetDevice(device_), "cudaSetDevice"); }

  // Keeps the first failure, naming the op that met it and the device.
  void Latch(cudaError_t err, const char* what) {
    if (err == cudaSuccess || !latched_.ok()) return;
    latched_ = absl::InternalError(absl::StrCat(what, " on cuda:", device_, ": CUDA error ",
                                                static_cast<int>(err), " (",
                                                cudaGetErrorString(err), ")"));
  }
  void LatchCublas(cublasStatus_t err, const char* what) {
    if (err == CUBLAS_STATUS_SUCCESS || !latched_.ok()) return;
    latched_ = absl::InternalError(absl::StrCat(what, " on cuda:", device_, ": cuBLAS error ",
                                                static_cast<int>(err), " (",
                                                cublasGetStatusString(err), ")"));
  }

  absl::Status OutOfMemory(const char* what, size_t bytes, cudaError_t err) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        "CudaOps::", what, ": cannot allocate ", bytes, " bytes on cuda:", device_, " (",
        free_bytes >> 20, " MiB free of ", total_bytes >> 20, " MiB): ",
        cudaGetErrorString(err)));
  }

  // Grows the per-row scratch of SoftmaxXentForward to `batch` rows; false (and the
  // failure latched) when the device is out of memory.
  bool ReserveRows(int batch) {
    if (batch <= rows_reserved_) return true;
    cudaFree(row_loss_);
    cudaFree(row_hit_);
    row_loss_ = nullptr;
    row_hit_ = nullptr;
    rows_reserved_ = 0;
    if (cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&row_loss_), sizeof(double) * batch);
        err != cudaSuccess) {
      cudaGetLastError();
      if (latched_.ok()) latched_ = OutOfMemory("SoftmaxXentForward scratch", sizeof(double) * batch, err);
      return false;
    }
    if (cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&row_hit_), sizeof(int32_t) * batch);
        err != cudaSuccess) {
      cudaGetLastError();
      if (latched_.ok()) latched_ = OutOfMemory("SoftmaxXentForward scratch", sizeof(int32_t) * batch, err);
      return false;
    }
    rows_reserved_ = batch;
    return true;
  }

  const int device_;
  const cublasComputeType_t compute_;  // From the GemmPrecision (FP32, TF32 or BF16).
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  absl::Status latched_;
  // SoftmaxXentForward: per-row scratch, the totals on the device and their page-locked
  // host copy.
  double* row_loss_ = nullptr;
  int32_t* row_hit_ = nullptr;
  int rows_reserved_ = 0;
  kernels::XentTotals* totals_device_ = nullptr;
  kernels::XentTotals* totals_host_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Ops>> NewCudaOps(int device, GemmPrecision precision) {
  const DeviceInfo info = DetectDevices();
  if (info.gpu_count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--device=cuda: no usable GPU on this machine (", info.detail, ")"));
  }
  if (device < 0 || device >= info.gpu_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device=cuda:", device, ": this machine has ", info.gpu_count, " GPU(s), cuda:0",
        info.gpu_count > 1 ? absl::StrCat("..cuda:", info.gpu_count - 1) : std::string()));
  }
  auto ops = std::make_unique<CudaOps>(device, precision);
  if (absl::Status s = ops->Init(); !s.ok()) return s;
  return std::unique_ptr<Ops>(std::move(ops));
}

}  // namespace ringside
