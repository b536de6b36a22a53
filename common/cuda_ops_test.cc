// The CUDA ops backend against the CPU backend: every op of the Ops interface runs on
// both with the same random inputs (never zeros), and the results are compared.
//
// - Every output buffer is poisoned (NaN, or -7 for int32) before the op, so an element
//   the op fails to write is caught; every buffer also carries kGuard guard elements
//   after its end (and GemmStrided's C its padding columns), which must come back
//   untouched on both backends: writes out of bounds are caught too.
// - Shapes are chosen off the warp (32) and tile sizes: 1, 3, 17, 33, 127, 257, 1000,
//   odd channel counts and image sizes, and n = 0 / batch 0 wherever ops.h allows it.
//
// Tolerances, and why:
// - Copies, permutations and selections (Copy, Fill, Scale, BiasAdd, BiasBroadcast,
//   ReLU, Im2Col, SwapAxes01, max-pool values and argmax, argmax counts): bit-exact.
//   Each output is the same single IEEE operation (or none) on both backends.
// - Elementwise ops with two or more roundings (SGD, Axpy, the softmax backward): the
//   GPU may contract a * b + c into one FMA where the CPU rounds twice (cpu_ops builds
//   with -ffp-contract=off), which moves a result by about an ulp of the operands:
//   |gpu - cpu| <= 1e-6 * (|cpu| + scale of the operands).
// - Sums (GEMM, BiasGrad, Col2Im, softmax's denominator and loss): the two backends
//   add in different orders, so the bound is relative to the sum of the magnitudes of
//   the terms (computed by the CPU op on absolute values), which also covers
//   cancellation: |gpu - cpu| <= 1e-5 * sum |terms|. GEMMs also meet a norm-wise
//   ||gpu - cpu|| / ||cpu|| < 1e-5 in FP32 (rounding of k-term sums is about
//   sqrt(k) * 6e-8 relative, far below; TF32 left on by mistake would give ~1e-3).
//   The TF32 and BF16 options round the operands to 10 and 7 mantissa bits, about
//   5e-4 and 4e-3 relative per product: norm-wise < 1e-2.
//
// With no CUDA in the build or no usable GPU, every test skips with the factory's
// reason.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/ops.h"
#include "common/ops_factory.h"
#include "common/random.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// The backend under test; the CPU backend is the reference.
constexpr char kDeviceKind[] = "cuda";

using Vec = std::vector<float>;
using IntVec = std::vector<int32_t>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Guard elements after every buffer, and their values.
constexpr int kGuard = 37;
constexpr float kGuardFloat = -31337.25f;
constexpr int32_t kGuardInt = 0x5eadbeef;
// Poison for int32 outputs.
constexpr int32_t kPoisonInt = -7;

template <typename T>
T GuardValue() {
  if constexpr (std::is_same_v<T, float>) {
    return kGuardFloat;
  } else {
    return kGuardInt;
  }
}

// Uniform in [lo, hi): random, and (but for a 2^-24 chance per element) never 0.
Vec RandomVec(Rng& rng, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  Vec v(n);
  for (float& x : v) x = rng.Uniform(lo, hi);
  return v;
}

IntVec RandomLabels(Rng& rng, int64_t n, int classes) {
  IntVec v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(rng.Below(classes));
  return v;
}

Vec Abs(const Vec& v) {
  Vec out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(v[i]);
  return out;
}

// ||got - want|| / ||want|| over all elements; 0 when both are 0.
double NormRelError(const Vec& got, const Vec& want) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    ref += static_cast<double>(want[i]) * want[i];
  }
  if (ref == 0) return diff == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / ref);
}

// Bit-exact equality up to the sign of zero; reports the number of mismatches and the
// first few.
template <typename T>
void ExpectSame(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    // NaN never matches: no op here is given inputs that make a NaN.
    if (got[i] == want[i]) continue;
    if (++bad <= 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", CPU gives "
                    << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.size() << " elements differ";
}

// |got - want| <= rel * scale[i] per element (and finite).
void ExpectNearScaled(const Vec& got, const Vec& want, const Vec& scale, double rel,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(scale.size(), want.size()) << what;
  int64_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double tol = rel * scale[i];
    if (scale[i] > 0) worst = std::max(worst, diff / scale[i]);
    if (std::isfinite(got[i]) && diff <= tol) continue;
    if (++bad <= 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", CPU gives "
                    << want[i] << " (tolerance " << tol << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.size()
                    << " elements out of tolerance (worst |difference| / scale "
                    << worst << ")";
}

// |got - want| <= rel * (|want| + floor) per element: elementwise ops on operands of
// scale `floor`.
void ExpectNearRel(const Vec& got, const Vec& want, double rel, double floor,
                   const std::string& what) {
  Vec scale(want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    scale[i] = static_cast<float>(std::fabs(want[i]) + floor);
  }
  ExpectNearScaled(got, want, scale, rel, what);
}

// A buffer of n elements of T (plus kGuard guard elements) in the memory of both
// backends.
template <typename T>
struct Twin {
  DeviceArray<T> cpu;
  DeviceArray<T> dev;
  int64_t n = 0;
  T* c() { return cpu.data(); }
  T* d() { return dev.data(); }
};

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Ops>> dev = NewOps(kDeviceKind, 0, 0);
    if (!dev.ok()) GTEST_SKIP() << "no CUDA GPU: " << dev.status();
    dev_ = *std::move(dev);
    absl::StatusOr<std::unique_ptr<Ops>> cpu = NewOps("cpu", 0, 1);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *std::move(cpu);
  }

  void TearDown() override {
    if (dev_ != nullptr) {
      const absl::Status status = dev_->Synchronize();
      EXPECT_TRUE(status.ok()) << status;
    }
  }

  // Copies `host` into both backends (followed by the guard elements).
  template <typename T>
  Twin<T> Make(const std::vector<T>& host) {
    Twin<T> t;
    t.n = static_cast<int64_t>(host.size());
    std::vector<T> padded = host;
    padded.resize(host.size() + kGuard, GuardValue<T>());
    const size_t bytes = padded.size() * sizeof(T);
    t.cpu = DeviceArray<T>::Create(cpu_.get(), padded.size()).value();
    t.dev = DeviceArray<T>::Create(dev_.get(), padded.size()).value();
    EXPECT_TRUE(cpu_->CopyToDevice(t.cpu.data(), padded.data(), bytes).ok());
    const absl::Status status = dev_->CopyToDevice(t.dev.data(), padded.data(), bytes);
    EXPECT_TRUE(status.ok()) << status;
    return t;
  }

  // n outputs poisoned with NaN (float) or kPoisonInt (int32).
  template <typename T>
  Twin<T> Poisoned(int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      return Make(Vec(n, kNaN));
    } else {
      return Make(IntVec(n, kPoisonInt));
    }
  }

  // The n elements of each side; checks that the guard elements are intact and that
  // the device reports no error.
  template <typename T>
  std::vector<T> Cpu(const Twin<T>& t) {
    return Fetch(cpu_.get(), t.cpu.data(), t.n, "cpu");
  }
  template <typename T>
  std::vector<T> Dev(const Twin<T>& t) {
    return Fetch(dev_.get(), t.dev.data(), t.n, "device");
  }

  template <typename T>
  std::vector<T> Fetch(Ops* ops, const T* data, int64_t n, const char* side) {
    std::vector<T> host(n + kGuard);
    const absl::Status copy = ops->CopyToHost(host.data(), data, host.size() * sizeof(T));
    EXPECT_TRUE(copy.ok()) << side << ": " << copy;
    const absl::Status sync = ops->Synchronize();
    EXPECT_TRUE(sync.ok()) << side << ": " << sync;
    for (int i = 0; i < kGuard; ++i) {
      if (host[n + i] != GuardValue<T>()) {
        ADD_FAILURE() << side << ": guard element " << i << " after " << n
                      << " elements was overwritten with " << host[n + i];
        break;
      }
    }
    host.resize(n);
    return host;
  }

  std::unique_ptr<Ops> cpu_;
  std::unique_ptr<Ops> dev_;
};

