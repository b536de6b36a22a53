// The ops interface: every numeric kernel the models and the optimizer need, written
// once per backend (cpu_ops: OpenBLAS; a CUDA twin: cuBLAS plus kernels). Models,
// layers and the optimizer only ever call these.
//
// Conventions:
// - Every float/int pointer passed to an op is memory of this backend (allocated with
//   Allocate(); host memory for the CPU backend, device memory for CUDA).
// - Tensors are dense and row-major; shapes are written [d0, d1, ...].
// - Convolution activations use the [C, B, H, W] layout ("channel-major batch"), so a
//   whole batch's convolution is one GEMM: W [Cout, Cin*k*k] x col [Cin*k*k, B*Ho*Wo].
// - Ops are enqueued in order and may run asynchronously (CUDA: one stream per Ops
//   object). They do not return a status: a backend latches the first failure and
//   reports it from Synchronize(). Invalid shapes are caller bugs (checked by the
//   layers), not runtime errors.
// - Host synchronisation: only Synchronize(), the blocking copies (CopyToDevice,
//   CopyToHost), OpsEvent::Wait and SoftmaxXentForward (whose loss and accuracy counts
//   are read back to the host) wait for the device. Every other op returns once it is enqueued, so a
//   training step waits for the device once, for its loss, plus once at its end.
// - Pointers must not overlap unless an op says it may alias.
// - An Ops object is not thread-safe; use one per thread of computation.
#ifndef RINGSIDE_COMMON_OPS_H_
#define RINGSIDE_COMMON_OPS_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringside {

enum class DeviceKind { kCpu, kCuda };

// How GEMMs round (the other ops are always FP32). kFp32 is the default everywhere and
// is comparable with the CPU backend within rounding; kTf32 (tensor cores with 10-bit
// mantissas) and kBf16 (operands rounded to bfloat16, FP32 accumulation) are explicit
// options of the CUDA backend for speed. The CPU backend computes FP32 for all three.
enum class GemmPrecision { kFp32, kTf32, kBf16 };

// Hyper-parameters of one fused SGD step (PyTorch torch.optim.SGD semantics with
// dampening 0): d = g + wd * p; buf = momentum * buf + d;
// d = nesterov ? d + momentum * buf : buf; p -= lr * d.  (momentum 0: p -= lr * d.)
//
// The optimizer state ringside keeps is the carried momentum term u = momentum * buf
// (PyTorch's momentum_buffer times momentum), stored at the end of each step:
//   v = u + d;  u = momentum * v;  p -= lr * (nesterov ? d + u : v).
// Rounded in this order it gives the same floats as torch's formula evaluated one
// operation at a time, and it lets a backward pass add the next gradient straight
// onto u (SgdUpdateCarried).
struct SgdHyper {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  // Numerical safety: when not null, one float of backend memory that the SGD pass
  // sets to 1 if any parameter it writes is non-finite (NaN or +-Inf: a non-finite
  // gradient, momentum or update, or one that overflowed), and otherwise leaves alone
  // (the caller zeroes it; several passes may share it). The check rides on the
  // update's own pass over the parameters: no extra memory traffic.
  float* nonfinite = nullptr;
};

// A point in an Ops object's queue (Ops::RecordEvent). Thread-safe.
class OpsEvent {
 public:
  virtual ~OpsEvent() = default;
  // Blocks until every op enqueued before the event is done; a device failure among
  // them (which the Ops object also reports from its next Synchronize) is returned.
  virtual absl::Status Wait() = 0;
  // True once Wait() would return at once.
  virtual bool Done() = 0;
};

class Ops {
 public:
  virtual ~Ops() = default;

  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;

