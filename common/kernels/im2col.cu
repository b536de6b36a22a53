// Convolution helpers on the [C, B, H, W] layout: im2col and its adjoint col2im.
#include "common/kernels/kernels.h"
#include "common/kernels/launch.cuh"

namespace ringside {
namespace kernels {
namespace {

__host__ __device__ inline int ConvOutputSize(int in_size, int kernel, int pad, int stride) {
  return (in_size + 2 * pad - kernel) / stride + 1;
}

// One thread per col element, col [C*k*k, B*Ho*Wo]: consecutive threads write
// consecutive columns.
__global__ void Im2ColKernel(const float* __restrict__ x, int channels, int batch,
                             int height, int width, int kernel, int pad, int stride, int ho,
                             int wo, float* __restrict__ col) {
  const int64_t row_len = static_cast<int64_t>(batch) * ho * wo;
  const int64_t n = static_cast<int64_t>(channels) * kernel * kernel * row_len;
  RINGSIDE_GRID_STRIDE(idx, n) {
    const int64_t r = idx / row_len;
    const int64_t q = idx % row_len;
    const int kx = static_cast<int>(r % kernel);
    const int ky = static_cast<int>((r / kernel) % kernel);
    const int64_t c = r / (static_cast<int64_t>(kernel) * kernel);
    const int ox = static_cast<int>(q % wo);
    const int oy = static_cast<int>((q / wo) % ho);
    const int64_t b = q / (static_cast<int64_t>(wo) * ho);
    const int y = oy * stride - pad + ky;
    const int xx = ox * stride - pad + kx;
    float v = 0.0f;
    if (y >= 0 && y < height && xx >= 0 && xx < width) {
      v = x[((c * batch + b) * height + y) * width + xx];
    }
    col[idx] = v;
  }
}

// One thread per dx pixel, summing the col entries Im2Col read from it in (ky, kx)
// order starting from 0: the CPU backend's order, so both give the same floats.
__global__ void Col2ImKernel(const float* __restrict__ col, int channels, int batch,
                             int height, int width, int kernel, int pad, int stride, int ho,
                             int wo, float* __restrict__ dx) {
  const int64_t row_len = static_cast<int64_t>(batch) * ho * wo;
  const int64_t n = static_cast<int64_t>(channels) * batch * height * width;
  RINGSIDE_GRID_STRIDE(idx, n) {
    const int xx = static_cast<int>(idx % width);
    const int y = static_cast<int>((idx / width) % height);
    const int64_t cb = idx / (static_cast<int64_t>(width) * height);
    const int64_t b = cb % batch;
    const int64_t c = cb / batch;
    float sum = 0.0f;
    for (int ky = 0; ky < kernel; ++ky) {
      const int ty = y + pad - ky;  // oy * stride
      if (ty < 0 || ty % stride != 0) continue;
      const int oy = ty / stride;
      if (oy >= ho) continue;
      for (int kx = 0; kx < kernel; ++kx) {
        const int tx = xx + pad - kx;
        if (tx < 0 || tx % stride != 0) continue;
        const int ox = tx / stride;
        if (ox >= wo) continue;
        const int64_t r = (c * kernel + ky) * kernel + kx;
        sum += col[r * row_len + (b * ho + oy) * wo + ox];
      }
    }
    dx[idx] = sum;
  }
}

}  // namespace

cudaError_t Im2Col(const float* x, int channels, int batch, int height, int width,
                   int kernel, int pad, int stride, float* col, cudaStream_t stream) {
  const int ho = ConvOutputSize(height, kernel, pad, stride);
  const int wo = ConvOutputSize(width, kernel, pad, stride);
  if (ho <= 0 || wo <= 0) return cudaSuccess;
  const int64_t n = static_cast<int64_t>(channels) * kernel * kernel * batch * ho * wo;
  if (n <= 0) return cudaSuccess;
  Im2ColKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, channels, batch, height, width,
                                                      kernel, pad, stride, ho, wo, col);
  return cudaGetLastError();
}

cudaError_t Col2Im(const float* col, int channels, int batch, int height, int width,
                   int kernel, int pad, int stride, float* dx, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(channels) * batch * height * width;
  if (n <= 0) return cudaSuccess;
  const int ho = ConvOutputSize(height, kernel, pad, stride);
  const int wo = ConvOutputSize(width, kernel, pad, stride);
  if (ho <= 0 || wo <= 0) {
    return cudaMemsetAsync(dx, 0, static_cast<size_t>(n) * sizeof(float), stream);
  }
  Col2ImKernel<<<BlocksFor(n), kThreads, 0, stream>>>(col, channels, batch, height, width,
                                                      kernel, pad, stride, ho, wo, dx);
  return cudaGetLastError();
}

}  // namespace kernels
}  // namespace ringside
