// The CPU backend: GEMM on OpenBLAS; every other op is a plain loop shaped for GCC's
// auto-vectoriser at -O3 (contiguous inner loops, __restrict where ops.h forbids
// aliasing, no reductions that need reassociation).
#include "common/cpu_ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/ops.h"

namespace ringside {
namespace {

constexpr size_t kAlignment = 64;

// The loops below are compiled three times, for AVX-512, AVX2 and the x86-64 baseline;
// the dynamic loader picks one per function for the CPU at hand (glibc ifunc). Debian
// builds for the baseline, whose 4-wide SSE2 leaves about a tenth of the SGD pass on
// the table on an AVX-512 machine. cpu_ops compiles with -ffp-contract=off (BUILD), so
// no clone fuses a multiply and add that another rounds twice: all three give
// bit-identical results.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RINGSIDE_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RINGSIDE_VECTOR_CLONES
#endif

// Sum of p[0, n) in double. Accumulates kLanes independent float partial sums so the
// loop vectorises without -ffast-math (and is more accurate than one serial float
// sum: each lane sees n / kLanes terms).
RINGSIDE_VECTOR_CLONES
double SumContiguous(const float* __restrict p, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += p[i + j];
  }
  double sum = 0.0;
  for (int j = 0; j < kLanes; ++j) sum += acc[j];
  for (; i < n; ++i) sum += p[i];
  return sum;
}

// The half-open range [*lo, *hi) of output positions o in [0, out_size) whose input
// coordinate o * stride + offset lies inside [0, in_size). stride > 0.
void ValidOutputRange(int offset, int stride, int in_size, int out_size, int* lo,
                      int* hi) {
  int first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int last_in = in_size - 1 - offset;  // Largest admissible o * stride.
  int end = last_in < 0 ? 0 : last_in / stride + 1;
  first = std::min(first, out_size);
  end = std::max(std::min(end, out_size), first);
  *lo = first;
  *hi = end;
}

int ConvOutputSize(int in_size, int kernel, int pad, int stride) {
  return (in_size + 2 * pad - kernel) / stride + 1;
}

// Kernels whose operands ops.h forbids from aliasing. They are free functions because
// GCC honours __restrict on parameters but not on local pointer copies; without it,
// it versions each loop behind a runtime overlap check.

// y [outer, channels, inner] += bias [channels].
RINGSIDE_VECTOR_CLONES
void BiasAddKernel(float* __restrict y, const float* __restrict bias, int outer,
                   int channels, int inner) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      float* row = y + o * channels;
      for (int ch = 0; ch < channels; ++ch) row[ch] += bias[ch];
    }
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int ch = 0; ch < channels; ++ch) {
      float* plane = y + (o * channels + ch) * inner;
      const float value = bias[ch];
      for (int64_t i = 0; i < inner; ++i) plane[i] += value;
    }
  }
}

// y [outer, channels, inner] = bias [channels] (overwrite).
RINGSIDE_VECTOR_CLONES
void BiasBroadcastKernel(float* __restrict y, const float* __restrict bias, int outer,
                         int channels, int inner) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      memcpy(y + o * channels, bias, static_cast<size_t>(channels) * sizeof(float));
    }
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int ch = 0; ch < channels; ++ch) {
      float* plane = y + (o * channels + ch) * inner;
      const float value = bias[ch];
      for (int64_t i = 0; i < inner; ++i) plane[i] = value;
    }
  }
}

// db [channels] (+)= sum of dy [outer, channels, inner] over outer and inner.
RINGSIDE_VECTOR_CLONES
void BiasGradKernel(const float* __restrict dy, float* __restrict db, int outer,
                    int channels, int inner, bool accumulate) {
  if (inner == 1) {
    // [outer, channels]: add whole contiguous rows, vectorised across channels.
    if (!accumulate) {
      for (int ch = 0; ch < channels; ++ch) db[ch] = 0.0f;
    }
    for (int64_t o = 0; o < outer; ++o) {
      const float* row = dy + o * channels;
      for (int ch = 0; ch < channels; ++ch) db[ch] += row[ch];
    }
    return;
  }
  for (int ch = 0; ch < channels; ++ch) {
    double sum = 0.0;
    for (int64_t o = 0; o < outer; ++o) {
      sum += SumContiguous(dy + (o * channels + ch) * inner, inner);
    }
    db[ch] = accumulate ? db[ch] + static_cast<float>(sum) : static_cast<float>(sum);
  }
}

