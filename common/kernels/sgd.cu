// The fused SGD steps (Ops::SgdUpdate, Ops::SgdUpdateCarried). Each line rounds as the
// CPU backend's loops do (this file is compiled with -fmad=false: no fused
// multiply-adds), which in turn round as torch.optim.SGD does.
#include "common/kernels/kernels.h"
#include "common/kernels/launch.cuh"

namespace ringside {
namespace kernels {
namespace {

struct Hyper {
  float lr, momentum, weight_decay;
};

__global__ void SgdPlainKernel(float* __restrict__ p, float* __restrict__ g, int64_t n,
                               Hyper h, bool zero_grads) {
  RINGSIDE_GRID_STRIDE(i, n) {
    p[i] -= h.lr * (g[i] + h.weight_decay * p[i]);
    if (zero_grads) g[i] = 0.0f;
  }
}

__global__ void SgdNesterovKernel(float* __restrict__ p, float* __restrict__ g,
                                  float* __restrict__ buf, int64_t n, Hyper h,
                                  bool zero_grads) {
  RINGSIDE_GRID_STRIDE(i, n) {
    const float d = g[i] + h.weight_decay * p[i];
    const float u = h.momentum * (buf[i] + d);
    buf[i] = u;
    p[i] -= h.lr * (d + u);
    if (zero_grads) g[i] = 0.0f;
  }
}

__global__ void SgdMomentumKernel(float* __restrict__ p, float* __restrict__ g,
                                  float* __restrict__ buf, int64_t n, Hyper h,
                                  bool zero_grads) {
  RINGSIDE_GRID_STRIDE(i, n) {
    const float v = buf[i] + (g[i] + h.weight_decay * p[i]);
    buf[i] = h.momentum * v;
    p[i] -= h.lr * v;
    if (zero_grads) g[i] = 0.0f;
  }
}

__global__ void SgdCarriedKernel(float* __restrict__ p, float* __restrict__ acc, int64_t n,
                                 Hyper h) {
  RINGSIDE_GRID_STRIDE(i, n) {
    const float v = acc[i] + h.weight_decay * p[i];
    acc[i] = h.momentum * v;
    p[i] -= h.lr * v;
  }
}

}  // namespace

cudaError_t SgdUpdate(float* params, float* grads, float* momentum_buf, int64_t n, float lr,
                      float momentum, float weight_decay, bool nesterov, bool zero_grads,
                      cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const Hyper h{lr, momentum, weight_decay};
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
                             float weight_decay, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SgdCarriedKernel<<<BlocksFor(n), kThreads, 0, stream>>>(params, acc, n,
                                                          Hyper{lr, momentum, weight_decay});
  return cudaGetLastError();
}

}  // namespace kernels
}  // namespace ringside