  // ---- Memory. ----
  // Allocates `bytes` (64-byte aligned) of backend memory; never returns nullptr on OK.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // Frees memory from Allocate(). nullptr is a no-op.
  virtual void Free(void* ptr) = 0;
  // Host memory for staging transfers: page-locked on CUDA (so copies from it run
  // asynchronously at full speed), plain 64-byte aligned memory on the CPU. Never
  // returns nullptr on OK; FreeHost(nullptr) is a no-op.
  virtual absl::StatusOr<void*> AllocateHost(size_t bytes) = 0;
  virtual void FreeHost(void* ptr) = 0;
  // Host -> backend, backend -> host copies. Blocking: they wait for the ops enqueued
  // before them (and, on the first failure latched so far, return it).
  virtual absl::Status CopyToDevice(void* dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) = 0;
  // Host -> backend copy enqueued like an op: returns at once. host_src must be
  // AllocateHost memory and must not change until a later Synchronize() (or blocking
  // copy) has returned. The CPU backend copies at once.
  virtual void CopyToDeviceAsync(void* dst, const void* host_src, size_t bytes) = 0;
  // Backend -> host copy enqueued like an op: returns at once. host_dst must be
  // AllocateHost memory; it holds the data once an event recorded after this call
  // (RecordEvent) has completed, or after a later Synchronize(). The CPU backend copies
  // at once.
  virtual void CopyToHostAsync(void* host_dst, const void* src, size_t bytes) = 0;
  // Backend -> backend copy of n floats.
  virtual void Copy(float* dst, const float* src, int64_t n) = 0;
  // Blocks until every enqueued op is done; returns the first failure since the
  // previous call (and clears it).
  virtual absl::Status Synchronize() = 0;

  // ---- Ordering (the stream contract; ddp_ring/process_group.h states its half). ----
  // An event after every op enqueued so far: it completes when they are done. The
  // event may be waited for from any thread (e.g. a sender that pushes what
  // CopyToHostAsync brought back) while this object goes on enqueuing; it must not
  // outlive this object. CPU backend: complete at once.
  virtual absl::StatusOr<std::unique_ptr<OpsEvent>> RecordEvent() = 0;
  // The queue this object enqueues on, for libraries that enqueue device work of their
  // own and order it against these ops with their own events (the NCCL process group:
  // cudaEvent on this stream, cudaStreamWaitEvent on its own, and back). The CUDA
  // backend's cudaStream_t; nullptr for the CPU backend, whose ops are done when they
  // return, so that program order is all the order there is.
  virtual void* native_stream() { return nullptr; }

