// Tests of the CPU backend: closed-form values, naive double-precision references,
// the documented aliasing, and finite-difference checks of every backward op.
#include "common/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "common/ops.h"
#include "common/random.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using Vec = std::vector<float>;

Vec RandomVec(Rng& rng, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  Vec v(n);
  for (float& x : v) x = rng.Uniform(lo, hi);
  return v;
}

// Random values with |x| in [0.1, 1): far from ReLU's kink relative to the FD step.
Vec AwayFromZero(Rng& rng, int64_t n) {
  Vec v(n);
  for (float& x : v) {
    const float magnitude = rng.Uniform(0.1f, 1.0f);
    x = rng.Below(2) == 0 ? magnitude : -magnitude;
  }
  return v;
}

double Dot(const Vec& a, const Vec& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

// Compares `analytic` = dL/dx with central differences of
// L(x) = sum_r w[r] * f(x)[r], evaluated in double. f maps host vectors to host
// vectors (running the op on the backend inside).
void CheckGradient(const std::function<Vec(const Vec&)>& f, const Vec& x, const Vec& w,
                   const Vec& analytic, float eps = 1e-2f, double rel_tol = 1e-2,
                   double abs_tol = 1e-3) {
  ASSERT_EQ(analytic.size(), x.size());
  auto loss = [&](const Vec& input) {
    const Vec out = f(input);
    EXPECT_EQ(out.size(), w.size());
    return Dot(w, out);
  };
  Vec probe = x;
  for (size_t i = 0; i < x.size(); ++i) {
    probe[i] = x[i] + eps;
    const double plus = loss(probe);
    probe[i] = x[i] - eps;
    const double minus = loss(probe);
    probe[i] = x[i];
    // The actual step taken in float, not the nominal eps.
    const double step = static_cast<double>(x[i] + eps) - static_cast<double>(x[i] - eps);
    const double numeric = (plus - minus) / step;
    const double tol =
        rel_tol * std::max(std::fabs(numeric), std::fabs(double{analytic[i]})) + abs_tol;
    EXPECT_NEAR(analytic[i], numeric, tol) << "at index " << i;
  }
}

class CpuOpsTest : public ::testing::Test {
 protected:
  void SetUp() override { ops_ = NewCpuOps(1); }

  // Copies host data into freshly allocated backend memory.
  template <typename T>
  DeviceArray<T> Upload(const std::vector<T>& host) {
    DeviceArray<T> array =
        DeviceArray<T>::Create(ops_.get(), static_cast<int64_t>(host.size())).value();
    EXPECT_TRUE(
        ops_->CopyToDevice(array.data(), host.data(), host.size() * sizeof(T)).ok());
    return array;
  }

  // Backend memory of n elements, every one set to `value` (NaN by default, so
  // that an op which fails to write an output is caught).
  DeviceArray<float> Output(int64_t n,
                            float value = std::numeric_limits<float>::quiet_NaN()) {
    return Upload(Vec(n, value));
  }

  template <typename T>
  std::vector<T> Download(const DeviceArray<T>& array) {
    std::vector<T> host(array.size());
    EXPECT_TRUE(
        ops_->CopyToHost(host.data(), array.data(), host.size() * sizeof(T)).ok());
    EXPECT_TRUE(ops_->Synchronize().ok());
    return host;
  }

  // ---- Host-vector wrappers used by the references and FD checks. ----

  Vec Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const Vec& a, const Vec& b,
           float beta, const Vec& c) {
    auto da = Upload(a);
    auto db = Upload(b);
    auto dc = Upload(c);
    ops_->Gemm(ta, tb, m, n, k, alpha, da.data(), db.data(), beta, dc.data());
    return Download(dc);
  }

  Vec Im2Col(const Vec& x, int c, int b, int h, int w, int kernel, int pad, int stride) {
    const int ho = (h + 2 * pad - kernel) / stride + 1;
    const int wo = (w + 2 * pad - kernel) / stride + 1;
    auto dx = Upload(x);
    auto dcol = Output(static_cast<int64_t>(c) * kernel * kernel * b * ho * wo);
    ops_->Im2Col(dx.data(), c, b, h, w, kernel, pad, stride, dcol.data());
    return Download(dcol);
  }

  Vec Col2Im(const Vec& col, int c, int b, int h, int w, int kernel, int pad,
             int stride) {
    auto dcol = Upload(col);
    auto dx = Output(static_cast<int64_t>(c) * b * h * w);
    ops_->Col2Im(dcol.data(), c, b, h, w, kernel, pad, stride, dx.data());
    return Download(dx);
  }

  Vec SwapAxes01(const Vec& in, int d0, int d1, int inner) {
    auto din = Upload(in);
    auto dout = Output(static_cast<int64_t>(in.size()));
    ops_->SwapAxes01(din.data(), d0, d1, inner, dout.data());
    return Download(dout);
  }

  std::pair<Vec, std::vector<int32_t>> MaxPool(const Vec& x, int planes, int h, int w) {
    const int64_t out = static_cast<int64_t>(planes) * (h / 2) * (w / 2);
    auto dx = Upload(x);
    auto dy = Output(out);
    auto darg = Upload(std::vector<int32_t>(out, -1));
    ops_->MaxPool2x2Forward(dx.data(), planes, h, w, dy.data(), darg.data());
    return {Download(dy), Download(darg)};
  }

  Vec MaxPoolBackward(const Vec& dy, const std::vector<int32_t>& argmax, int planes,
                      int h, int w) {
    auto ddy = Upload(dy);
    auto darg = Upload(argmax);
    auto ddx = Output(static_cast<int64_t>(planes) * h * w);
    ops_->MaxPool2x2Backward(ddy.data(), darg.data(), planes, h, w, ddx.data());
    return Download(ddx);
  }

  struct XentResult {
    Vec probs;
    double loss_sum = 0.0;
    int64_t correct = 0;
  };
  XentResult SoftmaxXent(const Vec& logits, const std::vector<int32_t>& labels,
                         int classes) {
    const int batch = static_cast<int>(labels.size());
    auto dlogits = Upload(logits);
    auto dlabels = Upload(labels);
    auto dprobs = Output(static_cast<int64_t>(batch) * classes);
    XentResult result;
    result.loss_sum = -1.0;
    result.correct = -1;
    ops_->SoftmaxXentForward(dlogits.data(), dlabels.data(), batch, classes,
                             dprobs.data(), &result.loss_sum, &result.correct);
    result.probs = Download(dprobs);
    return result;
  }

  std::unique_ptr<Ops> ops_;
};

