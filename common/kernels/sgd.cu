// The fused SGD steps (Ops::SgdUpdate, Ops::SgdUpdateCarried) and Ops::FlagNonFinite. Each line rounds as the
// CPU backend's loops do (this file is compiled with -fmad=false: no fused
// multiply-adds), which in turn round as torch.optim.SGD does.
#include "common/kernels/kernels.h"
#include "common/kernels/launch.cuh"

namespace ringside {
namespace kernels {
namespace {

struct Hyper {
  float lr, momentum, weight_decay;
  float* nonfinite;  // Ops SgdHyper::nonfinite: set to 1 on a non-finite parameter.
};

// Numerical safety: each thread remembers whether a parameter it wrote is non-finite
// and, if so, sets the flag once at its end (every writer writes the same 1).
__device__ __forceinline__ void Report(bool bad, float* nonfinite) {
  if (bad && nonfinite != nullptr) *nonfinite = 1.0f;
}

__global__ void FlagNonFiniteKernel(const float* __restrict__ x, int64_t n, float* flag) {
  bool bad = false;
  RINGSIDE_GRID_STRIDE(i, n) { bad |= !isfinite(x[i]); }
  Report(bad, flag);
}

__global__ void SgdPlainKernel(float* __restrict__ p, float* __restrict__ g, int64_t n,
                               Hyper h, bool zero_grads) {
  bool bad = false;
  RINGSIDE_GRID_STRIDE(i, n) {
    p[i] -= h.lr * (g[i] + h.weight_decay * p[i]);
    bad |= !isfinite(p[i]);
    if (zero_grads) g[i] = 0.0f;
  }
  Report(bad, h.nonfinite);
}

__global__ void SgdNesterovKernel(float* __restrict__ p, float* __restrict__ g,
                                  float* __restrict__ buf, int64_t n, Hyper h,
                                  bool zero_grads) {
  bool bad = false;
  RINGSIDE_GRID_STRIDE(i, n) {
    const float d = g[i] + h.weight_decay * p[i];
    const float u = h.momentum * (buf[i] + d);
    buf[i] = u;
    p[i] -= h.lr * (d + u);
    bad |= !isfinite(p[i]);
    if (zero_grads) g[i] = 0.0f;
  }
  Report(bad, h.nonfinite);
}

__global__ void SgdMomentumKernel(float* __restrict__ p, float* __restrict__ g,
                                  float* __restrict__ buf, int64_t n, Hyper h,
                                  bool zero_grads) {
  bool bad = false;
  RINGSIDE_GRID_STRIDE(i, n) {
    const float v = buf[i] + (g[i] + h.weight_decay * p[i]);
    buf[i] = h.momentum * v;
    p[i] -= h.lr * v;
    bad |= !isfinite(p[i]);
    if (zero_grads) g[i] = 0.0f;
  }
  Report(bad, h.nonfinite);
}

__global__ void SgdCarriedKernel(float* __restrict__ p, float* __restrict__ acc, int64_t n,
                                 Hyper h) {
  bool bad = false;
  RINGSIDE_GRID_STRIDE(i, n) {
    const float v = acc[i] + h.weight_decay * p[i];
    acc[i] = h.momentum * v;
    p[i] -= h.lr * v;
    bad |= !isfinite(p[i]);
  }
  Report(bad, h.nonfinite);
}

}  // namespace

cudaError_t SgdUpdate(float* params, float* grads, float* momentum_buf, int64_t n, float lr,
                      float momentum, float weight_decay, bool nesterov, bool zero_grads,
                      float* nonfinite, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const Hyper h{lr, momentum, weight_decay, nonfinite};
  if (momentum == 0.0f) {
    SgdPlainKernel<<<BlocksFor(n), kThreads, 0, stream>>>(params, grads, n, h, zero_grads);
  } else if (nesterov) {
    SgdNesterovKernel<<<BlocksFor(n), kThreads, 0, stream>>>(params, grads, momentum_buf, n,
                                                             h, zero_grads);
  } else {
    SgdMomentumKernel<<<BlocksFor(n), kThreads, 0, stream>>>(params, grads, momentum_buf, n,
                                                             h, zero_grads);
  }
  return cudaGetLastError();
}

cudaError_t SgdUpdateCarried(float* params, float* acc, int64_t n, float lr, float momentum,
                             float weight_decay, float* nonfinite, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SgdCarriedKernel<<<BlocksFor(n), kThreads, 0, stream>>>(
      params, acc, n, Hyper{lr, momentum, weight_decay, nonfinite});
  return cudaGetLastError();
}

cudaError_t FlagNonFinite(const float* x, int64_t n, float* flag, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FlagNonFiniteKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, flag);
  return cudaGetLastError();
}

}  // namespace kernels
}  // namespace ringside