  // ---- Dense linear algebra. ----
  // C = alpha * op(A) * op(B) + beta * C.  op(A): [m, k] (A is stored [k, m] when
  // trans_a), op(B): [k, n] (B stored [n, k] when trans_b), C: [m, n]. beta == 0
  // overwrites C without reading it.
  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) {
    GemmStrided(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n,
                beta, c, n);
  }
  // The same on sub-matrices of larger row-major ones: lda, ldb and ldc are the stored
  // row lengths of a, b and c (at least the packed ones Gemm uses: trans_a ? m : k,
  // trans_b ? k : n, and n). E.g. rows [r0, r1) of A^T * B, with A stored [k, m], are
  // GemmStrided(true, false, r1 - r0, n, k, alpha, a + r0, m, b, n, beta, c + r0 * n, n).
  virtual void GemmStrided(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                           const float* a, int lda, const float* b, int ldb, float beta,
                           float* c, int ldc) = 0;

  // y [outer, channels, inner] += bias [channels] broadcast over outer and inner.
  // Linear layers: outer = batch, inner = 1. Convolutions ([C, B, H, W]): outer = 1,
  // channels = C, inner = B * H * W.
  virtual void BiasAdd(float* y, const float* bias, int outer, int channels,
                       int inner) = 0;
  // y [outer, channels, inner] = bias [channels] broadcast (overwrites y). Followed by
  // a Gemm with beta = 1 it adds the bias without a separate pass over y (and spares
  // BLAS the zeroing pass of beta = 0).
  virtual void BiasBroadcast(float* y, const float* bias, int outer, int channels,
                             int inner) = 0;
  // db [channels] = sum over outer and inner of dy [outer, channels, inner]; with
  // `accumulate`, db += that sum instead.
  virtual void BiasGrad(const float* dy, float* db, int outer, int channels, int inner,
                        bool accumulate) = 0;

  // ---- Activations and loss. ----
  // y [n] = max(x, 0). y may alias x.
  virtual void ReluForward(const float* x, float* y, int64_t n) = 0;
  // dx [n] = dy * (y > 0), where y is ReluForward's output. dx may alias dy.
  virtual void ReluBackward(const float* y, const float* dy, float* dx, int64_t n) = 0;
  // Numerically stable softmax cross-entropy over logits [batch, classes] with
  // labels [batch] in [0, classes). Writes probs [batch, classes] (the softmax), and
  // on the host: *loss_sum = sum over the batch of -log p[label] and *correct = number
  // of rows whose argmax of the logits equals the label (first index wins ties).
  // batch may be 0. probs may alias logits.
  virtual void SoftmaxXentForward(const float* logits, const int32_t* labels,
                                  int batch, int classes, float* probs,
                                  double* loss_sum, int64_t* correct) = 0;
  // dlogits [batch, classes] = scale * (probs - onehot(labels)). For the mean loss over
  // a global batch of G samples, scale = 1 / G. dlogits may alias probs.
  virtual void SoftmaxXentBackward(const float* probs, const int32_t* labels,
                                   int batch, int classes, float scale,
                                   float* dlogits) = 0;

  // ---- Convolution helpers, [C, B, H, W] layout. ----
  // Output size: Ho = (H + 2*pad - kernel) / stride + 1, likewise Wo.
  // col [C*kernel*kernel, B*Ho*Wo]: col[(c*k + ky)*k + kx][(b*Ho + oy)*Wo + ox] =
  //   x[c][b][oy*stride - pad + ky][ox*stride - pad + kx], or 0 outside the image.
  virtual void Im2Col(const float* x, int channels, int batch, int height, int width,
                      int kernel, int pad, int stride, float* col) = 0;
  // The adjoint of Im2Col: dx [C, B, H, W] = sum of every col entry that Im2Col read
  // from that pixel. Overwrites dx.
  virtual void Col2Im(const float* col, int channels, int batch, int height,
                      int width, int kernel, int pad, int stride, float* dx) = 0;
  // 2x2 max-pool, stride 2, over `planes` independent [height, width] planes (planes =
  // C * B). y [planes, height/2, width/2] (odd trailing row/column dropped, as
  // PyTorch). argmax [planes, height/2, width/2] receives the winning input offset
  // within its plane (first maximum wins ties).
  virtual void MaxPool2x2Forward(const float* x, int planes, int height, int width,
                                 float* y, int32_t* argmax) = 0;
  // dx [planes, height, width] = dy scattered to the argmax positions, 0 elsewhere.
  virtual void MaxPool2x2Backward(const float* dy, const int32_t* argmax, int planes,
                                  int height, int width, float* dx) = 0;
  // out [d1, d0, inner] = in [d0, d1, inner] with the first two axes swapped. Turns
  // [C, B, H*W] into [B, C, H*W] (flatten before a linear layer) and back.
  virtual void SwapAxes01(const float* in, int d0, int d1, int inner, float* out) = 0;

  // ---- Optimizer and BLAS-1. ----
  // One fused SGD step over n parameters (see SgdHyper). momentum_buf [n] holds the
  // carried term u; it is read and written only when hyper.momentum != 0 (may be
  // nullptr otherwise) and must start zeroed, which makes the first step equal
  // PyTorch's (which starts buf = d). With `zero_grads` the same pass also sets grads
  // to 0 (consuming them, so the next backward can accumulate into them without a
  // separate zeroing pass); otherwise grads are only read.
  virtual void SgdUpdate(float* params, float* grads, float* momentum_buf, int64_t n,
                         const SgdHyper& hyper, bool zero_grads) = 0;
  // The same step when the gradient was accumulated onto the carried term: on entry
  // acc [n] = u + g, on return acc = the next step's u (all zeros when momentum is 0).
  // v = acc + wd * p; p -= lr * v; acc = momentum * v. One buffer instead of two, so
  // a third less memory traffic than SgdUpdate; with weight decay 0 and a gradient
  // added in one rounding it gives SgdUpdate's result bit for bit, otherwise within
  // rounding. Plain momentum only: Nesterov needs d apart from u.
  virtual void SgdUpdateCarried(float* params, float* acc, int64_t n,
                                const SgdHyper& hyper) = 0;
  // Numerical safety: *flag (one float of backend memory) = 1 if any of x [n] is NaN or
  // +-Inf; otherwise *flag is left alone (the caller zeroes it). Enqueued like an op.
  // One read of x. The default (for decorators that forward compute to another
  // backend) copies x to the host and back the flag; CPU and CUDA override it.
  virtual void FlagNonFinite(const float* x, int64_t n, float* flag) {
    std::vector<float> host(static_cast<size_t>(n));
    if (n <= 0 || !CopyToHost(host.data(), x, host.size() * sizeof(float)).ok()) return;
    for (float v : host) {
      if (!std::isfinite(v)) {
        const float one = 1.0f;
        CopyToDevice(flag, &one, sizeof(one)).IgnoreError();  // Its own failure: latched.
        return;
      }
    }
  }
  // x [n] = value.
  virtual void Fill(float* x, int64_t n, float value) = 0;
  // x [n] *= alpha.
  virtual void Scale(float* x, int64_t n, float alpha) = 0;
  // y [n] += alpha * x.
  virtual void Axpy(int64_t n, float alpha, const float* x, float* y) = 0;
};