// ---- Memory. ----

TEST(CpuBlasKernelsTest, NamesOpenBlasAndItsCore) {
  const std::string kernels = CpuBlasKernels();
  EXPECT_TRUE(absl::StartsWith(kernels, "OpenBLAS ")) << kernels;
  EXPECT_GT(kernels.size(), std::string("OpenBLAS ").size()) << kernels;
}

TEST_F(CpuOpsTest, AllocateIsAlignedAndCopiesRoundTrip) {
  EXPECT_EQ(ops_->kind(), DeviceKind::kCpu);
  for (size_t bytes :
       {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{100}, size_t{4097}}) {
    absl::StatusOr<void*> ptr = ops_->Allocate(bytes);
    ASSERT_TRUE(ptr.ok()) << ptr.status();
    ASSERT_NE(*ptr, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*ptr) % 64, 0u) << bytes << " bytes";
    ops_->Free(*ptr);
  }
  ops_->Free(nullptr);

  const Vec host = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  auto a = Upload(host);
  auto b = Output(5);
  ops_->Copy(b.data(), a.data(), 5);
  EXPECT_EQ(Download(b), host);
  EXPECT_TRUE(ops_->Synchronize().ok());
}

TEST_F(CpuOpsTest, AllocateHugeIsResourceExhausted) {
  absl::StatusOr<void*> ptr = ops_->Allocate(std::numeric_limits<size_t>::max() / 2);
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kResourceExhausted);
  absl::StatusOr<void*> max = ops_->Allocate(std::numeric_limits<size_t>::max());
  EXPECT_EQ(max.status().code(), absl::StatusCode::kResourceExhausted);
}

// ---- Gemm. ----

// C = alpha * op(A) op(B) + beta * C in double; beta == 0 ignores C.
Vec NaiveGemm(bool ta, bool tb, int m, int n, int k, float alpha, const Vec& a,
              const Vec& b, float beta, const Vec& c, Vec* magnitude) {
  Vec out(static_cast<size_t>(m) * n);
  magnitude->assign(out.size(), 0.0f);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0.0, abs_sum = 0.0;
      for (int p = 0; p < k; ++p) {
        const double av = ta ? a[p * m + i] : a[i * k + p];
        const double bv = tb ? b[j * k + p] : b[p * n + j];
        sum += av * bv;
        abs_sum += std::fabs(av * bv);
      }
      double value = alpha * sum;
      double mag = std::fabs(alpha) * abs_sum;
      if (beta != 0.0f) {
        value += beta * static_cast<double>(c[i * n + j]);
        mag += std::fabs(beta * c[i * n + j]);
      }
      out[i * n + j] = static_cast<float>(value);
      (*magnitude)[i * n + j] = static_cast<float>(mag);
    }
  }
  return out;
}

TEST_F(CpuOpsTest, GemmMatchesNaiveReferenceForAllTransposes) {
  Rng rng(11);
  struct Shape {
    int m, n, k;
  };
  const Shape shapes[] = {{7, 5, 3}, {1, 1, 1}, {4, 9, 6}, {33, 17, 65}, {2, 70, 1}};
  const std::pair<float, float> scalars[] = {
      {1.0f, 0.0f}, {0.5f, 2.0f}, {-1.5f, 1.0f}, {0.0f, 0.5f}, {2.0f, -0.25f}};
  for (const Shape& s : shapes) {
    for (int trans = 0; trans < 4; ++trans) {
      const bool ta = trans & 1, tb = trans & 2;
      for (const auto& [alpha, beta] : scalars) {
        SCOPED_TRACE(testing::Message()
                     << "m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << ta
                     << " tb=" << tb << " alpha=" << alpha << " beta=" << beta);
        const Vec a = RandomVec(rng, static_cast<int64_t>(s.m) * s.k);
        const Vec b = RandomVec(rng, static_cast<int64_t>(s.k) * s.n);
        // beta == 0 must overwrite C without reading it: poison C with NaN.
        const Vec c = beta == 0.0f ? Vec(static_cast<size_t>(s.m) * s.n,
                                         std::numeric_limits<float>::quiet_NaN())
                                   : RandomVec(rng, static_cast<int64_t>(s.m) * s.n);
        Vec magnitude;
        const Vec want =
            NaiveGemm(ta, tb, s.m, s.n, s.k, alpha, a, b, beta, c, &magnitude);
        const Vec got = Gemm(ta, tb, s.m, s.n, s.k, alpha, a, b, beta, c);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_TRUE(std::isfinite(got[i])) << "index " << i;
          EXPECT_NEAR(got[i], want[i], 1e-5 * magnitude[i] + 1e-6) << "index " << i;
        }
      }
    }
  }
}

TEST_F(CpuOpsTest, GemmDegenerateSizes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // m == 0 or n == 0: nothing to write; C (one guard element here) is untouched.
  EXPECT_EQ(Gemm(false, false, 0, 3, 2, 1.0f, Vec(1), Vec(6, 1.0f), 0.0f, {42.0f}),
            Vec{42.0f});
  EXPECT_EQ(Gemm(true, true, 3, 0, 2, 1.0f, Vec(6, 1.0f), Vec(1), 0.0f, {42.0f}),
            Vec{42.0f});
  // k == 0: the product is empty, so C = beta * C (beta == 0 overwrites NaN).
  EXPECT_EQ(Gemm(false, false, 2, 2, 0, 1.0f, Vec(1), Vec(1), 0.0f, Vec(4, nan)),
            Vec(4, 0.0f));
  EXPECT_EQ(Gemm(false, true, 1, 2, 0, 1.0f, Vec(1), Vec(1), 2.0f, {1.0f, -3.0f}),
            (Vec{2.0f, -6.0f}));
  // 1x1x1 closed form.
  EXPECT_EQ(Gemm(false, false, 1, 1, 1, 2.0f, {3.0f}, {4.0f}, 0.0f, {nan}), Vec{24.0f});
}