// dst [n] += src [n].
RINGSIDE_VECTOR_CLONES
void AccumulateKernel(float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

// Numerical safety: the largest |x| of x[begin, end) as an IEEE bit pattern (an
// integer max, which vectorises); a NaN or an Inf is there iff it is >= kNonFiniteBits.
constexpr uint32_t kNonFiniteBits = 0x7f800000u;
RINGSIDE_VECTOR_CLONES
uint32_t MaxAbsBits(const float* __restrict x, int64_t begin, int64_t end) {
  uint32_t worst = 0;
  for (int64_t i = begin; i < end; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof(bits));
    worst = std::max(worst, bits & 0x7fffffffu);
  }
  return worst;
}

// One fused SGD step (Ops::SgdUpdate); buf holds the carried term u and is touched
// only when hyper.momentum != 0. Each line rounds as torch.optim.SGD does: with
// -ffp-contract=off nothing is fused, so u + d here is PyTorch's momentum * buf + d.
// Zeroing g in the same pass costs next to nothing (its lines are already in cache);
// a separate zeroing pass later would cost a full write of the buffer.
RINGSIDE_VECTOR_CLONES
void SgdKernel(float* __restrict p, float* __restrict g, float* __restrict buf,
               int64_t n, const SgdHyper& hyper, bool zero_grads) {
  const float lr = hyper.lr;
  const float wd = hyper.weight_decay;
  const float mu = hyper.momentum;
  // Blocks of 8 KiB per stream: g's block is still in L1 when it is zeroed (and p's
  // when it is checked).
  constexpr int64_t kBlock = 2048;
  uint32_t worst = 0;  // MaxAbsBits of the parameters written, with hyper.nonfinite.
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    if (mu == 0.0f) {
      for (int64_t i = begin; i < end; ++i) p[i] -= lr * (g[i] + wd * p[i]);
    } else if (hyper.nesterov) {
      for (int64_t i = begin; i < end; ++i) {
        const float d = g[i] + wd * p[i];
        const float u = mu * (buf[i] + d);
        buf[i] = u;
        p[i] -= lr * (d + u);
      }
    } else {
      for (int64_t i = begin; i < end; ++i) {
        const float v = buf[i] + (g[i] + wd * p[i]);
        buf[i] = mu * v;
        p[i] -= lr * v;
      }
    }
    if (zero_grads) {
      for (int64_t i = begin; i < end; ++i) g[i] = 0.0f;
    }
    // The block's parameters are still in L1: the check adds no memory traffic.
    if (hyper.nonfinite != nullptr) worst = std::max(worst, MaxAbsBits(p, begin, end));
  }
  if (worst >= kNonFiniteBits) *hyper.nonfinite = 1.0f;
}

// Ops::SgdUpdateCarried: acc = u + g on entry, the next u on return.
RINGSIDE_VECTOR_CLONES
void CarriedSgdKernel(float* __restrict p, float* __restrict acc, int64_t n,
                      const SgdHyper& hyper) {
  const float lr = hyper.lr;
  const float wd = hyper.weight_decay;
  const float mu = hyper.momentum;
  if (hyper.nonfinite == nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = acc[i] + wd * p[i];
      acc[i] = mu * v;
      p[i] -= lr * v;
    }
    return;
  }
  // Checked: the same update in blocks of 8 KiB, each checked while still in L1.
  constexpr int64_t kBlock = 2048;
  uint32_t worst = 0;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    for (int64_t i = begin; i < end; ++i) {
      const float v = acc[i] + wd * p[i];
      acc[i] = mu * v;
      p[i] -= lr * v;
    }
    worst = std::max(worst, MaxAbsBits(p, begin, end));
  }
  if (worst >= kNonFiniteBits) *hyper.nonfinite = 1.0f;
}