// ---- Factory and memory. ----

TEST_F(CudaOpsTest, KindAndName) {
  EXPECT_EQ(dev_->kind(), std::string(kDeviceKind) == "cuda" ? DeviceKind::kCuda
                                                              : DeviceKind::kCpu);
  EXPECT_FALSE(dev_->name().empty());
  std::printf("device backend: %s\n", dev_->name().c_str());
}

TEST_F(CudaOpsTest, DeviceIndexTheMachineLacksIsInvalidArgument) {
  absl::StatusOr<std::unique_ptr<Ops>> ops = NewOps(kDeviceKind, 7777, 0);
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument) << ops.status();
}

TEST_F(CudaOpsTest, AllocateAndAllocateHostAreAlignedAndNeverNull) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{100},
                       size_t{4097}, size_t{1} << 20}) {
    SCOPED_TRACE(absl::StrCat(bytes, " bytes"));
    absl::StatusOr<void*> dev = dev_->Allocate(bytes);
    ASSERT_TRUE(dev.ok()) << dev.status();
    ASSERT_NE(*dev, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*dev) % 64, 0u);
    absl::StatusOr<void*> host = dev_->AllocateHost(bytes);
    ASSERT_TRUE(host.ok()) << host.status();
    ASSERT_NE(*host, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*host) % 64, 0u);
    // Host memory is host-writable.
    if (bytes > 0) std::memset(*host, 0x5a, bytes);
    dev_->FreeHost(*host);
    dev_->Free(*dev);
  }
  dev_->Free(nullptr);
  dev_->FreeHost(nullptr);
  EXPECT_TRUE(dev_->Synchronize().ok());
}

TEST_F(CudaOpsTest, CopiesRoundTripIncludingOddByteCounts) {
  Rng rng(1);
  const Vec host = RandomVec(rng, 1001);
  auto buf = DeviceArray<float>::Create(dev_.get(), 1001).value();
  ASSERT_TRUE(dev_->CopyToDevice(buf.data(), host.data(), host.size() * sizeof(float)).ok());
  Vec back(1001, kNaN);
  ASSERT_TRUE(dev_->CopyToHost(back.data(), buf.data(), back.size() * sizeof(float)).ok());
  EXPECT_EQ(back, host);
  // 7 bytes: not a whole number of floats.
  unsigned char bytes_in[7] = {1, 2, 3, 4, 5, 6, 7}, bytes_out[8] = {};
  ASSERT_TRUE(dev_->CopyToDevice(buf.data(), bytes_in, 7).ok());
  ASSERT_TRUE(dev_->CopyToHost(bytes_out, buf.data(), 7).ok());
  EXPECT_EQ(0, std::memcmp(bytes_in, bytes_out, 7));
  EXPECT_EQ(bytes_out[7], 0);
  // Zero bytes is a no-op.
  EXPECT_TRUE(dev_->CopyToDevice(buf.data(), host.data(), 0).ok());
  EXPECT_TRUE(dev_->CopyToHost(back.data(), buf.data(), 0).ok());
  EXPECT_TRUE(dev_->Synchronize().ok());
}

// Stream order: Fill, then the enqueued copy over it, then Scale of the copied data.
TEST_F(CudaOpsTest, CopyToDeviceAsyncFromHostArrayRunsInStreamOrder) {
  Rng rng(2);
  for (int64_t n : {int64_t{1}, int64_t{33}, int64_t{100003}}) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    const Vec values = RandomVec(rng, n);
    auto staging = HostArray<float>::Create(dev_.get(), n);
    ASSERT_TRUE(staging.ok()) << staging.status();
    std::copy(values.begin(), values.end(), staging->data());
    Twin<float> t = Poisoned<float>(n);
    dev_->Fill(t.d(), n, 5.0f);
    dev_->CopyToDeviceAsync(t.d(), staging->data(), n * sizeof(float));
    dev_->Scale(t.d(), n, -2.0f);
    ASSERT_TRUE(dev_->Synchronize().ok());
    // The staging memory may change once Synchronize has returned.
    std::fill(staging->data(), staging->data() + n, 99.0f);
    Vec want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = -2.0f * values[i];
    ExpectSame(Dev(t), want, "fill, async copy, scale");
  }
}