// GemmStrided on sub-matrices of padded operands equals Gemm on packed copies, and
// leaves C's padding alone (also when k == 0).
TEST_F(CpuOpsTest, GemmStridedOnSubMatricesMatchesPackedGemm) {
  Rng rng(13);
  const float guard = 1234.5f;
  for (int k : {6, 0}) {
    for (int trans = 0; trans < 4; ++trans) {
      const bool ta = trans & 1, tb = trans & 2;
      const int m = 5, n = 7, pad = 3;
      SCOPED_TRACE(testing::Message() << "k=" << k << " ta=" << ta << " tb=" << tb);
      // Stored shapes: A [m, k] or [k, m], B [k, n] or [n, k], C [m, n]; each padded
      // with `pad` extra columns per row.
      const int a_rows = ta ? k : m, a_cols = ta ? m : k;
      const int b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
      // (One element at least: an empty operand still needs a valid pointer.)
      const Vec a_big = RandomVec(rng, std::max(1, a_rows * lda));
      const Vec b_big = RandomVec(rng, std::max(1, b_rows * ldb));
      Vec c_big(static_cast<size_t>(m) * ldc, guard);
      Vec a(std::max(1, a_rows * a_cols)), b(std::max(1, b_rows * b_cols)), c(m * n);
      for (int i = 0; i < a_rows; ++i) {
        for (int j = 0; j < a_cols; ++j) a[i * a_cols + j] = a_big[i * lda + j];
      }
      for (int i = 0; i < b_rows; ++i) {
        for (int j = 0; j < b_cols; ++j) b[i * b_cols + j] = b_big[i * ldb + j];
      }
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) c[i * n + j] = c_big[i * ldc + j] = rng.Uniform(-1, 1);
      }
      const Vec want = Gemm(ta, tb, m, n, k, 0.5f, a, b, 2.0f, c);
      auto da = Upload(a_big);
      auto db = Upload(b_big);
      auto dc = Upload(c_big);
      ops_->GemmStrided(ta, tb, m, n, k, 0.5f, da.data(), lda, db.data(), ldb, 2.0f,
                        dc.data(), ldc);
      const Vec got = Download(dc);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < ldc; ++j) {
          if (j < n) {
            EXPECT_FLOAT_EQ(got[i * ldc + j], want[i * n + j]) << i << "," << j;
          } else {
            EXPECT_EQ(got[i * ldc + j], guard) << "padding " << i << "," << j;
          }
        }
      }
    }
  }
}

// L = sum(W .* (A B)); dA = W B^T and dB = A^T W, both computed with the op itself.
TEST_F(CpuOpsTest, GemmFiniteDifferenceGradients) {
  Rng rng(12);
  const int m = 4, n = 5, k = 3;
  const Vec a = RandomVec(rng, m * k), b = RandomVec(rng, k * n);
  const Vec w = RandomVec(rng, m * n);
  const Vec zero_c(m * n, 0.0f);
  const Vec da = Gemm(false, true, m, k, n, 1.0f, w, b, 0.0f, Vec(m * k));
  const Vec db = Gemm(true, false, k, n, m, 1.0f, a, w, 0.0f, Vec(k * n));
  CheckGradient(
      [&](const Vec& x) { return Gemm(false, false, m, n, k, 1.0f, x, b, 0.0f, zero_c); },
      a, w, da);
  CheckGradient(
      [&](const Vec& x) { return Gemm(false, false, m, n, k, 1.0f, a, x, 0.0f, zero_c); },
      b, w, db);
  // The same through transposed storage: C = A^T B^T with A [k, m], B [n, k].
  const Vec at = RandomVec(rng, k * m), bt = RandomVec(rng, n * k);
  // dA_stored [k, m] = B_stored^T W^T: B stored [n, k] and W [m, n], both
  // transposed by the op.
  const Vec dat = Gemm(true, true, k, m, n, 1.0f, bt, w, 0.0f, Vec(k * m));
  // dB_stored [n, k] = W^T A_stored^T: W stored [m, n], A stored [k, m].
  const Vec dbt = Gemm(true, true, n, k, m, 1.0f, w, at, 0.0f, Vec(n * k));
  CheckGradient(
      [&](const Vec& x) { return Gemm(true, true, m, n, k, 1.0f, x, bt, 0.0f, zero_c); },
      at, w, dat);
  CheckGradient(
      [&](const Vec& x) { return Gemm(true, true, m, n, k, 1.0f, at, x, 0.0f, zero_c); },
      bt, w, dbt);
}

// ---- Bias. ----

TEST_F(CpuOpsTest, BiasAddAndGradClosedForm) {
  // Linear layout [outer=2, channels=3, inner=1].
  {
    auto y = Upload(Vec{1, 2, 3, 4, 5, 6});
    auto bias = Upload(Vec{10, 20, 30});
    ops_->BiasAdd(y.data(), bias.data(), 2, 3, 1);
    EXPECT_EQ(Download(y), (Vec{11, 22, 33, 14, 25, 36}));
    auto dy = Upload(Vec{1, 2, 3, 4, 5, 6});
    auto db = Output(3);
    ops_->BiasGrad(dy.data(), db.data(), 2, 3, 1, false);
    EXPECT_EQ(Download(db), (Vec{5, 7, 9}));
  }
  // Conv layout [outer=1, channels=2, inner=3].
  {
    auto y = Upload(Vec{1, 2, 3, 4, 5, 6});
    auto bias = Upload(Vec{-1, 100});
    ops_->BiasAdd(y.data(), bias.data(), 1, 2, 3);
    EXPECT_EQ(Download(y), (Vec{0, 1, 2, 104, 105, 106}));
    auto dy = Upload(Vec{1, 2, 3, 4, 5, 6});
    auto db = Output(2);
    ops_->BiasGrad(dy.data(), db.data(), 1, 2, 3, false);
    EXPECT_EQ(Download(db), (Vec{6, 15}));
  }
}