// y [n] += alpha * x [n].
RINGSIDE_VECTOR_CLONES
void AxpyKernel(int64_t n, float alpha, const float* __restrict x, float* __restrict y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// y [n] = max(x, 0), NaN kept NaN (as torch.relu: a NaN the activation swallowed would
// hide a diverged step from the non-finite checks). y may alias x: the loop reads and
// writes the same index only.
RINGSIDE_VECTOR_CLONES
void ReluForwardKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v <= 0.0f ? 0.0f : v;
  }
}

// dx [n] = y > 0 ? dy : 0. dx may alias dy: same-index access only.
RINGSIDE_VECTOR_CLONES
void ReluBackwardKernel(const float* y, const float* dy, float* dx, int64_t n) {
  // Load dy unconditionally: a conditional load blocks if-conversion.
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

// See Ops::Im2Col. Each col row is filled per output row: zeros for the padding,
// then a memcpy (stride 1) or a strided gather of the in-image span.
RINGSIDE_VECTOR_CLONES
void Im2ColKernel(const float* __restrict x, int channels, int batch, int height,
                  int width, int kernel, int pad, int stride, float* __restrict col) {
  const int ho = ConvOutputSize(height, kernel, pad, stride);
  const int wo = ConvOutputSize(width, kernel, pad, stride);
  if (ho <= 0 || wo <= 0) return;
  const int64_t plane = static_cast<int64_t>(height) * width;
  const int64_t out_plane = static_cast<int64_t>(ho) * wo;
  const int64_t row_len = batch * out_plane;
  for (int c = 0; c < channels; ++c) {
    for (int ky = 0; ky < kernel; ++ky) {
      int oy_lo, oy_hi;
      ValidOutputRange(ky - pad, stride, height, ho, &oy_lo, &oy_hi);
      for (int kx = 0; kx < kernel; ++kx) {
        const int x_off = kx - pad;
        int ox_lo, ox_hi;
        ValidOutputRange(x_off, stride, width, wo, &ox_lo, &ox_hi);
        float* row =
            col + ((static_cast<int64_t>(c) * kernel + ky) * kernel + kx) * row_len;
        for (int b = 0; b < batch; ++b) {
          const float* image = x + (static_cast<int64_t>(c) * batch + b) * plane;
          float* out = row + b * out_plane;
          for (int oy = 0; oy < ho; ++oy) {
            float* line = out + static_cast<int64_t>(oy) * wo;
            if (oy < oy_lo || oy >= oy_hi) {
              std::memset(line, 0, sizeof(float) * wo);
              continue;
            }
            const float* in_line =
                image + static_cast<int64_t>(oy * stride + ky - pad) * width;
            for (int ox = 0; ox < ox_lo; ++ox) line[ox] = 0.0f;
            if (stride == 1) {
              // Rows are short (tens of floats): an inline loop beats a memcpy call.
              const float* __restrict src = in_line + x_off;
              for (int ox = ox_lo; ox < ox_hi; ++ox) line[ox] = src[ox];
            } else {
              for (int ox = ox_lo; ox < ox_hi; ++ox) {
                line[ox] = in_line[ox * stride + x_off];
              }
            }
            for (int ox = ox_hi; ox < wo; ++ox) line[ox] = 0.0f;
          }
        }
      }
    }
  }
}

// See Ops::Col2Im: the same traversal as Im2ColKernel, accumulating instead of
// copying, so the two are exact adjoints.
RINGSIDE_VECTOR_CLONES
void Col2ImKernel(const float* __restrict col, int channels, int batch, int height,
                  int width, int kernel, int pad, int stride, float* __restrict dx) {
  const int64_t plane = static_cast<int64_t>(height) * width;
  std::fill_n(dx, static_cast<int64_t>(channels) * batch * plane, 0.0f);
  const int ho = ConvOutputSize(height, kernel, pad, stride);
  const int wo = ConvOutputSize(width, kernel, pad, stride);
  if (ho <= 0 || wo <= 0) return;
  const int64_t out_plane = static_cast<int64_t>(ho) * wo;
  const int64_t row_len = batch * out_plane;
  for (int c = 0; c < channels; ++c) {
    for (int ky = 0; ky < kernel; ++ky) {
      int oy_lo, oy_hi;
      ValidOutputRange(ky - pad, stride, height, ho, &oy_lo, &oy_hi);
      for (int kx = 0; kx < kernel; ++kx) {
        const int x_off = kx - pad;
        int ox_lo, ox_hi;
        ValidOutputRange(x_off, stride, width, wo, &ox_lo, &ox_hi);
        const float* row =
            col + ((static_cast<int64_t>(c) * kernel + ky) * kernel + kx) * row_len;
        for (int b = 0; b < batch; ++b) {
          float* image = dx + (static_cast<int64_t>(c) * batch + b) * plane;
          const float* in = row + b * out_plane;
          // Rows outside [oy_lo, oy_hi) read padding: nothing to scatter.
          for (int oy = oy_lo; oy < oy_hi; ++oy) {
            const float* line = in + static_cast<int64_t>(oy) * wo;
            float* out_line =
                image + static_cast<int64_t>(oy * stride + ky - pad) * width;
            if (stride == 1) {
              AccumulateKernel(out_line + ox_lo + x_off, line + ox_lo, ox_hi - ox_lo);
            } else {
              for (int ox = ox_lo; ox < ox_hi; ++ox) {
                out_line[ox * stride + x_off] += line[ox];
              }
            }
          }
        }
      }
    }
  }
}

// See Ops::MaxPool2x2Forward. Offsets within a plane fit int32 by contract.
RINGSIDE_VECTOR_CLONES
void MaxPoolForwardKernel(const float* __restrict x, int planes, int height, int width,
                          float* __restrict y, int32_t* __restrict argmax) {
  const int ho = height / 2;
  const int wo = width / 2;
  const int64_t plane = static_cast<int64_t>(height) * width;
  const int64_t out_plane = static_cast<int64_t>(ho) * wo;
  for (int64_t p = 0; p < planes; ++p) {
    const float* image = x + p * plane;
    float* out_image = y + p * out_plane;
    int32_t* arg_image = argmax + p * out_plane;
    for (int oy = 0; oy < ho; ++oy) {
      const int top = 2 * oy * width;
      const int bottom = top + width;
      for (int ox = 0; ox < wo; ++ox) {
        // Candidates in row-major window order; strict > keeps the first maximum.
        int best = top + 2 * ox;
        float best_value = image[best];
        const int candidates[3] = {top + 2 * ox + 1, bottom + 2 * ox,
                                   bottom + 2 * ox + 1};
        for (int offset : candidates) {
          if (image[offset] > best_value) {
            best_value = image[offset];
            best = offset;
          }
        }
        out_image[oy * wo + ox] = best_value;
        arg_image[oy * wo + ox] = best;
      }
    }
  }
}

// See Ops::MaxPool2x2Backward.
RINGSIDE_VECTOR_CLONES
void MaxPoolBackwardKernel(const float* __restrict dy, const int32_t* __restrict argmax,
                           int planes, int height, int width, float* __restrict dx) {
  const int64_t plane = static_cast<int64_t>(height) * width;
  const int64_t out_plane = static_cast<int64_t>(height / 2) * (width / 2);
  std::fill_n(dx, planes * plane, 0.0f);
  for (int64_t p = 0; p < planes; ++p) {
    float* image = dx + p * plane;
    const float* grad = dy + p * out_plane;
    const int32_t* where = argmax + p * out_plane;
    // Pooling windows are disjoint, so each input receives at most one gradient.
    for (int64_t i = 0; i < out_plane; ++i) image[where[i]] = grad[i];
  }
}

// out [d1, d0, inner] = in [d0, d1, inner] with the first two axes swapped.
RINGSIDE_VECTOR_CLONES
void SwapAxes01Kernel(const float* __restrict in, int d0, int d1, int inner,
                      float* __restrict out) {
  if (inner == 1) {
    // A plain 2-D transpose: write contiguously, read with stride d1.
    for (int64_t j = 0; j < d1; ++j) {
      float* out_row = out + j * d0;
      for (int64_t i = 0; i < d0; ++i) out_row[i] = in[i * d1 + j];
    }
    return;
  }
  const size_t block = sizeof(float) * static_cast<size_t>(inner);
  for (int64_t i = 0; i < d0; ++i) {
    for (int64_t j = 0; j < d1; ++j) {
      std::memcpy(out + (j * d0 + i) * inner, in + (i * d1 + j) * inner, block);
    }
  }
}

class DoneEvent final : public OpsEvent {
 public:
  absl::Status Wait() override { return absl::OkStatus(); }
  bool Done() override { return true; }
};

class CpuOps final : public Ops {
 public:
  CpuOps() = default;

  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string name() const override { return "cpu"; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    // aligned_alloc needs a size that is a multiple of the alignment; 0 bytes still
    // gets a real block so that OK always carries a non-null pointer.
    if (bytes > std::numeric_limits<size_t>::max() - kAlignment) {
      return absl::ResourceExhaustedError(
          absl::StrCat("CpuOps::Allocate: ", bytes, " bytes is too large"));
    }
    const size_t rounded =
        std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    void* ptr = std::aligned_alloc(kAlignment, rounded);
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("CpuOps::Allocate: out of host memory for ", bytes, " bytes"));
    }
    return ptr;
  }

  void Free(void* ptr) override { std::free(ptr); }

  // Host and backend memory are the same here.
  absl::StatusOr<void*> AllocateHost(size_t bytes) override { return Allocate(bytes); }
  void FreeHost(void* ptr) override { Free(ptr); }

  void CopyToDeviceAsync(void* dst, const void* host_src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, host_src, bytes);
  }

  absl::Status CopyToDevice(void* dst, const void* host_src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, host_src, bytes);
    return absl::OkStatus();
  }

  absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(host_dst, src, bytes);
    return absl::OkStatus();
  }

  void CopyToHostAsync(void* host_dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(host_dst, src, bytes);
  }

  void Copy(float* dst, const float* src, int64_t n) override {
    if (n > 0 && dst != src) {
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    }
  }

  // Every op runs synchronously and none can fail, so there is nothing to latch.
  absl::Status Synchronize() override { return absl::OkStatus(); }

  // Ops are done when they return: every event is complete when it is recorded.
  absl::StatusOr<std::unique_ptr<OpsEvent>> RecordEvent() override {
    return std::unique_ptr<OpsEvent>(new DoneEvent());
  }

  void GemmStrided(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const float* a, int lda, const float* b, int ldb, float beta, float* c,
                   int ldc) override {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
      // C = beta * C (beta == 0 overwrites), row by row; BLAS implementations
      // disagree on whether k == 0 is legal, so it never reaches cblas.
      for (int i = 0; i < m; ++i) {
        float* row = c + static_cast<int64_t>(i) * ldc;
        if (beta == 0.0f) {
          Fill(row, n, 0.0f);
        } else {
          Scale(row, n, beta);
        }
      }
      return;
    }
    // OpenBLAS treats beta == 0 as "overwrite C" (its beta kernel stores zeros rather
    // than multiplying), which is what ops.h promises; the test pins this with a
    // NaN-filled C.
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
                c, ldc);
  }

  void BiasAdd(float* y, const float* bias, int outer, int channels, int inner) override {
    BiasAddKernel(y, bias, outer, channels, inner);
  }

  void BiasBroadcast(float* y, const float* bias, int outer, int channels,
                     int inner) override {
    BiasBroadcastKernel(y, bias, outer, channels, inner);
  }

  void BiasGrad(const float* dy, float* db, int outer, int channels, int inner,
                bool accumulate) override {
    BiasGradKernel(dy, db, outer, channels, inner, accumulate);
  }

  void ReluForward(const float* x, float* y, int64_t n) override {
    ReluForwardKernel(x, y, n);
  }

  void ReluBackward(const float* y, const float* dy, float* dx, int64_t n) override {
    ReluBackwardKernel(y, dy, dx, n);
  }

  // Reads everything it needs from a row of logits before writing that row of probs,
  // so it is also correct in place (probs == logits), though ops.h does not promise it.
  void SoftmaxXentForward(const float* logits, const int32_t* labels, int batch,
                          int classes, float* probs, double* loss_sum,
                          int64_t* correct) override {
    double loss = 0.0;
    int64_t hits = 0;
    for (int64_t r = 0; r < batch; ++r) {
      const float* in = logits + r * classes;
      float* out = probs + r * classes;
      const int label = labels[r];
      int best = 0;
      float max_logit = in[0];
      for (int j = 1; j < classes; ++j) {
        if (in[j] > max_logit) {
          max_logit = in[j];
          best = j;
        }
      }
      const float label_shifted = in[label] - max_logit;
      double denom = 0.0;
      for (int j = 0; j < classes; ++j) {
        const float e = std::exp(in[j] - max_logit);
        out[j] = e;
        denom += e;
      }
      const float inv = static_cast<float>(1.0 / denom);
      for (int j = 0; j < classes; ++j) out[j] *= inv;
      // -log p[label] = log(sum exp(z - max)) - (z[label] - max), never log(0).
      loss += std::log(denom) - static_cast<double>(label_shifted);
      hits += best == label ? 1 : 0;
    }
    *loss_sum = loss;
    *correct = hits;
  }

  // dlogits may alias probs: each element is read before it is written.
  void SoftmaxXentBackward(const float* probs, const int32_t* labels, int batch,
                           int classes, float scale, float* dlogits) override {
    for (int64_t r = 0; r < batch; ++r) {
      const float* in = probs + r * classes;
      float* out = dlogits + r * classes;
      for (int j = 0; j < classes; ++j) out[j] = scale * in[j];
      out[labels[r]] -= scale;
    }
  }

  void Im2Col(const float* x, int channels, int batch, int height, int width, int kernel,
              int pad, int stride, float* col) override {
    Im2ColKernel(x, channels, batch, height, width, kernel, pad, stride, col);
  }

  void Col2Im(const float* col, int channels, int batch, int height, int width,
              int kernel, int pad, int stride, float* dx) override {
    Col2ImKernel(col, channels, batch, height, width, kernel, pad, stride, dx);
  }

  void MaxPool2x2Forward(const float* x, int planes, int height, int width, float* y,
                         int32_t* argmax) override {
    MaxPoolForwardKernel(x, planes, height, width, y, argmax);
  }

  void MaxPool2x2Backward(const float* dy, const int32_t* argmax, int planes, int height,
                          int width, float* dx) override {
    MaxPoolBackwardKernel(dy, argmax, planes, height, width, dx);
  }

  void SwapAxes01(const float* in, int d0, int d1, int inner, float* out) override {
    SwapAxes01Kernel(in, d0, d1, inner, out);
  }

  // momentum_buf must start at zero: PyTorch's first step sets buf = d, which equals
  // 0 + d.
  void SgdUpdate(float* params, float* grads, float* momentum_buf, int64_t n,
                 const SgdHyper& hyper, bool zero_grads) override {
    SgdKernel(params, grads, momentum_buf, n, hyper, zero_grads);
  }

  void SgdUpdateCarried(float* params, float* acc, int64_t n,
                        const SgdHyper& hyper) override {
    CarriedSgdKernel(params, acc, n, hyper);
  }

  void FlagNonFinite(const float* x, int64_t n, float* flag) override {
    if (n > 0 && MaxAbsBits(x, 0, n) >= kNonFiniteBits) *flag = 1.0f;
  }

  void Fill(float* x, int64_t n, float value) override {
    for (int64_t i = 0; i < n; ++i) x[i] = value;
  }

  void Scale(float* x, int64_t n, float alpha) override {
    for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
  }

  void Axpy(int64_t n, float alpha, const float* x, float* y) override {
    AxpyKernel(n, alpha, x, y);
  }
};

}  // namespace

std::unique_ptr<Ops> NewCpuOps(int blas_threads) {
  if (blas_threads > 0) openblas_set_num_threads(blas_threads);
  return std::make_unique<CpuOps>();
}

std::string CpuBlasKernels() {
  const char* core = openblas_get_corename();
  return absl::StrCat("OpenBLAS ", core != nullptr ? core : "(unknown core)");
}

}  // namespace ringside