TEST_F(CudaOpsTest, OutOfMemoryIsAStatusNamingTheSizeAndTheBackendStaysUsable) {
  const size_t huge = size_t{1} << 50;  // 1 PiB.
  absl::StatusOr<void*> ptr = dev_->Allocate(huge);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kResourceExhausted) << ptr.status();
  EXPECT_NE(ptr.status().message().find(absl::StrCat(huge)), absl::string_view::npos)
      << "the message should name the " << huge << " bytes asked for: " << ptr.status();
  // The failed allocation leaves no error behind for later ops to report.
  Twin<float> t = Make(Vec{1.0f, 2.0f, 3.0f});
  dev_->Scale(t.d(), 3, 2.0f);
  EXPECT_TRUE(dev_->Synchronize().ok());
  ExpectSame(Dev(t), Vec{2.0f, 4.0f, 6.0f}, "after a failed allocation");
}

// ---- Gemm. ----

struct GemmCase {
  int m, n, k;
  bool ta, tb;
  float alpha, beta;
  int pad;  // Extra stored columns of A, B and C (lda, ldb, ldc beyond the packed).
};

std::string Describe(const GemmCase& g) {
  return absl::StrCat("m=", g.m, " n=", g.n, " k=", g.k, " ta=", g.ta, " tb=", g.tb,
                      " alpha=", g.alpha, " beta=", g.beta, " pad=", g.pad);
}

// What one GemmStrided case gave on both backends, over the whole stored C [m, ldc].
struct GemmOutcome {
  Vec dev, cpu;   // The m x n results.
  Vec magnitude;  // |alpha| * |op(A)| |op(B)| + |beta * C|: the scale of each sum.
};

// `host` in `ops`'s memory; an empty one as one guard element (an empty operand still
// needs a valid pointer).
DeviceArray<float> Upload(Ops* ops, Vec host) {
  if (host.empty()) host.push_back(kGuardFloat);
  DeviceArray<float> array = DeviceArray<float>::Create(ops, host.size()).value();
  const absl::Status status =
      ops->CopyToDevice(array.data(), host.data(), host.size() * sizeof(float));
  EXPECT_TRUE(status.ok()) << status;
  return array;
}

GemmOutcome RunGemm(Ops* dev, Ops* cpu, const GemmCase& g, Rng& rng) {
  const int a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const int b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  const int lda = a_cols + g.pad, ldb = b_cols + g.pad, ldc = g.n + g.pad;
  const int64_t a_size = static_cast<int64_t>(a_rows) * lda;
  const int64_t b_size = static_cast<int64_t>(b_rows) * ldb;
  const int64_t c_size = static_cast<int64_t>(g.m) * ldc;
  const Vec a = RandomVec(rng, a_size), b = RandomVec(rng, b_size);
  // C: the m x n block random (beta != 0) or NaN (beta == 0 must not read it); the
  // padding columns a guard value that must survive.
  Vec c(c_size, kGuardFloat);
  for (int i = 0; i < g.m; ++i) {
    for (int j = 0; j < g.n; ++j) c[static_cast<int64_t>(i) * ldc + j] =
        g.beta == 0.0f ? kNaN : rng.Uniform(-1.0f, 1.0f);
  }
  GemmOutcome out;
  Vec results[2];
  Ops* backends[2] = {dev, cpu};
  for (int which = 0; which < 2; ++which) {
    Ops* ops = backends[which];
    DeviceArray<float> da = Upload(ops, a), db = Upload(ops, b), dc = Upload(ops, c);
    ops->GemmStrided(g.ta, g.tb, g.m, g.n, g.k, g.alpha, da.data(), lda, db.data(), ldb,
                     g.beta, dc.data(), ldc);
    // An empty C's one guard element comes back too: it must be untouched.
    results[which].resize(std::max<int64_t>(1, c_size));
    EXPECT_TRUE(ops->CopyToHost(results[which].data(), dc.data(),
                                results[which].size() * sizeof(float))
                    .ok());
    const absl::Status sync = ops->Synchronize();
    EXPECT_TRUE(sync.ok()) << sync;
    if (c_size == 0) {
      EXPECT_EQ(results[which][0], kGuardFloat) << "an empty C was written";
    }
  }
  // The magnitude from the CPU op on absolute values (with beta 0: C is not read).
  Vec mag(c_size, 0.0f);
  {
    Vec c_abs(c_size, 0.0f);
    for (int i = 0; i < g.m; ++i) {
      for (int j = 0; j < g.n; ++j) {
        const int64_t at = static_cast<int64_t>(i) * ldc + j;
        if (g.beta != 0.0f) c_abs[at] = std::fabs(c[at]);
      }
    }
    DeviceArray<float> da = Upload(cpu, Abs(a)), db = Upload(cpu, Abs(b)),
                       dc = Upload(cpu, c_abs);
    cpu->GemmStrided(g.ta, g.tb, g.m, g.n, g.k, std::fabs(g.alpha), da.data(), lda, db.data(),
                     ldb, std::fabs(g.beta), dc.data(), ldc);
    if (c_size > 0) {
      EXPECT_TRUE(cpu->CopyToHost(mag.data(), dc.data(), c_size * sizeof(float)).ok());
    }
  }
  for (int i = 0; i < g.m; ++i) {
    for (int j = 0; j < ldc; ++j) {
      const int64_t at = static_cast<int64_t>(i) * ldc + j;
      if (j < g.n) {
        out.dev.push_back(results[0][at]);
        out.cpu.push_back(results[1][at]);
        out.magnitude.push_back(mag[at]);
      } else if (results[0][at] != kGuardFloat || results[1][at] != kGuardFloat) {
        ADD_FAILURE() << "padding of C at " << i << "," << j << " was written: device "
                      << results[0][at] << ", cpu " << results[1][at];
      }
    }
  }
  return out;
}

