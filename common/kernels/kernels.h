// Launchers of the CUDA backend's kernels (common/cuda_ops.cc is their one caller).
// Plain C++: cuda_ops.cc includes this without nvcc. Each launcher enqueues its
// kernel(s) on `stream` and returns cudaGetLastError() (the launch's error, if any);
// none waits for the device. Shapes and pointer rules are those of the matching
// Ops method (common/ops.h); every pointer is device memory. One .cu file per kernel
// family: elementwise.cu, bias.cu, softmax_xent.cu, im2col.cu, pooling.cu, sgd.cu.
#ifndef RINGSIDE_COMMON_KERNELS_KERNELS_H_
#define RINGSIDE_COMMON_KERNELS_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ringside {
namespace kernels {

// ---- elementwise.cu ----
cudaError_t Fill(float* x, int64_t n, float value, cudaStream_t stream);
cudaError_t Scale(float* x, int64_t n, float alpha, cudaStream_t stream);
cudaError_t Axpy(int64_t n, float alpha, const float* x, float* y, cudaStream_t stream);
cudaError_t ReluForward(const float* x, float* y, int64_t n, cudaStream_t stream);
cudaError_t ReluBackward(const float* y, const float* dy, float* dx, int64_t n,
                         cudaStream_t stream);
cudaError_t SwapAxes01(const float* in, int d0, int d1, int inner, float* out,
                       cudaStream_t stream);
// c [m rows of n floats, row stride ldc] = beta * c (beta == 0: zeros, c not read).
cudaError_t ScaleMatrix(float* c, int m, int n, int ldc, float beta, cudaStream_t stream);

// ---- bias.cu ----
cudaError_t BiasAdd(float* y, const float* bias, int outer, int channels, int inner,
                    cudaStream_t stream);
cudaError_t BiasBroadcast(float* y, const float* bias, int outer, int channels, int inner,
                          cudaStream_t stream);
// Deterministic: a fixed partition and summation order, no atomics.
cudaError_t BiasGrad(const float* dy, float* db, int outer, int channels, int inner,
                     bool accumulate, cudaStream_t stream);

// ---- softmax_xent.cu ----
// The batch's totals, written by SoftmaxXentForward into device memory.
struct XentTotals {
  double loss_sum;
  long long correct;
};
// probs as Ops::SoftmaxXentForward; row_loss [batch] and row_hit [batch] are scratch
// (device memory, at least max(batch, 1) elements); *totals receives the sums
// (deterministic order). batch may be 0 (totals are zeroed). Labels outside
// [0, classes) give a NaN loss for their row.
cudaError_t SoftmaxXentForward(const float* logits, const int32_t* labels, int batch,
                               int classes, float* probs, double* row_loss,
                               int32_t* row_hit, XentTotals* totals, cudaStream_t stream);
cudaError_t SoftmaxXentBackward(const float* probs, const int32_t* labels, int batch,
                                int classes, float scale, float* dlogits,
                                cudaStream_t stream);

// ---- im2col.cu ----
cudaError_t Im2Col(const float* x, int channels, int batch, int height, int width,
                   int kernel, int pad, int stride, float* col, cudaStream_t stream);
// Gathers per pixel in Im2Col's (ky, kx) order: no atomics, deterministic.
cudaError_t Col2Im(const float* col, int channels, int batch, int height, int width,
                   int kernel, int pad, int stride, float* dx, cudaStream_t stream);

// ---- pooling.cu ----
cudaError_t MaxPool2x2Forward(const float* x, int planes, int height, int width, float* y,
                              int32_t* argmax, cudaStream_t stream);
cudaError_t MaxPool2x2Backward(const float* dy, const int32_t* argmax, int planes,
                               int height, int width, float* dx, cudaStream_t stream);

// ---- sgd.cu ----
// Ops::SgdUpdate and Ops::SgdUpdateCarried, rounding each operation as the CPU
// backend does (compiled with -fmad=false): both give the same floats.
// nonfinite: SgdHyper::nonfinite (device memory or nullptr).
cudaError_t SgdUpdate(float* params, float* grads, float* momentum_buf, int64_t n, float lr,
                      float momentum, float weight_decay, bool nesterov, bool zero_grads,
                      float* nonfinite, cudaStream_t stream);
cudaError_t SgdUpdateCarried(float* params, float* acc, int64_t n, float lr, float momentum,
                             float weight_decay, float* nonfinite, cudaStream_t stream);
// Ops::FlagNonFinite.
cudaError_t FlagNonFinite(const float* x, int64_t n, float* flag, cudaStream_t stream);

}  // namespace kernels
}  // namespace ringside

#endif  // RINGSIDE_COMMON_KERNELS_KERNELS_H_