TEST_F(CpuOpsTest, BiasGradAccumulates) {
  // Linear layout [outer=2, channels=3, inner=1] and conv layout [1, 2, 3].
  auto dy = Upload(Vec{1, 2, 3, 4, 5, 6});
  auto db = Upload(Vec{100, 200, 300});
  ops_->BiasGrad(dy.data(), db.data(), 2, 3, 1, /*accumulate=*/true);
  EXPECT_EQ(Download(db), (Vec{105, 207, 309}));
  auto db2 = Upload(Vec{-6, 1});
  ops_->BiasGrad(dy.data(), db2.data(), 1, 2, 3, /*accumulate=*/true);
  EXPECT_EQ(Download(db2), (Vec{0, 16}));
}

TEST_F(CpuOpsTest, BiasBroadcastOverwrites) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Linear layout [outer=2, channels=3, inner=1]: NaNs must be overwritten.
  auto y = Upload(Vec{nan, nan, nan, nan, nan, nan});
  auto bias = Upload(Vec{10, 20, 30});
  ops_->BiasBroadcast(y.data(), bias.data(), 2, 3, 1);
  EXPECT_EQ(Download(y), (Vec{10, 20, 30, 10, 20, 30}));
  // Conv layout [outer=2, channels=2, inner=2].
  auto z = Upload(Vec{nan, nan, nan, nan, nan, nan, nan, nan});
  auto b2 = Upload(Vec{-1, 7});
  ops_->BiasBroadcast(z.data(), b2.data(), 2, 2, 2);
  EXPECT_EQ(Download(z), (Vec{-1, -1, 7, 7, -1, -1, 7, 7}));
}

// General [outer, channels, inner] against a double reference, including an inner
// size that is not a multiple of the vector width.
TEST_F(CpuOpsTest, BiasGradMatchesReference) {
  Rng rng(21);
  struct Shape {
    int outer, channels, inner;
  };
  for (const Shape& s :
       {Shape{1, 3, 1000}, Shape{3, 2, 37}, Shape{129, 7, 1}, Shape{1, 1, 1}}) {
    const Vec dy = RandomVec(rng, static_cast<int64_t>(s.outer) * s.channels * s.inner);
    auto ddy = Upload(dy);
    auto db = Output(s.channels);
    ops_->BiasGrad(ddy.data(), db.data(), s.outer, s.channels, s.inner, false);
    const Vec got = Download(db);
    for (int c = 0; c < s.channels; ++c) {
      double want = 0.0;
      for (int o = 0; o < s.outer; ++o) {
        for (int i = 0; i < s.inner; ++i) {
          want += dy[(static_cast<int64_t>(o) * s.channels + c) * s.inner + i];
        }
      }
      EXPECT_NEAR(got[c], want, 1e-4) << "channel " << c << " inner " << s.inner;
    }
  }
}

TEST_F(CpuOpsTest, BiasFiniteDifferenceGradients) {
  Rng rng(22);
  struct Shape {
    int outer, channels, inner;
  };
  for (const Shape& s : {Shape{3, 4, 1}, Shape{1, 3, 10}, Shape{2, 3, 5}}) {
    const int64_t size = static_cast<int64_t>(s.outer) * s.channels * s.inner;
    const Vec y0 = RandomVec(rng, size);
    const Vec bias = RandomVec(rng, s.channels);
    const Vec w = RandomVec(rng, size);
    auto dw = Upload(w);
    auto db = Output(s.channels);
    ops_->BiasGrad(dw.data(), db.data(), s.outer, s.channels, s.inner, false);
    CheckGradient(
        [&](const Vec& b) {
          auto y = Upload(y0);
          auto dbias = Upload(b);
          ops_->BiasAdd(y.data(), dbias.data(), s.outer, s.channels, s.inner);
          return Download(y);
        },
        bias, w, Download(db));
  }
}

// ---- Activations. ----

TEST_F(CpuOpsTest, ReluClosedFormAndInPlace) {
  const Vec x = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f, -1e-30f, 1e-30f};
  const Vec want = {0.0f, 0.0f, 0.0f, 0.5f, 3.0f, 0.0f, 1e-30f};
  auto dx = Upload(x);
  auto dy = Output(x.size());
  ops_->ReluForward(dx.data(), dy.data(), x.size());
  EXPECT_EQ(Download(dy), want);
  ops_->ReluForward(dx.data(), dx.data(), x.size());  // y aliases x.
  EXPECT_EQ(Download(dx), want);

  const Vec grad = {1, 2, 3, 4, 5, 6, 7};
  const Vec want_grad = {0, 0, 0, 4, 5, 0, 7};
  auto dgrad = Upload(grad);
  auto dout = Output(grad.size());
  ops_->ReluBackward(dy.data(), dgrad.data(), dout.data(), grad.size());
  EXPECT_EQ(Download(dout), want_grad);
  ops_->ReluBackward(dy.data(), dgrad.data(), dgrad.data(), grad.size());  // dx = dy.
  EXPECT_EQ(Download(dgrad), want_grad);
}

// A diverged step must stay visible: ReLU keeps NaN and +inf as torch.relu does (a NaN
// turned into 0 here once let lr=1e30 runs train on with finite losses).
TEST_F(CpuOpsTest, ReluKeepsNonFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  // Long enough for the vectorised loop, non-finite values at both ends and inside.
  Vec x(37, -1.0f);
  x[0] = std::nanf("");
  x[17] = inf;
  x[18] = -inf;
  x[36] = std::nanf("");
  auto dx = Upload(x);
  ops_->ReluForward(dx.data(), dx.data(), x.size());
  const Vec y = Download(dx);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[17], inf);
  EXPECT_EQ(y[18], 0.0f);
  EXPECT_TRUE(std::isnan(y[36]));
  for (int i : {1, 16, 19, 35}) EXPECT_EQ(y[i], 0.0f) << i;
}

TEST_F(CpuOpsTest, ReluFiniteDifferenceGradient) {
  Rng rng(31);
  const int n = 67;
  const Vec x = AwayFromZero(rng, n);
  const Vec w = RandomVec(rng, n);
  auto relu = [&](const Vec& in) {
    auto din = Upload(in);
    auto dout = Output(n);
    ops_->ReluForward(din.data(), dout.data(), n);
    return Download(dout);
  };
  auto dy = Upload(relu(x));
  auto dw = Upload(w);
  auto dx = Output(n);
  ops_->ReluBackward(dy.data(), dw.data(), dx.data(), n);
  CheckGradient(relu, x, w, Download(dx));
}