TEST_F(CudaOpsTest, GemmStridedMatchesCpuForAllTransposesShapesAndScalars) {
  Rng rng(3);
  struct Shape {
    int m, n, k;
  };
  const Shape shapes[] = {{1, 1, 1},     {3, 17, 33},   {17, 3, 127},   {33, 257, 17},
                          {127, 33, 257}, {257, 127, 3}, {1000, 17, 33}, {3, 1000, 257},
                          {33, 127, 1000}, {257, 257, 257}, {1, 1000, 1}, {1000, 1, 1000}};
  struct Scalars {
    float alpha, beta;
    int pad;
  };
  const Scalars scalars[] = {{1.0f, 0.0f, 0}, {-1.5f, 0.0f, 3}, {0.5f, 1.0f, 5},
                             {2.0f, -0.25f, 0}, {1.0f, 1.0f, 1}};
  double worst = 0;
  for (const Shape& s : shapes) {
    for (int trans = 0; trans < 4; ++trans) {
      for (const Scalars& sc : scalars) {
        const GemmCase g{s.m, s.n, s.k, (trans & 1) != 0, (trans & 2) != 0,
                         sc.alpha, sc.beta, sc.pad};
        SCOPED_TRACE(Describe(g));
        const GemmOutcome r = RunGemm(dev_.get(), cpu_.get(), g, rng);
        ExpectNearScaled(r.dev, r.cpu, r.magnitude, 1e-5, "C");
        const double err = NormRelError(r.dev, r.cpu);
        EXPECT_LT(err, 1e-5);
        worst = std::max(worst, err);
      }
    }
  }
  RecordProperty("worst_norm_relative_error", absl::StrCat(worst));
  std::printf("FP32 GEMM: worst norm-wise relative error %.3g\n", worst);
}

// m == 0 or n == 0: nothing is written. k == 0: C = beta * C (beta 0 overwrites the
// NaN). Through Gemm, i.e. with the packed leading dimensions (lda = 0 when k == 0).
TEST_F(CudaOpsTest, GemmDegenerateSizes) {
  Rng rng(4);
  const GemmCase cases[] = {
      {0, 3, 2, false, false, 1.0f, 0.0f, 0}, {3, 0, 2, true, true, 1.0f, 1.0f, 0},
      {0, 0, 5, false, true, 1.0f, 0.0f, 0},  {2, 5, 0, false, false, 1.0f, 0.0f, 0},
      {3, 4, 0, true, false, 1.0f, 2.0f, 0},  {5, 3, 0, true, true, -1.0f, 1.0f, 0},
      {7, 1, 0, false, true, 1.0f, 0.0f, 0},
  };
  for (const GemmCase& g : cases) {
    SCOPED_TRACE(Describe(g));
    const GemmOutcome r = RunGemm(dev_.get(), cpu_.get(), g, rng);
    ExpectSame(r.dev, r.cpu, "C");
  }
}

TEST_F(CudaOpsTest, ReducedPrecisionGemmsStayWithinOnePercent) {
  Rng rng(5);
  for (GemmPrecision precision : {GemmPrecision::kTf32, GemmPrecision::kBf16}) {
    SCOPED_TRACE(GemmPrecisionName(precision));
    absl::StatusOr<std::unique_ptr<Ops>> ops = NewOps(kDeviceKind, 0, 0, precision);
    ASSERT_TRUE(ops.ok()) << ops.status();
    double worst = 0;
    for (int trans = 0; trans < 4; ++trans) {
      for (const GemmCase& shape : {GemmCase{257, 127, 1000}, GemmCase{33, 1000, 129},
                                    GemmCase{1000, 17, 33}}) {
        GemmCase g = shape;
        g.ta = (trans & 1) != 0;
        g.tb = (trans & 2) != 0;
        g.alpha = 0.75f;
        g.beta = trans == 3 ? 1.0f : 0.0f;
        g.pad = trans;
        SCOPED_TRACE(Describe(g));
        const GemmOutcome r = RunGemm(ops->get(), cpu_.get(), g, rng);
        const double err = NormRelError(r.dev, r.cpu);
        EXPECT_LT(err, 1e-2);
        worst = std::max(worst, err);
      }
    }
    std::printf("%s GEMM: worst norm-wise relative error %.3g\n",
                GemmPrecisionName(precision), worst);
    RecordProperty(absl::StrCat(GemmPrecisionName(precision), "_worst_error"),
                   absl::StrCat(worst));
  }
}

// ---- Bias. ----

struct BiasShape {
  int outer, channels, inner;
};
// Linear ([B, C], inner 1), convolution ([C, B*H*W], outer 1), general, and empty.
const BiasShape kBiasShapes[] = {{37, 1, 1},   {37, 17, 1},      {1000, 513, 1},
                                 {1, 33, 1295}, {1, 5, 37 * 24 * 24}, {3, 5, 17},
                                 {7, 3, 33},   {0, 7, 1},        {1, 3, 0}};

std::string Describe(const BiasShape& s) {
  return absl::StrCat("outer=", s.outer, " channels=", s.channels, " inner=", s.inner);
}

TEST_F(CudaOpsTest, BiasAddAndBroadcastMatchCpuExactly) {
  Rng rng(6);
  for (const BiasShape& s : kBiasShapes) {
    SCOPED_TRACE(Describe(s));
    const int64_t size = static_cast<int64_t>(s.outer) * s.channels * s.inner;
    Twin<float> bias = Make(RandomVec(rng, s.channels));
    Twin<float> y = Make(RandomVec(rng, size));
    cpu_->BiasAdd(y.c(), bias.c(), s.outer, s.channels, s.inner);
    dev_->BiasAdd(y.d(), bias.d(), s.outer, s.channels, s.inner);
    ExpectSame(Dev(y), Cpu(y), "BiasAdd");
    Twin<float> z = Poisoned<float>(size);
    cpu_->BiasBroadcast(z.c(), bias.c(), s.outer, s.channels, s.inner);
    dev_->BiasBroadcast(z.d(), bias.d(), s.outer, s.channels, s.inner);
    ExpectSame(Dev(z), Cpu(z), "BiasBroadcast");
  }
}