// Which of a backend's memories an OpsArray owns: backend memory (Allocate) or
// staging host memory (AllocateHost).
enum class OpsMemory { kBackend, kHostStaging };

// Owns `n` elements of T in memory M of an Ops backend. Move-only. Not thread-safe.
template <typename T, OpsMemory M>
class OpsArray {
 public:
  OpsArray() = default;
  ~OpsArray() { Reset(); }
  OpsArray(OpsArray&& other) noexcept { *this = std::move(other); }
  OpsArray& operator=(OpsArray&& other) noexcept {
    if (this != &other) {
      Reset();
      ops_ = other.ops_;
      data_ = other.data_;
      size_ = other.size_;
      other.ops_ = nullptr;
      other.data_ = nullptr;
      other.size_ = 0;
    }
    return *this;
  }
  OpsArray(const OpsArray&) = delete;
  OpsArray& operator=(const OpsArray&) = delete;

  // Allocates n elements (contents undefined). `ops` must outlive the array.
  static absl::StatusOr<OpsArray> Create(Ops* ops, int64_t n) {
    OpsArray array;
    array.ops_ = ops;
    array.size_ = n;
    if (n > 0) {
      const size_t bytes = static_cast<size_t>(n) * sizeof(T);
      absl::StatusOr<void*> ptr =
          M == OpsMemory::kBackend ? ops->Allocate(bytes) : ops->AllocateHost(bytes);
      if (!ptr.ok()) return ptr.status();
      array.data_ = static_cast<T*>(*ptr);
    }
    return array;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  void Reset() {
    if (ops_ != nullptr && data_ != nullptr) {
      if (M == OpsMemory::kBackend) {
        ops_->Free(data_);
      } else {
        ops_->FreeHost(data_);
      }
    }
    data_ = nullptr;
    size_ = 0;
  }

  Ops* ops_ = nullptr;
  T* data_ = nullptr;
  int64_t size_ = 0;
};

// Backend memory (device memory on a GPU), and staging host memory (page-locked on a
// GPU) that CopyToDeviceAsync reads from.
template <typename T>
using DeviceArray = OpsArray<T, OpsMemory::kBackend>;
template <typename T>
using HostArray = OpsArray<T, OpsMemory::kHostStaging>;

}  // namespace ringside

#endif  // RINGSIDE_COMMON_OPS_H_