// ---- Softmax cross-entropy. ----

TEST_F(CpuOpsTest, SoftmaxXentEqualLogits) {
  const int classes = 10;
  const std::vector<int32_t> labels = {0, 3, 9, 0};
  const XentResult r = SoftmaxXent(Vec(labels.size() * classes, 2.5f), labels, classes);
  EXPECT_NEAR(r.loss_sum, labels.size() * std::log(10.0), 1e-5);
  for (float p : r.probs) EXPECT_NEAR(p, 0.1f, 1e-7f);
  // Ties: the first index is the argmax, so only the label-0 rows count.
  EXPECT_EQ(r.correct, 2);
}

TEST_F(CpuOpsTest, SoftmaxXentKnownValuesAndCorrectCount) {
  // Row 0: logits {0, ln 3} -> p = {1/4, 3/4}; label 1 (correct), loss -ln(3/4).
  // Row 1: logits {1, 1, 1 + ln 2} over 3 classes -> p = {1/4, 1/4, 1/2}; label 0
  // (wrong), loss ln 4. Padded to 3 classes with -inf-like logits in row 0.
  const int classes = 3;
  const float ln2 = std::log(2.0f), ln3 = std::log(3.0f);
  const Vec logits = {0.0f, ln3, -200.0f, 1.0f, 1.0f, 1.0f + ln2};
  const XentResult r = SoftmaxXent(logits, {1, 0}, classes);
  EXPECT_NEAR(r.loss_sum, -std::log(0.75) + std::log(4.0), 1e-5);
  EXPECT_EQ(r.correct, 1);
  const Vec want = {0.25f, 0.75f, 0.0f, 0.25f, 0.25f, 0.5f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.probs[i], want[i], 1e-6);
  for (int row = 0; row < 2; ++row) {
    double sum = 0.0;
    for (int j = 0; j < classes; ++j) sum += r.probs[row * classes + j];
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

TEST_F(CpuOpsTest, SoftmaxXentHugeLogitsStayFinite) {
  const int classes = 3;
  const Vec logits = {1e4f, 0.0f, -1e4f, 1e4f, 0.0f, -1e4f, -1e4f, -1e4f, -1e4f};
  const XentResult r = SoftmaxXent(logits, {0, 1, 2}, classes);
  // Row 0: loss ~0; row 1: loss 1e4; row 2: all equal, loss ln 3.
  EXPECT_TRUE(std::isfinite(r.loss_sum));
  EXPECT_NEAR(r.loss_sum, 1e4 + std::log(3.0), 1e-3);
  for (float p : r.probs) EXPECT_TRUE(std::isfinite(p));
  EXPECT_FLOAT_EQ(r.probs[0], 1.0f);
  EXPECT_EQ(r.probs[1], 0.0f);
  EXPECT_EQ(r.correct, 1);  // Row 0 right, row 1 wrong, row 2 ties -> index 0 wrong.
}

TEST_F(CpuOpsTest, SoftmaxXentEmptyBatch) {
  const XentResult r = SoftmaxXent(Vec(), {}, 5);
  EXPECT_EQ(r.loss_sum, 0.0);
  EXPECT_EQ(r.correct, 0);
}

TEST_F(CpuOpsTest, SoftmaxXentBackwardClosedFormAndInPlace) {
  const Vec probs = {0.25f, 0.75f, 0.5f, 0.5f};
  const std::vector<int32_t> labels = {1, 0};
  const Vec want = {0.125f, -0.125f, -0.25f, 0.25f};  // 0.5 * (p - onehot).
  auto dprobs = Upload(probs);
  auto dlabels = Upload(labels);
  auto dout = Output(4);
  ops_->SoftmaxXentBackward(dprobs.data(), dlabels.data(), 2, 2, 0.5f, dout.data());
  EXPECT_EQ(Download(dout), want);
  ops_->SoftmaxXentBackward(dprobs.data(), dlabels.data(), 2, 2, 0.5f, dprobs.data());
  EXPECT_EQ(Download(dprobs), want);
}

// L = mean over the batch of -log p[label]; dL/dlogits = (p - onehot) / batch.
TEST_F(CpuOpsTest, SoftmaxXentFiniteDifferenceGradient) {
  Rng rng(41);
  const int batch = 4, classes = 7;
  Vec logits = RandomVec(rng, batch * classes, -3.0f, 3.0f);
  std::vector<int32_t> labels(batch);
  for (int32_t& label : labels) label = static_cast<int32_t>(rng.Below(classes));
  const XentResult r = SoftmaxXent(logits, labels, classes);
  auto dprobs = Upload(r.probs);
  auto dlabels = Upload(labels);
  auto dlogits = Output(batch * classes);
  ops_->SoftmaxXentBackward(dprobs.data(), dlabels.data(), batch, classes, 1.0f / batch,
                            dlogits.data());
  CheckGradient(
      [&](const Vec& z) {
        return Vec{static_cast<float>(SoftmaxXent(z, labels, classes).loss_sum / batch)};
      },
      logits, {1.0f}, Download(dlogits), 1e-2f, 1e-2, 1e-4);
}

// ---- Im2Col / Col2Im. ----

Vec NaiveIm2Col(const Vec& x, int channels, int batch, int h, int w, int kernel, int pad,
                int stride) {
  const int ho = (h + 2 * pad - kernel) / stride + 1;
  const int wo = (w + 2 * pad - kernel) / stride + 1;
  const int64_t cols = static_cast<int64_t>(batch) * ho * wo;
  Vec col(static_cast<size_t>(channels) * kernel * kernel * cols);
  for (int c = 0; c < channels; ++c)
    for (int ky = 0; ky < kernel; ++ky)
      for (int kx = 0; kx < kernel; ++kx)
        for (int b = 0; b < batch; ++b)
          for (int oy = 0; oy < ho; ++oy)
            for (int ox = 0; ox < wo; ++ox) {
              const int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
              const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
              col[((c * kernel + ky) * kernel + kx) * cols + (b * ho + oy) * wo + ox] =
                  inside ? x[((static_cast<int64_t>(c) * batch + b) * h + iy) * w + ix]
                         : 0.0f;
            }
  return col;
}

struct ConvShape {
  int channels, batch, height, width, kernel, pad, stride;
};

std::string ToString(const ConvShape& s) {
  return "C=" + std::to_string(s.channels) + " B=" + std::to_string(s.batch) +
         " H=" + std::to_string(s.height) + " W=" + std::to_string(s.width) +
         " k=" + std::to_string(s.kernel) + " pad=" + std::to_string(s.pad) +
         " stride=" + std::to_string(s.stride);
}

const ConvShape kConvShapes[] = {
    {2, 3, 5, 6, 3, 0, 1}, {2, 2, 5, 6, 3, 1, 1}, {1, 2, 7, 5, 3, 2, 1},
    {2, 2, 7, 6, 3, 0, 2}, {2, 1, 7, 8, 3, 1, 2}, {1, 2, 6, 7, 5, 2, 2},
    {3, 2, 4, 4, 1, 0, 1}, {1, 1, 3, 3, 3, 2, 2}, {1, 2, 4, 5, 2, 1, 3},
};

int64_t ColSize(const ConvShape& s) {
  const int ho = (s.height + 2 * s.pad - s.kernel) / s.stride + 1;
  const int wo = (s.width + 2 * s.pad - s.kernel) / s.stride + 1;
  return static_cast<int64_t>(s.channels) * s.kernel * s.kernel * s.batch * ho * wo;
}

int64_t ImageSize(const ConvShape& s) {
  return static_cast<int64_t>(s.channels) * s.batch * s.height * s.width;
}

TEST_F(CpuOpsTest, Im2ColMatchesNaiveReference) {
  Rng rng(51);
  for (const ConvShape& s : kConvShapes) {
    SCOPED_TRACE(ToString(s));
    const Vec x = RandomVec(rng, ImageSize(s));
    EXPECT_EQ(
        Im2Col(x, s.channels, s.batch, s.height, s.width, s.kernel, s.pad, s.stride),
        NaiveIm2Col(x, s.channels, s.batch, s.height, s.width, s.kernel, s.pad,
                    s.stride));
  }
}

TEST_F(CpuOpsTest, Im2ColKnownSmallCase) {
  // One 3x3 image 1..9, kernel 2, pad 0, stride 1 -> 2x2 output positions.
  const Vec col = Im2Col({1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 1, 3, 3, 2, 0, 1);
  EXPECT_EQ(col, (Vec{1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9}));
  // Col2Im of all ones counts how many windows cover each pixel.
  EXPECT_EQ(Col2Im(Vec(16, 1.0f), 1, 1, 3, 3, 2, 0, 1), (Vec{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

// <Im2Col(x), c> == <x, Col2Im(c)>.
TEST_F(CpuOpsTest, Col2ImIsAdjointOfIm2Col) {
  Rng rng(52);
  for (const ConvShape& s : kConvShapes) {
    SCOPED_TRACE(ToString(s));
    const Vec x = RandomVec(rng, ImageSize(s));
    const Vec c = RandomVec(rng, ColSize(s));
    const double lhs = Dot(
        Im2Col(x, s.channels, s.batch, s.height, s.width, s.kernel, s.pad, s.stride), c);
    const double rhs = Dot(
        x, Col2Im(c, s.channels, s.batch, s.height, s.width, s.kernel, s.pad, s.stride));
    EXPECT_NEAR(lhs, rhs, 1e-4 * std::max(1.0, std::fabs(lhs)));
  }
}

TEST_F(CpuOpsTest, Im2ColCol2ImFiniteDifferenceGradients) {
  Rng rng(53);
  for (const ConvShape& s : kConvShapes) {
    SCOPED_TRACE(ToString(s));
    auto im2col = [&](const Vec& x) {
      return Im2Col(x, s.channels, s.batch, s.height, s.width, s.kernel, s.pad, s.stride);
    };
    auto col2im = [&](const Vec& c) {
      return Col2Im(c, s.channels, s.batch, s.height, s.width, s.kernel, s.pad, s.stride);
    };
    const Vec x = RandomVec(rng, ImageSize(s));
    const Vec w_col = RandomVec(rng, ColSize(s));
    CheckGradient(im2col, x, w_col, col2im(w_col));
    const Vec c = RandomVec(rng, ColSize(s));
    const Vec w_img = RandomVec(rng, ImageSize(s));
    CheckGradient(col2im, c, w_img, im2col(w_img));
  }
}

// ---- Max pooling. ----

TEST_F(CpuOpsTest, MaxPoolKnownArgmaxTiesAndOddSize) {
  // One 5x5 plane: output 2x2; the last row and column (holding 100) are dropped.
  // Window (0,0): max 9 at offset 6. Window (0,1): all 4 equal -> first, offset 2.
  // Window (1,0): tie between offsets 15 and 16 -> 15. Window (1,1): max at 18.
  const Vec x = {
      1,   2,   4,   4,   100,  //
      3,   9,   4,   4,   100,  //
      0,   0,   -5,  -7,  100,  //
      8,   8,   -6,  -1,  100,  //
      100, 100, 100, 100, 100,
  };
  const auto [y, argmax] = MaxPool(x, 1, 5, 5);
  EXPECT_EQ(y, (Vec{9, 4, 8, -1}));
  EXPECT_EQ(argmax, (std::vector<int32_t>{6, 2, 15, 18}));
  const Vec dx = MaxPoolBackward({1, 2, 3, 4}, argmax, 1, 5, 5);
  Vec want(25, 0.0f);
  want[6] = 1;
  want[2] = 2;
  want[15] = 3;
  want[18] = 4;
  EXPECT_EQ(dx, want);
}

TEST_F(CpuOpsTest, MaxPoolOffsetsAreWithinEachPlane) {
  // Two 2x3 planes (odd width): one output each, argmax relative to its plane.
  const Vec x = {1, 2, 50, 3, 4, 50, /**/ 7, 1, -50, 1, 1, -50};
  const auto [y, argmax] = MaxPool(x, 2, 2, 3);
  EXPECT_EQ(y, (Vec{4, 7}));
  EXPECT_EQ(argmax, (std::vector<int32_t>{4, 0}));
  EXPECT_EQ(MaxPoolBackward({5, 6}, argmax, 2, 2, 3),
            (Vec{0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0}));
}

TEST_F(CpuOpsTest, MaxPoolFiniteDifferenceGradient) {
  Rng rng(61);
  for (const auto& [planes, h, w] :
       {std::tuple<int, int, int>{3, 4, 6}, std::tuple<int, int, int>{2, 5, 7}}) {
    const int n = planes * h * w;
    // Distinct values 0.1 apart (a shuffled ramp): no near-ties within 2 * eps.
    Vec x(n);
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng.Below(i + 1)]);
    for (int i = 0; i < n; ++i) x[i] = 0.1f * (order[i] - n / 2);
    const Vec weights = RandomVec(rng, planes * (h / 2) * (w / 2));
    const auto [y, argmax] = MaxPool(x, planes, h, w);
    CheckGradient([&](const Vec& in) { return MaxPool(in, planes, h, w).first; }, x,
                  weights, MaxPoolBackward(weights, argmax, planes, h, w));
  }
}

// ---- SwapAxes01. ----

TEST_F(CpuOpsTest, SwapAxes01KnownAndRoundTrip) {
  // [2, 3, 1] -> [3, 2, 1]: a transpose.
  EXPECT_EQ(SwapAxes01({0, 1, 2, 3, 4, 5}, 2, 3, 1), (Vec{0, 3, 1, 4, 2, 5}));
  // [2, 2, 2]: blocks of 2 move as a whole.
  EXPECT_EQ(SwapAxes01({0, 1, 2, 3, 4, 5, 6, 7}, 2, 2, 2), (Vec{0, 1, 4, 5, 2, 3, 6, 7}));
  Rng rng(71);
  for (const auto& [d0, d1, inner] :
       {std::tuple<int, int, int>{3, 5, 7}, std::tuple<int, int, int>{4, 1, 9},
        std::tuple<int, int, int>{6, 5, 1}}) {
    const Vec in = RandomVec(rng, d0 * d1 * inner);
    const Vec out = SwapAxes01(in, d0, d1, inner);
    for (int i = 0; i < d0; ++i)
      for (int j = 0; j < d1; ++j)
        for (int k = 0; k < inner; ++k)
          ASSERT_EQ(out[(j * d0 + i) * inner + k], in[(i * d1 + j) * inner + k]);
    EXPECT_EQ(SwapAxes01(out, d1, d0, inner), in);
  }
}

TEST_F(CpuOpsTest, SwapAxes01FiniteDifferenceGradient) {
  Rng rng(72);
  const int d0 = 3, d1 = 4, inner = 5;
  const Vec x = RandomVec(rng, d0 * d1 * inner);
  const Vec w = RandomVec(rng, d0 * d1 * inner);
  CheckGradient([&](const Vec& in) { return SwapAxes01(in, d0, d1, inner); }, x, w,
                SwapAxes01(w, d1, d0, inner));
}

// ---- SGD and BLAS-1. ----

// One PyTorch SGD step on one parameter (dampening 0, buf starts at 0).
void ReferenceSgd(float* p, float g, float* buf, const SgdHyper& h) {
  double d = static_cast<double>(g) + h.weight_decay * static_cast<double>(*p);
  if (h.momentum != 0.0f) {
    const double v = h.momentum * static_cast<double>(*buf) + d;
    *buf = static_cast<float>(v);
    d = h.nesterov ? d + h.momentum * v : v;
  }
  *p = static_cast<float>(*p - h.lr * d);
}

TEST_F(CpuOpsTest, SgdUpdateMatchesPyTorchFormulaOverThreeSteps) {
  const SgdHyper hypers[] = {
      {0.1f, 0.0f, 0.0f, false},    // plain
      {0.1f, 0.0f, 0.01f, false},   // plain + weight decay
      {0.05f, 0.9f, 0.0f, false},   // momentum
      {0.05f, 0.9f, 5e-4f, false},  // momentum + weight decay
      {0.05f, 0.9f, 0.0f, true},    // nesterov
      {0.05f, 0.9f, 1e-2f, true},   // nesterov + weight decay
  };
  Rng rng(81);
  const int n = 4500;  // Spans several of the kernel's blocks, with a ragged tail.
  for (const SgdHyper& h : hypers) {
    SCOPED_TRACE(testing::Message()
                 << "lr=" << h.lr << " momentum=" << h.momentum
                 << " wd=" << h.weight_decay << " nesterov=" << h.nesterov);
    Vec params = RandomVec(rng, n);
    Vec buf(n, 0.0f);
    auto dparams = Upload(params);
    auto dbuf = Upload(buf);
    for (int step = 0; step < 3; ++step) {
      const Vec grads = RandomVec(rng, n);
      auto dgrads = Upload(grads);
      // momentum == 0: the buffer may be null. Odd steps also consume the gradients.
      const bool zero_grads = step % 2 == 1;
      ops_->SgdUpdate(dparams.data(), dgrads.data(),
                      h.momentum != 0.0f ? dbuf.data() : nullptr, n, h, zero_grads);
      for (int i = 0; i < n; ++i) ReferenceSgd(&params[i], grads[i], &buf[i], h);
      EXPECT_EQ(Download(dgrads), zero_grads ? Vec(n, 0.0f) : grads);
    }
    const Vec got = Download(dparams);
    const Vec got_buf = Download(dbuf);
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(got[i], params[i], 1e-6) << "param " << i;
      // The state kept is the carried term, momentum * PyTorch's momentum_buffer.
      EXPECT_NEAR(got_buf[i], h.momentum * buf[i], 1e-6) << "buf " << i;
    }
  }
}

TEST_F(CpuOpsTest, SgdUpdateClosedFormMomentum) {
  // p = 1, g = 1 every step, lr = 0.1, momentum 0.5:
  // plain momentum: buf 1, 1.5 -> p = 1 - 0.1 - 0.15 = 0.75.
  // nesterov:       buf 1, 1.5; d = 1 + 0.5 * buf -> 1.5, 1.75 -> p = 0.675.
  // The state kept is 0.5 * buf = 0.75.
  for (const auto& [nesterov, want] :
       {std::pair<bool, float>{false, 0.75f}, std::pair<bool, float>{true, 0.675f}}) {
    auto p = Upload(Vec{1.0f});
    auto g = Upload(Vec{1.0f});
    auto buf = Upload(Vec{0.0f});
    const SgdHyper h{0.1f, 0.5f, 0.0f, nesterov};
    ops_->SgdUpdate(p.data(), g.data(), buf.data(), 1, h, false);
    ops_->SgdUpdate(p.data(), g.data(), buf.data(), 1, h, false);
    EXPECT_NEAR(Download(p)[0], want, 1e-6) << "nesterov " << nesterov;
    EXPECT_NEAR(Download(buf)[0], 0.75f, 1e-6);
  }
}

// torch.optim.SGD's step in float, one rounding per operation as its loop reads:
// d = g + wd * p; buf = momentum * buf + d; d = nesterov ? d + momentum * buf : buf;
// p = p - lr * d. (This file compiles with -ffp-contract=off, so nothing is fused.)
void TorchSgdInFloat(float* p, float g, float* buf, const SgdHyper& h) {
  float d = g + h.weight_decay * *p;
  if (h.momentum != 0.0f) {
    *buf = h.momentum * *buf + d;
    d = h.nesterov ? d + h.momentum * *buf : *buf;
  }
  *p = *p - h.lr * d;
}

// Keeping the carried term instead of PyTorch's buffer changes no bit of the update.
TEST_F(CpuOpsTest, SgdUpdateRoundsLikeTorchsFormulaOperationByOperation) {
  const SgdHyper hypers[] = {
      {0.1f, 0.0f, 0.01f, false},
      {0.05f, 0.9f, 0.0f, false},
      {0.05f, 0.9f, 5e-4f, false},
      {0.05f, 0.9f, 1e-2f, true},
  };
  Rng rng(83);
  const int n = 4500;
  for (const SgdHyper& h : hypers) {
    SCOPED_TRACE(testing::Message() << "momentum=" << h.momentum << " wd=" << h.weight_decay
                                    << " nesterov=" << h.nesterov);
    Vec params = RandomVec(rng, n);
    Vec torch_buf(n, 0.0f);
    auto dparams = Upload(params);
    auto dstate = Upload(Vec(n, 0.0f));
    for (int step = 0; step < 4; ++step) {
      const Vec grads = RandomVec(rng, n);
      auto dgrads = Upload(grads);
      ops_->SgdUpdate(dparams.data(), dgrads.data(), h.momentum != 0.0f ? dstate.data() : nullptr,
                      n, h, /*zero_grads=*/false);
      for (int i = 0; i < n; ++i) TorchSgdInFloat(&params[i], grads[i], &torch_buf[i], h);
    }
    EXPECT_EQ(Download(dparams), params);
    if (h.momentum != 0.0f) {
      const Vec state = Download(dstate);
      for (int i = 0; i < n; ++i) ASSERT_EQ(state[i], h.momentum * torch_buf[i]) << i;
    }
  }
}

// SgdUpdateCarried on acc = u + g is SgdUpdate on (g, u): bit for bit without weight
// decay, within rounding with it; momentum 0 leaves acc zeroed.
TEST_F(CpuOpsTest, SgdUpdateCarriedMatchesSgdUpdate) {
  const SgdHyper hypers[] = {
      {0.1f, 0.0f, 0.0f, false},
      {0.1f, 0.0f, 0.01f, false},
      {0.05f, 0.9f, 0.0f, false},
      {0.05f, 0.9f, 5e-4f, false},
  };
  Rng rng(84);
  const int n = 3001;
  for (const SgdHyper& h : hypers) {
    SCOPED_TRACE(testing::Message() << "momentum=" << h.momentum << " wd=" << h.weight_decay);
    const Vec p0 = RandomVec(rng, n);
    auto p_split = Upload(p0);
    auto p_carried = Upload(p0);
    auto state = Upload(Vec(n, 0.0f));
    auto acc = Upload(Vec(n, 0.0f));
    for (int step = 0; step < 3; ++step) {
      const Vec grads = RandomVec(rng, n);
      auto g = Upload(grads);
      ops_->SgdUpdate(p_split.data(), g.data(), h.momentum != 0.0f ? state.data() : nullptr, n,
                      h, /*zero_grads=*/false);
      ops_->Axpy(n, 1.0f, g.data(), acc.data());  // What an accumulating backward does.
      ops_->SgdUpdateCarried(p_carried.data(), acc.data(), n, h);
    }
    const Vec want_p = Download(p_split);
    const Vec got_p = Download(p_carried);
    const Vec want_u = h.momentum != 0.0f ? Download(state) : Vec(n, 0.0f);
    const Vec got_u = Download(acc);
    if (h.weight_decay == 0.0f) {
      EXPECT_EQ(got_p, want_p);
      EXPECT_EQ(got_u, want_u);
    } else {
      for (int i = 0; i < n; ++i) {
        ASSERT_NEAR(got_p[i], want_p[i], 1e-6f) << i;
        ASSERT_NEAR(got_u[i], want_u[i], 1e-6f) << i;
      }
    }
  }
}

TEST_F(CpuOpsTest, FillScaleAxpy) {
  const int n = 19;  // Not a multiple of the vector width.
  auto x = Output(n);
  ops_->Fill(x.data(), n, 2.0f);
  EXPECT_EQ(Download(x), Vec(n, 2.0f));
  ops_->Scale(x.data(), n, -1.5f);
  EXPECT_EQ(Download(x), Vec(n, -3.0f));
  Vec ramp(n);
  std::iota(ramp.begin(), ramp.end(), 0.0f);
  auto y = Upload(ramp);
  ops_->Axpy(n, 0.5f, x.data(), y.data());
  const Vec got = Download(y);
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[i], i - 1.5f);
  ops_->Fill(x.data(), 0, 7.0f);  // n == 0 is a no-op.
  EXPECT_EQ(Download(x), Vec(n, -3.0f));
}

}  // namespace
}  // namespace ringside