TEST_F(CudaOpsTest, BiasGradMatchesCpuBothWays) {
  Rng rng(7);
  for (const BiasShape& s : kBiasShapes) {
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(Describe(s) + (accumulate ? " accumulate" : " overwrite"));
      const int64_t size = static_cast<int64_t>(s.outer) * s.channels * s.inner;
      const Vec dy_host = RandomVec(rng, size);
      const Vec db_host = accumulate ? RandomVec(rng, s.channels) : Vec(s.channels, kNaN);
      Twin<float> dy = Make(dy_host);
      Twin<float> db = Make(db_host);
      cpu_->BiasGrad(dy.c(), db.c(), s.outer, s.channels, s.inner, accumulate);
      dev_->BiasGrad(dy.d(), db.d(), s.outer, s.channels, s.inner, accumulate);
      // Scale: the same sums over |dy|, plus |db| when accumulating.
      Twin<float> abs_dy = Make(Abs(dy_host));
      Twin<float> mag = Make(accumulate ? Abs(db_host) : Vec(s.channels, 0.0f));
      cpu_->BiasGrad(abs_dy.c(), mag.c(), s.outer, s.channels, s.inner, true);
      ExpectNearScaled(Dev(db), Cpu(db), Cpu(mag), 1e-5, "BiasGrad");
    }
  }
}

// ---- Activations and loss. ----

const int64_t kSizes[] = {0, 1, 3, 17, 33, 127, 257, 1000, 1000003};

TEST_F(CudaOpsTest, ReluForwardAndBackwardMatchCpuExactlyIncludingInPlace) {
  Rng rng(8);
  for (int64_t n : kSizes) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    const Vec x_host = RandomVec(rng, n);
    Twin<float> x = Make(x_host);
    Twin<float> y = Poisoned<float>(n);
    cpu_->ReluForward(x.c(), y.c(), n);
    dev_->ReluForward(x.d(), y.d(), n);
    const Vec y_cpu = Cpu(y);
    ExpectSame(Dev(y), y_cpu, "ReluForward");
    ExpectSame(Dev(x), x_host, "ReluForward's input");
    // y may alias x.
    Twin<float> inplace = Make(x_host);
    dev_->ReluForward(inplace.d(), inplace.d(), n);
    ExpectSame(Dev(inplace), y_cpu, "ReluForward in place");

    const Vec dy_host = RandomVec(rng, n);
    Twin<float> dy = Make(dy_host);
    Twin<float> dx = Poisoned<float>(n);
    cpu_->ReluBackward(y.c(), dy.c(), dx.c(), n);
    dev_->ReluBackward(y.d(), dy.d(), dx.d(), n);
    const Vec dx_cpu = Cpu(dx);
    ExpectSame(Dev(dx), dx_cpu, "ReluBackward");
    // dx may alias dy.
    dev_->ReluBackward(y.d(), dy.d(), dy.d(), n);
    ExpectSame(Dev(dy), dx_cpu, "ReluBackward in place");
  }
}

// NaN and +inf pass through ReLU as on the CPU (compared by class: NaN never equals).
TEST_F(CudaOpsTest, ReluKeepsNonFiniteAsCpu) {
  const float inf = std::numeric_limits<float>::infinity();
  Vec x_host(1000, -1.0f);
  x_host[0] = std::nanf("");
  x_host[500] = inf;
  x_host[501] = -inf;
  x_host[999] = std::nanf("");
  Twin<float> x = Make(x_host);
  dev_->ReluForward(x.d(), x.d(), x_host.size());
  const Vec y = Dev(x);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[500], inf);
  EXPECT_EQ(y[501], 0.0f);
  EXPECT_TRUE(std::isnan(y[999]));
  EXPECT_EQ(y[1], 0.0f);
}

struct XentShape {
  int batch, classes;
};
const XentShape kXentShapes[] = {{37, 10},  {1, 1},    {5, 1},   {3, 1000}, {1000, 3},
                                 {127, 17}, {257, 33}, {64, 1025}, {1, 10}};

// The softmax of each row: relative to the probability (exp and the denominator's
// rounding are relative), plus a floor far below any probability here.
void ExpectProbsNear(const Vec& got, const Vec& want, const std::string& what) {
  ExpectNearRel(got, want, 1e-5, 1e-12, what);
}

// The loss sum: positive terms, so relative; the floor covers a sum that is exactly 0
// (one class), where each row's float log may be off by a rounding.
double LossTolerance(double cpu_loss, int batch) {
  return 1e-5 * std::fabs(cpu_loss) + 1e-6 * batch;
}

TEST_F(CudaOpsTest, SoftmaxXentForwardMatchesCpu) {
  Rng rng(9);
  for (const XentShape& s : kXentShapes) {
    SCOPED_TRACE(absl::StrCat("batch=", s.batch, " classes=", s.classes));
    const int64_t size = static_cast<int64_t>(s.batch) * s.classes;
    const Vec logits_host = RandomVec(rng, size, -4.0f, 4.0f);
    Twin<float> logits = Make(logits_host);
    Twin<int32_t> labels = Make(RandomLabels(rng, s.batch, s.classes));
    Twin<float> probs = Poisoned<float>(size);
    double cpu_loss = -1, dev_loss = -1;
    int64_t cpu_correct = -1, dev_correct = -1;
    cpu_->SoftmaxXentForward(logits.c(), labels.c(), s.batch, s.classes, probs.c(),
                             &cpu_loss, &cpu_correct);
    dev_->SoftmaxXentForward(logits.d(), labels.d(), s.batch, s.classes, probs.d(),
                             &dev_loss, &dev_correct);
    // The loss and count are on the host when the op returns (ops.h).
    EXPECT_NEAR(dev_loss, cpu_loss, LossTolerance(cpu_loss, s.batch));
    EXPECT_EQ(dev_correct, cpu_correct);
    const Vec probs_cpu = Cpu(probs);
    ExpectProbsNear(Dev(probs), probs_cpu, "probs");
    ExpectSame(Dev(logits), logits_host, "logits (input)");

    // probs may alias logits.
    Twin<float> inplace = Make(logits_host);
    double alias_loss = -1;
    int64_t alias_correct = -1;
    dev_->SoftmaxXentForward(inplace.d(), labels.d(), s.batch, s.classes, inplace.d(),
                             &alias_loss, &alias_correct);
    EXPECT_NEAR(alias_loss, cpu_loss, LossTolerance(cpu_loss, s.batch));
    EXPECT_EQ(alias_correct, cpu_correct);
    ExpectProbsNear(Dev(inplace), probs_cpu, "probs in place");
  }
}

