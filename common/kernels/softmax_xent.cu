// Softmax cross-entropy: forward (probs, per-row loss and hit, then the batch totals
// in a fixed order) and backward.
#include <cmath>

#include "common/kernels/kernels.h"
#include "common/kernels/launch.cuh"

namespace ringside {
namespace kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;

// One warp per row. Every lane reads what it needs from the row (its logits, the
// maximum, the label's logit) before any lane writes probs, so probs may alias
// logits. Mirrors the CPU backend: max and first argmax in float, the denominator
// summed in double, probs = e * float(1 / denom), loss = log(denom) - (z[label] - max).
__global__ void SoftmaxRowsKernel(const float* logits, const int32_t* __restrict__ labels,
                                  int batch, int classes, float* probs,
                                  double* __restrict__ row_loss,
                                  int32_t* __restrict__ row_hit) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= batch) return;
  const float* in = logits + row * classes;
  float* out = probs + row * classes;
  // Maximum and its first index (lower index wins ties).
  float best_value = -INFINITY;
  int best = classes;  // Sentinel above every index.
  for (int j = lane; j < classes; j += kWarp) {
    const float v = in[j];
    if (v > best_value || (v == best_value && j < best)) {
      best_value = v;
      best = j;
    }
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, best_value, offset);
    const int j = __shfl_xor_sync(0xffffffffu, best, offset);
    if (v > best_value || (v == best_value && j < best)) {
      best_value = v;
      best = j;
    }
  }
  const int label = labels[row];
  const bool label_ok = label >= 0 && label < classes;
  const float label_shifted = label_ok ? in[label] - best_value : 0.0f;
  double denom = 0.0;
  for (int j = lane; j < classes; j += kWarp) denom += expf(in[j] - best_value);
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    denom += __shfl_xor_sync(0xffffffffu, denom, offset);
  }
  // Every lane has read all it needs from `in`; from here lanes write their own j.
  __syncwarp();
  const float inv = static_cast<float>(1.0 / denom);
  for (int j = lane; j < classes; j += kWarp) out[j] = expf(in[j] - best_value) * inv;
  if (lane == 0) {
    row_loss[row] = label_ok ? log(denom) - static_cast<double>(label_shifted) : NAN;
    row_hit[row] = best == label ? 1 : 0;
  }
}

// One block: the batch's loss and hit totals, each thread summing a fixed stride of
// rows, then a fixed tree: the same result every run.
__global__ void TotalsKernel(const double* __restrict__ row_loss,
                             const int32_t* __restrict__ row_hit, int batch,
                             XentTotals* __restrict__ totals) {
  __shared__ double loss[kThreads];
  __shared__ long long hits[kThreads];
  double l = 0.0;
  long long h = 0;
  for (int r = threadIdx.x; r < batch; r += blockDim.x) {
    l += row_loss[r];
    h += row_hit[r];
  }
  loss[threadIdx.x] = l;
  hits[threadIdx.x] = h;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      hits[threadIdx.x] += hits[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    totals->loss_sum = loss[0];
    totals->correct = hits[0];
  }
}

// dlogits = scale * probs - scale at the label: the CPU backend's two roundings.
__global__ void SoftmaxBackwardKernel(const float* probs, const int32_t* __restrict__ labels,
                                      int64_t n, int classes, float scale, float* dlogits) {
  RINGSIDE_GRID_STRIDE(i, n) {
    const int64_t row = i / classes;
    const int j = static_cast<int>(i % classes);
    const float v = scale * probs[i];
    dlogits[i] = j == labels[row] ? v - scale : v;
  }
}

}  // namespace

cudaError_t SoftmaxXentForward(const float* logits, const int32_t* labels, int batch,
                               int classes, float* probs, double* row_loss,
                               int32_t* row_hit, XentTotals* totals, cudaStream_t stream) {
  if (batch > 0 && classes > 0) {
    const unsigned blocks = static_cast<unsigned>((batch + kRowsPerBlock - 1) / kRowsPerBlock);
    SoftmaxRowsKernel<<<blocks, kThreads, 0, stream>>>(logits, labels, batch, classes, probs,
                                                       row_loss, row_hit);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  } else {
    batch = 0;
  }
  TotalsKernel<<<1, kThreads, 0, stream>>>(row_loss, row_hit, batch, totals);
  return cudaGetLastError();
}

cudaError_t SoftmaxXentBackward(const float* probs, const int32_t* labels, int batch,
                                int classes, float scale, float* dlogits,
                                cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(batch) * classes;
  if (n <= 0) return cudaSuccess;
  SoftmaxBackwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(probs, labels, n, classes,
                                                               scale, dlogits);
  return cudaGetLastError();
}

}  // namespace kernels
}  // namespace ringside
