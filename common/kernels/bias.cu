// Bias kernels over [outer, channels, inner]: add, broadcast, and the gradient (a
// deterministic sum over outer and inner per channel).
#include "common/kernels/kernels.h"
#include "common/kernels/launch.cuh"

namespace ringside {
namespace kernels {
namespace {

__global__ void BiasAddKernel(float* __restrict__ y, const float* __restrict__ bias,
                              int64_t n, int channels, int inner) {
  RINGSIDE_GRID_STRIDE(i, n) y[i] += bias[(i / inner) % channels];
}

__global__ void BiasBroadcastKernel(float* __restrict__ y, const float* __restrict__ bias,
                                    int64_t n, int channels, int inner) {
  RINGSIDE_GRID_STRIDE(i, n) y[i] = bias[(i / inner) % channels];
}

// inner == 1, dy [outer, channels]: column sums. A block of kTile x kTile threads owns
// kTile channels; thread (x, y) sums rows y, y + kTile, ... of channel x (coalesced
// across x), then the block adds the kTile partial sums of each channel in a fixed
// tree order.
constexpr int kTile = 32;

__global__ void ColumnSumKernel(const float* __restrict__ dy, float* __restrict__ db,
                                int rows, int channels, bool accumulate) {
  __shared__ float partial[kTile][kTile + 1];
  const int ch = blockIdx.x * kTile + threadIdx.x;
  float sum = 0.0f;
  if (ch < channels) {
    for (int r = threadIdx.y; r < rows; r += kTile) {
      sum += dy[static_cast<int64_t>(r) * channels + ch];
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  for (int half = kTile / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
      partial[threadIdx.y][threadIdx.x] += partial[threadIdx.y + half][threadIdx.x];
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && ch < channels) {
    db[ch] = accumulate ? db[ch] + partial[0][threadIdx.x] : partial[0][threadIdx.x];
  }
}

// inner > 1: one block per channel sums its outer * inner values (contiguous runs of
// inner) in double, as the CPU backend does, then a fixed tree over the block.
__global__ void PlaneSumKernel(const float* __restrict__ dy, float* __restrict__ db,
                               int outer, int channels, int inner, bool accumulate) {
  __shared__ double partial[kThreads];
  const int ch = blockIdx.x;
  const int64_t per_channel = static_cast<int64_t>(outer) * inner;
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < per_channel; j += blockDim.x) {
    const int64_t o = j / inner;
    const int64_t i = j % inner;
    sum += dy[(o * channels + ch) * inner + i];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float total = static_cast<float>(partial[0]);
    db[ch] = accumulate ? db[ch] + total : total;
  }
}

}  // namespace

cudaError_t BiasAdd(float* y, const float* bias, int outer, int channels, int inner,
                    cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(outer) * channels * inner;
  if (n <= 0) return cudaSuccess;
  BiasAddKernel<<<BlocksFor(n), kThreads, 0, stream>>>(y, bias, n, channels, inner);
  return cudaGetLastError();
}

cudaError_t BiasBroadcast(float* y, const float* bias, int outer, int channels, int inner,
                          cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(outer) * channels * inner;
  if (n <= 0) return cudaSuccess;
  BiasBroadcastKernel<<<BlocksFor(n), kThreads, 0, stream>>>(y, bias, n, channels, inner);
  return cudaGetLastError();
}

cudaError_t BiasGrad(const float* dy, float* db, int outer, int channels, int inner,
                     bool accumulate, cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  if (inner == 1) {
    const dim3 block(kTile, kTile);
    const unsigned blocks = static_cast<unsigned>((channels + kTile - 1) / kTile);
    ColumnSumKernel<<<blocks, block, 0, stream>>>(dy, db, outer, channels, accumulate);
  } else {
    PlaneSumKernel<<<static_cast<unsigned>(channels), kThreads, 0, stream>>>(
        dy, db, outer, channels, inner, accumulate);
  }
  return cudaGetLastError();
}

}  // namespace kernels
}  // namespace ringside