// Rows whose maximum appears 2 or 3 times: the first index wins, on both backends.
TEST_F(CudaOpsTest, SoftmaxXentCorrectCountsTiesForTheFirstIndex) {
  Rng rng(10);
  for (int classes : {2, 10, 33, 1000}) {
    SCOPED_TRACE(absl::StrCat("classes=", classes));
    const int batch = 257;
    Vec logits_host = RandomVec(rng, static_cast<int64_t>(batch) * classes, -2.0f, 0.5f);
    IntVec labels_host(batch);
    int64_t want_correct = 0;
    for (int r = 0; r < batch; ++r) {
      float* row = logits_host.data() + static_cast<int64_t>(r) * classes;
      const int ties = std::min<int>(classes, 2 + static_cast<int>(rng.Below(2)));
      std::vector<int> at;
      while (static_cast<int>(at.size()) < ties) {
        const int j = static_cast<int>(rng.Below(classes));
        if (std::find(at.begin(), at.end(), j) == at.end()) at.push_back(j);
      }
      for (int j : at) row[j] = 1.0f;
      // Label one of the tied maxima (the first or a later one), or another class.
      const int pick = static_cast<int>(rng.Below(ties + 1));
      labels_host[r] = pick < ties ? at[pick] : static_cast<int32_t>(rng.Below(classes));
      const int first = *std::min_element(at.begin(), at.end());
      want_correct += labels_host[r] == first ? 1 : 0;
    }
    Twin<float> logits = Make(logits_host);
    Twin<int32_t> labels = Make(labels_host);
    Twin<float> probs = Poisoned<float>(logits_host.size());
    double cpu_loss = -1, dev_loss = -1;
    int64_t cpu_correct = -1, dev_correct = -1;
    cpu_->SoftmaxXentForward(logits.c(), labels.c(), batch, classes, probs.c(), &cpu_loss,
                             &cpu_correct);
    dev_->SoftmaxXentForward(logits.d(), labels.d(), batch, classes, probs.d(), &dev_loss,
                             &dev_correct);
    EXPECT_EQ(cpu_correct, want_correct);
    EXPECT_EQ(dev_correct, want_correct);
    EXPECT_NEAR(dev_loss, cpu_loss, LossTolerance(cpu_loss, batch));
    ExpectProbsNear(Dev(probs), Cpu(probs), "probs");
  }
}

TEST_F(CudaOpsTest, SoftmaxXentForwardOfAnEmptyBatchIsZero) {
  // Buffers of one element (their guards must survive): nothing is read or written.
  Twin<float> logits = Make(Vec{0.5f});
  Twin<int32_t> labels = Make(IntVec{0});
  Twin<float> probs = Make(Vec{kGuardFloat});
  double loss = -1;
  int64_t correct = -1;
  dev_->SoftmaxXentForward(logits.d(), labels.d(), 0, 10, probs.d(), &loss, &correct);
  EXPECT_EQ(loss, 0.0);
  EXPECT_EQ(correct, 0);
  ExpectSame(Dev(probs), Vec{kGuardFloat}, "probs");
  Twin<float> dlogits = Make(Vec{kGuardFloat});
  dev_->SoftmaxXentBackward(probs.d(), labels.d(), 0, 10, 0.5f, dlogits.d());
  ExpectSame(Dev(dlogits), Vec{kGuardFloat}, "dlogits");
}

TEST_F(CudaOpsTest, SoftmaxXentBackwardMatchesCpuIncludingInPlace) {
  Rng rng(11);
  for (const XentShape& s : kXentShapes) {
    SCOPED_TRACE(absl::StrCat("batch=", s.batch, " classes=", s.classes));
    const int64_t size = static_cast<int64_t>(s.batch) * s.classes;
    // Real probabilities, from the CPU's forward.
    Twin<float> logits = Make(RandomVec(rng, size, -4.0f, 4.0f));
    const IntVec labels_host = RandomLabels(rng, s.batch, s.classes);
    Twin<int32_t> labels = Make(labels_host);
    Twin<float> tmp = Poisoned<float>(size);
    double loss;
    int64_t correct;
    cpu_->SoftmaxXentForward(logits.c(), labels.c(), s.batch, s.classes, tmp.c(), &loss,
                             &correct);
    const Vec probs_host = Cpu(tmp);
    Twin<float> probs = Make(probs_host);
    const float scale = 1.0f / 37.0f;
    Twin<float> dlogits = Poisoned<float>(size);
    cpu_->SoftmaxXentBackward(probs.c(), labels.c(), s.batch, s.classes, scale, dlogits.c());
    dev_->SoftmaxXentBackward(probs.d(), labels.d(), s.batch, s.classes, scale, dlogits.d());
    const Vec want = Cpu(dlogits);
    // scale * p, and scale * p - scale at the label (maybe one FMA on the GPU).
    ExpectNearRel(Dev(dlogits), want, 1e-6, scale, "dlogits");
    ExpectSame(Dev(probs), probs_host, "probs (input)");
    // dlogits may alias probs.
    dev_->SoftmaxXentBackward(probs.d(), labels.d(), s.batch, s.classes, scale, probs.d());
    ExpectNearRel(Dev(probs), want, 1e-6, scale, "dlogits in place");
  }
}

