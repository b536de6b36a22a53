// Elementwise kernels: fill, scale, axpy, ReLU, axis swap, matrix scaling.
#include "common/kernels/kernels.h"
#include "common/kernels/launch.cuh"

namespace ringside {
namespace kernels {
namespace {

__global__ void FillKernel(float* x, int64_t n, float value) {
  RINGSIDE_GRID_STRIDE(i, n) x[i] = value;
}

__global__ void ScaleKernel(float* x, int64_t n, float alpha) {
  RINGSIDE_GRID_STRIDE(i, n) x[i] *= alpha;
}

__global__ void AxpyKernel(int64_t n, float alpha, const float* __restrict__ x,
                           float* __restrict__ y) {
  RINGSIDE_GRID_STRIDE(i, n) y[i] += alpha * x[i];
}

// NaN kept NaN, as the CPU twin. y may alias x: each thread reads and writes its own
// index only.
__global__ void ReluForwardKernel(const float* x, float* y, int64_t n) {
  RINGSIDE_GRID_STRIDE(i, n) {
    const float v = x[i];
    y[i] = v <= 0.0f ? 0.0f : v;
  }
}

// dx may alias dy: same-index access only.
__global__ void ReluBackwardKernel(const float* y, const float* dy, float* dx, int64_t n) {
  RINGSIDE_GRID_STRIDE(i, n) {
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

// out [d1, d0, inner] = in [d0, d1, inner]; one thread per output element, so writes
// are contiguous (reads are too whenever inner > 1).
__global__ void SwapAxes01Kernel(const float* __restrict__ in, int d0, int d1, int inner,
                                 float* __restrict__ out) {
  const int64_t n = static_cast<int64_t>(d0) * d1 * inner;
  RINGSIDE_GRID_STRIDE(idx, n) {
    const int64_t e = idx % inner;
    const int64_t rest = idx / inner;
    const int64_t i = rest % d0;  // Position along d0 (fastest of the two in `out`).
    const int64_t j = rest / d0;  // Position along d1.
    out[idx] = in[(i * d1 + j) * inner + e];
  }
}

__global__ void ScaleMatrixKernel(float* c, int m, int n, int ldc, float beta) {
  const int64_t total = static_cast<int64_t>(m) * n;
  RINGSIDE_GRID_STRIDE(idx, total) {
    float* p = c + (idx / n) * ldc + idx % n;
    *p = beta == 0.0f ? 0.0f : beta * *p;
  }
}

}  // namespace

cudaError_t Fill(float* x, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, value);
  return cudaGetLastError();
}

cudaError_t Scale(float* x, int64_t n, float alpha, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, alpha);
  return cudaGetLastError();
}

cudaError_t Axpy(int64_t n, float alpha, const float* x, float* y, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AxpyKernel<<<BlocksFor(n), kThreads, 0, stream>>>(n, alpha, x, y);
  return cudaGetLastError();
}

cudaError_t ReluForward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ReluForwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t ReluBackward(const float* y, const float* dy, float* dx, int64_t n,
                         cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ReluBackwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(y, dy, dx, n);
  return cudaGetLastError();
}

cudaError_t SwapAxes01(const float* in, int d0, int d1, int inner, float* out,
                       cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(d0) * d1 * inner;
  if (n <= 0) return cudaSuccess;
  SwapAxes01Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(in, d0, d1, inner, out);
  return cudaGetLastError();
}

cudaError_t ScaleMatrix(float* c, int m, int n, int ldc, float beta, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(m) * n;
  if (total <= 0) return cudaSuccess;
  ScaleMatrixKernel<<<BlocksFor(total), kThreads, 0, stream>>>(c, m, n, ldc, beta);
  return cudaGetLastError();
}

}  // namespace kernels
}  // namespace ringside
