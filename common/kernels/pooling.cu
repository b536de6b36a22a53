// 2x2 max-pool, stride 2, over independent [height, width] planes.
#include "common/kernels/kernels.h"
#include "common/kernels/launch.cuh"

namespace ringside {
namespace kernels {
namespace {

// One thread per output; candidates in row-major window order, strict > keeps the
// first maximum (the CPU backend's rule).
__global__ void MaxPoolForwardKernel(const float* __restrict__ x, int64_t planes, int height,
                                     int width, float* __restrict__ y,
                                     int32_t* __restrict__ argmax) {
  const int ho = height / 2;
  const int wo = width / 2;
  const int64_t n = planes * ho * wo;
  RINGSIDE_GRID_STRIDE(idx, n) {
    const int ox = static_cast<int>(idx % wo);
    const int oy = static_cast<int>((idx / wo) % ho);
    const int64_t p = idx / (static_cast<int64_t>(wo) * ho);
    const float* image = x + p * height * width;
    const int top = 2 * oy * width;
    const int bottom = top + width;
    int best = top + 2 * ox;
    float best_value = image[best];
    const int candidates[3] = {top + 2 * ox + 1, bottom + 2 * ox, bottom + 2 * ox + 1};
    for (int k = 0; k < 3; ++k) {
      const float v = image[candidates[k]];
      if (v > best_value) {
        best_value = v;
        best = candidates[k];
      }
    }
    y[idx] = best_value;
    argmax[idx] = best;
  }
}

// One thread per input pixel: the gradient of its window if it was the window's
// argmax, else 0 (also for the odd trailing row/column no window covers).
__global__ void MaxPoolBackwardKernel(const float* __restrict__ dy,
                                      const int32_t* __restrict__ argmax, int64_t planes,
                                      int height, int width, float* __restrict__ dx) {
  const int ho = height / 2;
  const int wo = width / 2;
  const int64_t n = planes * height * width;
  RINGSIDE_GRID_STRIDE(idx, n) {
    const int xx = static_cast<int>(idx % width);
    const int y = static_cast<int>((idx / width) % height);
    const int64_t p = idx / (static_cast<int64_t>(width) * height);
    const int oy = y / 2;
    const int ox = xx / 2;
    float g = 0.0f;
    if (oy < ho && ox < wo) {
      const int64_t out = (p * ho + oy) * wo + ox;
      if (argmax[out] == y * width + xx) g = dy[out];
    }
    dx[idx] = g;
  }
}

}  // namespace

cudaError_t MaxPool2x2Forward(const float* x, int planes, int height, int width, float* y,
                              int32_t* argmax, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(planes) * (height / 2) * (width / 2);
  if (n <= 0) return cudaSuccess;
  MaxPoolForwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, planes, height, width, y,
                                                              argmax);
  return cudaGetLastError();
}

cudaError_t MaxPool2x2Backward(const float* dy, const int32_t* argmax, int planes,
                               int height, int width, float* dx, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(planes) * height * width;
  if (n <= 0) return cudaSuccess;
  MaxPoolBackwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(dy, argmax, planes, height,
                                                               width, dx);
  return cudaGetLastError();
}

}  // namespace kernels
}  // namespace ringside