// ---- Convolution helpers. ----

struct ConvCase {
  int channels, batch, height, width, kernel, pad, stride;
};

std::string Describe(const ConvCase& c) {
  return absl::StrCat("C=", c.channels, " B=", c.batch, " H=", c.height, " W=", c.width,
                      " k=", c.kernel, " pad=", c.pad, " stride=", c.stride);
}

const ConvCase kConvCases[] = {
    {1, 37, 28, 28, 5, 0, 1},  // LeNet's first convolution.
    {32, 3, 12, 12, 5, 0, 1},  // Its second.
    {3, 2, 7, 9, 3, 1, 1},     {3, 2, 7, 9, 3, 1, 2},  {5, 3, 8, 8, 3, 1, 3},
    {1, 1, 5, 5, 5, 2, 1},     {2, 1, 3, 4, 5, 1, 1},  {7, 5, 9, 9, 1, 0, 2},
    {2, 3, 10, 6, 4, 2, 3},    {1, 4, 1, 1, 1, 0, 1},  {3, 33, 17, 13, 3, 0, 1},
    {3, 0, 7, 7, 3, 1, 1},     // Empty batch.
};

TEST_F(CudaOpsTest, Im2ColAndCol2ImMatchCpu) {
  Rng rng(12);
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE(Describe(c));
    const int ho = (c.height + 2 * c.pad - c.kernel) / c.stride + 1;
    const int wo = (c.width + 2 * c.pad - c.kernel) / c.stride + 1;
    ASSERT_GT(ho, 0);
    ASSERT_GT(wo, 0);
    const int64_t x_size = static_cast<int64_t>(c.channels) * c.batch * c.height * c.width;
    const int64_t col_size =
        static_cast<int64_t>(c.channels) * c.kernel * c.kernel * c.batch * ho * wo;
    const Vec x_host = RandomVec(rng, x_size);
    Twin<float> x = Make(x_host);
    Twin<float> col = Poisoned<float>(col_size);
    cpu_->Im2Col(x.c(), c.channels, c.batch, c.height, c.width, c.kernel, c.pad, c.stride,
                 col.c());
    dev_->Im2Col(x.d(), c.channels, c.batch, c.height, c.width, c.kernel, c.pad, c.stride,
                 col.d());
    ExpectSame(Dev(col), Cpu(col), "Im2Col");
    ExpectSame(Dev(x), x_host, "Im2Col's input");

    const Vec dcol_host = RandomVec(rng, col_size);
    Twin<float> dcol = Make(dcol_host);
    Twin<float> dx = Poisoned<float>(x_size);
    cpu_->Col2Im(dcol.c(), c.channels, c.batch, c.height, c.width, c.kernel, c.pad,
                 c.stride, dx.c());
    dev_->Col2Im(dcol.d(), c.channels, c.batch, c.height, c.width, c.kernel, c.pad,
                 c.stride, dx.d());
    // Each pixel sums up to kernel^2 entries: scale from the same sums of |col|.
    Twin<float> abs_dcol = Make(Abs(dcol_host));
    Twin<float> mag = Poisoned<float>(x_size);
    cpu_->Col2Im(abs_dcol.c(), c.channels, c.batch, c.height, c.width, c.kernel, c.pad,
                 c.stride, mag.c());
    ExpectNearScaled(Dev(dx), Cpu(dx), Cpu(mag), 1e-5, "Col2Im");
  }
}

struct PoolCase {
  int planes, height, width;
};

TEST_F(CudaOpsTest, MaxPoolMatchesCpuExactlyWithOddSizesAndTies) {
  Rng rng(13);
  const PoolCase cases[] = {{1, 2, 2},   {3, 7, 9},   {5, 9, 7},  {33, 28, 28},
                            {32 * 37, 24, 24}, {64 * 37, 8, 8}, {2, 1, 5}, {3, 5, 1},
                            {7, 3, 3},   {1, 255, 257}, {0, 4, 4}};
  for (const PoolCase& p : cases) {
    for (bool ties : {false, true}) {
      SCOPED_TRACE(absl::StrCat("planes=", p.planes, " H=", p.height, " W=", p.width,
                                ties ? " with ties" : ""));
      const int64_t in_size = static_cast<int64_t>(p.planes) * p.height * p.width;
      const int64_t out_size = static_cast<int64_t>(p.planes) * (p.height / 2) * (p.width / 2);
      Vec x_host = RandomVec(rng, in_size);
      // Ties: four values only, so most windows hold their maximum more than once.
      if (ties) {
        for (float& v : x_host) v = static_cast<float>(rng.Below(4)) - 1.0f;
      }
      Twin<float> x = Make(x_host);
      Twin<float> y = Poisoned<float>(out_size);
      Twin<int32_t> argmax = Poisoned<int32_t>(out_size);
      cpu_->MaxPool2x2Forward(x.c(), p.planes, p.height, p.width, y.c(), argmax.c());
      dev_->MaxPool2x2Forward(x.d(), p.planes, p.height, p.width, y.d(), argmax.d());
      ExpectSame(Dev(y), Cpu(y), "pooled values");
      const IntVec argmax_cpu = Cpu(argmax);
      ExpectSame(Dev(argmax), argmax_cpu, "argmax");

      Twin<float> dy = Make(RandomVec(rng, out_size));
      Twin<float> dx = Poisoned<float>(in_size);
      cpu_->MaxPool2x2Backward(dy.c(), argmax.c(), p.planes, p.height, p.width, dx.c());
      dev_->MaxPool2x2Backward(dy.d(), argmax.d(), p.planes, p.height, p.width, dx.d());
      ExpectSame(Dev(dx), Cpu(dx), "MaxPool2x2Backward");
    }
  }
}

TEST_F(CudaOpsTest, SwapAxes01MatchesCpuExactly) {
  Rng rng(14);
  struct Case {
    int d0, d1, inner;
  };
  const Case cases[] = {{1, 1, 1},    {3, 17, 1},  {17, 3, 1}, {33, 127, 1},
                        {1000, 257, 1}, {1, 1000, 1}, {32, 37, 144}, {64, 37, 16},
                        {37, 64, 16}, {5, 7, 3},   {0, 3, 4},  {3, 0, 4}, {3, 4, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("d0=", c.d0, " d1=", c.d1, " inner=", c.inner));
    const int64_t size = static_cast<int64_t>(c.d0) * c.d1 * c.inner;
    Twin<float> in = Make(RandomVec(rng, size));
    Twin<float> out = Poisoned<float>(size);
    cpu_->SwapAxes01(in.c(), c.d0, c.d1, c.inner, out.c());
    dev_->SwapAxes01(in.d(), c.d0, c.d1, c.inner, out.d());
    ExpectSame(Dev(out), Cpu(out), "SwapAxes01");
  }
}

// ---- Optimizer and BLAS-1. ----

// Parameters, gradients and momentum are drawn from [-1, 1], so every operand of the
// update is O(1): the elementwise bound is 1e-6 * (|result| + 1).
TEST_F(CudaOpsTest, SgdUpdateMatchesCpu) {
  Rng rng(15);
  const SgdHyper hypers[] = {
      {0.1f, 0.0f, 0.0f, false},  {0.05f, 0.0f, 1e-2f, false}, {0.1f, 0.9f, 0.0f, false},
      {0.05f, 0.9f, 5e-3f, false}, {0.05f, 0.9f, 5e-3f, true}, {0.1f, 0.9f, 0.0f, true},
  };
  for (const SgdHyper& h : hypers) {
    for (bool zero_grads : {false, true}) {
      for (int64_t n : kSizes) {
        SCOPED_TRACE(absl::StrCat("lr=", h.lr, " momentum=", h.momentum, " wd=",
                                  h.weight_decay, " nesterov=", h.nesterov,
                                  " zero_grads=", zero_grads, " n=", n));
        const Vec g_host = RandomVec(rng, n);
        Twin<float> p = Make(RandomVec(rng, n));
        Twin<float> g = Make(g_host);
        // A mid-training momentum state; without momentum the op gets nullptr.
        Twin<float> buf = Make(RandomVec(rng, n));
        const bool mom = h.momentum != 0.0f;
        cpu_->SgdUpdate(p.c(), g.c(), mom ? buf.c() : nullptr, n, h, zero_grads);
        dev_->SgdUpdate(p.d(), g.d(), mom ? buf.d() : nullptr, n, h, zero_grads);
        ExpectNearRel(Dev(p), Cpu(p), 1e-6, 1.0, "params");
        ExpectNearRel(Dev(buf), Cpu(buf), 1e-6, 1.0, "momentum");
        ExpectSame(Dev(g), zero_grads ? Vec(n, 0.0f) : g_host, "grads");
      }
    }
  }
}

TEST_F(CudaOpsTest, SgdUpdateCarriedMatchesCpu) {
  Rng rng(16);
  const SgdHyper hypers[] = {{0.1f, 0.0f, 0.0f, false}, {0.05f, 0.0f, 1e-2f, false},
                             {0.1f, 0.9f, 0.0f, false}, {0.05f, 0.9f, 5e-3f, false}};
  for (const SgdHyper& h : hypers) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(absl::StrCat("lr=", h.lr, " momentum=", h.momentum, " wd=",
                                h.weight_decay, " n=", n));
      Twin<float> p = Make(RandomVec(rng, n));
      Twin<float> acc = Make(RandomVec(rng, n));
      cpu_->SgdUpdateCarried(p.c(), acc.c(), n, h);
      dev_->SgdUpdateCarried(p.d(), acc.d(), n, h);
      ExpectNearRel(Dev(p), Cpu(p), 1e-6, 1.0, "params");
      const Vec acc_dev = Dev(acc);
      ExpectNearRel(acc_dev, Cpu(acc), 1e-6, 1.0, "acc");
      if (h.momentum == 0.0f) ExpectSame(acc_dev, Vec(n, 0.0f), "acc without momentum");
    }
  }
}

TEST_F(CudaOpsTest, FillScaleCopyMatchCpuExactly) {
  Rng rng(17);
  for (int64_t n : kSizes) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    for (float value : {3.25f, -0.5f, 0.0f}) {
      Twin<float> x = Make(RandomVec(rng, n));
      cpu_->Fill(x.c(), n, value);
      dev_->Fill(x.d(), n, value);
      ExpectSame(Dev(x), Vec(n, value), "Fill");
    }
    for (float alpha : {0.37f, -2.0f, 0.0f, 1.0f}) {
      Twin<float> x = Make(RandomVec(rng, n));
      cpu_->Scale(x.c(), n, alpha);
      dev_->Scale(x.d(), n, alpha);
      ExpectSame(Dev(x), Cpu(x), "Scale");
    }
    const Vec src_host = RandomVec(rng, n);
    Twin<float> src = Make(src_host);
    Twin<float> dst = Poisoned<float>(n);
    dev_->Copy(dst.d(), src.d(), n);
    ExpectSame(Dev(dst), src_host, "Copy");
  }
}

TEST_F(CudaOpsTest, AxpyMatchesCpu) {
  Rng rng(18);
  for (int64_t n : kSizes) {
    for (float alpha : {0.37f, -2.0f, 1.0f}) {
      SCOPED_TRACE(absl::StrCat("n=", n, " alpha=", alpha));
      const Vec x_host = RandomVec(rng, n);
      Twin<float> x = Make(x_host);
      Twin<float> y = Make(RandomVec(rng, n));
      cpu_->Axpy(n, alpha, x.c(), y.c());
      dev_->Axpy(n, alpha, x.d(), y.d());
      // |y| + |alpha * x| <= 3: one rounding, or two without FMA.
      ExpectNearRel(Dev(y), Cpu(y), 1e-6, 3.0, "Axpy");
      ExpectSame(Dev(x), x_host, "Axpy's x");
    }
  }
}

}  // namespace
}  // namespace ringside
