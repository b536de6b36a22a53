#include "ddp_ring/lossy_compressor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/random.h"
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/process_group_test_util.h"
#include "ddp_ring/store.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);

// Runs body(group) on `world` threads, each rank with its own Gloo group (the ring for
// every all-reduce) over one in-memory store under a fresh prefix.
void RunRanks(int world, const std::function<void(ProcessGroup&)>& body) {
  static std::atomic<int> groups{0};
  std::unique_ptr<Store> base = NewInMemoryStore();
  std::unique_ptr<Store> store = NewPrefixStore(absl::StrCat("lossy", groups++), base.get());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      absl::StatusOr<std::unique_ptr<ProcessGroup>> pg = NewGlooProcessGroup(
          store.get(), testing_util::Options(rank, world, AllReduceAlgorithm::kRing, kTimeout));
      ASSERT_TRUE(pg.ok()) << pg.status();
      body(**pg);
    });
  }
  for (std::thread& t : threads) t.join();
}

Compression TopK(double fraction, bool error_feedback = true) {
  Compression c;
  c.method = Compression::Method::kTopK;
  c.topk_fraction = fraction;
  c.error_feedback = error_feedback;
  return c;
}

Compression PowerSgd(int rank) {
  Compression c;
  c.method = Compression::Method::kPowerSgd;
  c.powersgd_rank = rank;
  return c;
}

// Rank r's gradient: distinct magnitudes, so the top-k is unambiguous.
std::vector<float> Gradient(int rank, int64_t n, uint64_t step) {
  Rng rng(Mix64(1000 * step + rank));
  std::vector<float> g(n);
  for (float& v : g) v = rng.Normal();
  return g;
}

// The k largest |v| of v (ties to the lower index), the rest zero.
std::vector<float> TopKOf(const std::vector<float>& v, int64_t k) {
  std::vector<int64_t> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&v](int64_t a, int64_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  std::vector<float> out(v.size(), 0.0f);
  for (int64_t j = 0; j < k; ++j) out[order[j]] = v[order[j]];
  return out;
}

// Top-k over two steps, 3 ranks, a bucket of 1000 and one of 37: each step's result is
// the sum over ranks of each rank's top ceil(F n) of gradient + residual, the residual
// being what the rank did not send; every rank gets the same; each rank sends
// (N - 1) x 2k floats through the all-gather and receives as many.
TEST(LossyCompressorTest, TopKSumsEachRanksLargestWithItsResidual) {
  constexpr int kWorld = 3;
  const std::vector<ParamRange> buckets = {{37, 1000}, {0, 37}};
  const std::vector<ParamTensor> tensors = {{{0, 37}, 0}, {{37, 1000}, 0}};
  // The reference: every rank's residual, stepped alongside.
  std::vector<std::vector<std::vector<float>>> want(2);  // [step][bucket]
  std::vector<std::vector<float>> residual(kWorld * 2);
  for (uint64_t step = 0; step < 2; ++step) {
    for (size_t b = 0; b < buckets.size(); ++b) {
      const int64_t n = buckets[b].size, k = static_cast<int64_t>(std::ceil(0.05 * n));
      std::vector<float> sum(n, 0.0f);
      for (int r = 0; r < kWorld; ++r) {
        std::vector<float>& e = residual[r * 2 + b];
        if (e.empty()) e.assign(n, 0.0f);
        std::vector<float> acc = Gradient(r, n, step * 10 + b);
        for (int64_t i = 0; i < n; ++i) acc[i] += e[i];
        const std::vector<float> sent = TopKOf(acc, k);
        for (int64_t i = 0; i < n; ++i) {
          e[i] = acc[i] - sent[i];
          sum[i] += sent[i];
        }
      }
      want[step].push_back(sum);
    }
  }
  RunRanks(kWorld, [&](ProcessGroup& pg) {
    absl::StatusOr<std::unique_ptr<LossyCompressor>> c =
        LossyCompressor::Create(TopK(0.05), &pg, buckets, tensors, /*seed=*/7);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ((*c)->PayloadFloats(0), 2 * 50);
    EXPECT_EQ((*c)->PayloadFloats(1), 2 * 2);
    for (uint64_t step = 0; step < 2; ++step) {
      std::vector<std::vector<float>> data;
      std::vector<std::shared_ptr<Work>> works;
      for (size_t b = 0; b < buckets.size(); ++b) data.push_back(Gradient(pg.rank(), buckets[b].size, step * 10 + b));
      for (size_t b = 0; b < buckets.size(); ++b) works.push_back((*c)->Launch(b, data[b].data()));
      for (size_t b = 0; b < buckets.size(); ++b) {
        ASSERT_TRUE(works[b]->Wait().ok()) << works[b]->Wait();
        const int64_t payload = 4 * (kWorld - 1) * (*c)->PayloadFloats(b);
        EXPECT_EQ(works[b]->bytes().sent, payload) << "bucket " << b;
        EXPECT_EQ(works[b]->bytes().received, payload) << "bucket " << b;
        const testing_util::Mismatches m = testing_util::CountMismatches(
            data[b].data(), buckets[b].size, [&](int64_t i) { return want[step][b][i]; }, 1e-6f);
        EXPECT_EQ(m.count, 0) << "rank " << pg.rank() << " step " << step << " bucket " << b << " first at "
                              << m.first;
      }
    }
  });
}

// Momentum correction (top-k with error feedback and SGD momentum m): a rank's velocity
// u = m u + g goes into its residual instead of g, and is cleared where the rank sent.
TEST(LossyCompressorTest, TopKCorrectsMomentumInItsResidual) {
  constexpr int kWorld = 2, kN = 200, kK = 10;
  constexpr float kMomentum = 0.9f;
  std::vector<std::vector<float>> want(3, std::vector<float>(kN, 0.0f));
  std::vector<std::vector<float>> u(kWorld, std::vector<float>(kN, 0.0f)), e = u;
  for (uint64_t step = 0; step < 3; ++step) {
    for (int r = 0; r < kWorld; ++r) {
      const std::vector<float> g = Gradient(r, kN, step);
      std::vector<float> acc(kN);
      for (int i = 0; i < kN; ++i) {
        u[r][i] = kMomentum * u[r][i] + g[i];
        acc[i] = u[r][i] + e[r][i];
      }
      const std::vector<float> sent = TopKOf(acc, kK);
      for (int i = 0; i < kN; ++i) {
        e[r][i] = acc[i] - sent[i];
        if (sent[i] != 0.0f) u[r][i] = 0.0f;
        want[step][i] += sent[i];
      }
    }
  }
  RunRanks(kWorld, [&](ProcessGroup& pg) {
    auto c = LossyCompressor::Create(TopK(0.05), &pg, {{0, kN}}, {{{0, kN}, 0}}, 7, kMomentum);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE((*c)->corrects_momentum());
    for (uint64_t step = 0; step < 3; ++step) {
      std::vector<float> data = Gradient(pg.rank(), kN, step);
      ASSERT_TRUE((*c)->Launch(0, data.data())->Wait().ok());
      const testing_util::Mismatches m = testing_util::CountMismatches(
          data.data(), kN, [&](int64_t i) { return want[step][i]; }, 1e-6f);
      EXPECT_EQ(m.count, 0) << "rank " << pg.rank() << " step " << step << " first at " << m.first;
    }
    // Without error feedback there is no residual to correct, and a bad momentum is refused.
    auto plain = LossyCompressor::Create(TopK(0.05, /*error_feedback=*/false), &pg, {{0, kN}}, {}, 7, kMomentum);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_FALSE((*plain)->corrects_momentum());
    EXPECT_EQ(LossyCompressor::Create(TopK(0.05), &pg, {{0, kN}}, {}, 7, 1.0f).status().code(),
              absl::StatusCode::kInvalidArgument);
  });
}

// F = 1 sends everything: the plain sum, and no residual to carry.
TEST(LossyCompressorTest, TopKOfEverythingIsTheSum) {
  constexpr int kWorld = 4;
  const std::vector<ParamRange> buckets = {{0, 513}};
  RunRanks(kWorld, [&](ProcessGroup& pg) {
    auto c = LossyCompressor::Create(TopK(1.0), &pg, buckets, {{{0, 513}, 0}}, 7);
    ASSERT_TRUE(c.ok()) << c.status();
    for (uint64_t step = 0; step < 2; ++step) {
      std::vector<float> data(513);
      for (int64_t i = 0; i < 513; ++i) data[i] = testing_util::Value(pg.rank(), i + step);
      ASSERT_TRUE((*c)->Launch(0, data.data())->Wait().ok());
      const testing_util::Mismatches m = testing_util::CountMismatches(
          data.data(), 513, [&](int64_t i) { return testing_util::SumOfValues(kWorld, i + step); }, 0);
      EXPECT_EQ(m.count, 0) << "first at " << m.first;
    }
  });
}

// PowerSGD recovers a summed gradient of rank <= R exactly (up to rounding): each rank's
// 48 x 40 weight is a_r u v^T (one direction, rank 1) and R = 1; the bias travels whole
// and sums exactly; the floats all-reduced are r (m + n) + the bias's, and a ring rank
// sends 2 (n - one chunk) floats per all-reduce.
TEST(LossyCompressorTest, PowerSgdRecoversALowRankSumAndSumsTheRestWhole) {
  constexpr int kWorld = 3, kRows = 48, kCols = 40;
  const std::vector<ParamTensor> tensors = {{{0, kRows * kCols}, kRows}, {{kRows * kCols, kRows}, 0}};
  const std::vector<ParamRange> buckets = {{0, kRows * kCols + kRows}};
  std::vector<float> u(kRows), v(kCols);
  Rng rng(3);
  for (float& x : u) x = rng.Normal();
  for (float& x : v) x = rng.Normal();
  RunRanks(kWorld, [&](ProcessGroup& pg) {
    auto c = LossyCompressor::Create(PowerSgd(1), &pg, buckets, tensors, 11);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ((*c)->PayloadFloats(0), kRows + kCols + kRows);
    for (int step = 0; step < 2; ++step) {
      const float a = static_cast<float>(pg.rank() + 1 + step);
      std::vector<float> data(kRows * kCols + kRows);
      for (int i = 0; i < kRows; ++i) {
        for (int j = 0; j < kCols; ++j) data[i * kCols + j] = a * u[i] * v[j];
        data[kRows * kCols + i] = testing_util::Value(pg.rank(), i);
      }
      std::shared_ptr<Work> work = (*c)->Launch(0, data.data());
      ASSERT_TRUE(work->Wait().ok()) << work->Wait();
      const float total = 6.0f + 3 * step;  // Sum of a over the ranks.
      for (int i = 0; i < kRows; ++i) {
        for (int j = 0; j < kCols; ++j) {
          ASSERT_NEAR(data[i * kCols + j], total * u[i] * v[j], 2e-4f * (1 + std::fabs(total * u[i] * v[j])))
              << "step " << step << " at " << i << "," << j;
        }
        ASSERT_EQ(data[kRows * kCols + i], testing_util::SumOfValues(kWorld, i)) << i;
      }
      const CollectiveBytes p_bytes = testing_util::ExpectedAllReduceBytes(AllReduceAlgorithm::kRing, kWorld,
                                                                           pg.rank(), kRows + kRows);
      const CollectiveBytes q_bytes =
          testing_util::ExpectedAllReduceBytes(AllReduceAlgorithm::kRing, kWorld, pg.rank(), kCols);
      EXPECT_EQ(work->bytes().sent, p_bytes.sent + q_bytes.sent);
      EXPECT_EQ(work->bytes().received, p_bytes.received + q_bytes.received);
      // At most the formula's 2(N-1)/N x the floats, plus the ring's uneven chunks.
      EXPECT_LE(work->bytes().sent, 4 * (2.0 * (kWorld - 1) / kWorld * (kRows + kCols + kRows) + 2 * 2));
    }
  });
}

// A weight where r (m + n) >= m n gains nothing: it travels whole (exact sum), and a
// rank above min(m, n) is cut to it. The 64 x 64 weight is a_r U V^T with U, V of 4
// columns: rank 4, recovered at R = 4.
TEST(LossyCompressorTest, PowerSgdSendsSmallWeightsWhole) {
  constexpr int kWorld = 2, kN = 64, kR = 4;
  const std::vector<ParamTensor> tensors = {{{0, 12}, 3}, {{12, kN * kN}, kN}};
  const std::vector<ParamRange> buckets = {{0, 12 + kN * kN}};
  std::vector<float> u(kN * kR), v(kN * kR);
  Rng rng(9);
  for (float& x : u) x = rng.Normal();
  for (float& x : v) x = rng.Normal();
  auto low_rank = [&](int i, int j) {
    float sum = 0;
    for (int c = 0; c < kR; ++c) sum += u[i * kR + c] * v[j * kR + c];
    return sum;
  };
  RunRanks(kWorld, [&](ProcessGroup& pg) {
    auto c = LossyCompressor::Create(PowerSgd(kR), &pg, buckets, tensors, 11);
    ASSERT_TRUE(c.ok()) << c.status();
    // 3 x 4 at r = 3: 3 x 7 = 21 >= 12, whole; 64 x 64 at r = 4: 4 x 128 < 4096.
    EXPECT_EQ((*c)->PayloadFloats(0), 12 + kR * 2 * kN);
    std::vector<float> data(12 + kN * kN);
    const float a = static_cast<float>(pg.rank() + 1);
    for (int i = 0; i < 12; ++i) data[i] = testing_util::Value(pg.rank(), i);
    for (int i = 0; i < kN; ++i) {
      for (int j = 0; j < kN; ++j) data[12 + i * kN + j] = a * low_rank(i, j);
    }
    ASSERT_TRUE((*c)->Launch(0, data.data())->Wait().ok());
    for (int i = 0; i < 12; ++i) EXPECT_EQ(data[i], testing_util::SumOfValues(kWorld, i)) << i;
    for (int i = 0; i < kN; ++i) {
      for (int j = 0; j < kN; ++j) {
        const float want = 3.0f * low_rank(i, j);
        ASSERT_NEAR(data[12 + i * kN + j], want, 1e-3f * (1 + std::fabs(want))) << i << "," << j;
      }
    }
  });
}

// The cost model's payload is the compressor's: top-k's 2k gathered and n selected;
// PowerSGD's two all-reduces and 6 m n r flops per compressed weight.
TEST(LossyCompressorTest, PayloadIsWhatTheCompressorMoves) {
  const std::vector<ParamTensor> tensors = {{{0, 12}, 3}, {{12, 64 * 64}, 64}, {{12 + 64 * 64, 64}, 0}};
  const ParamRange bucket{0, 12 + 64 * 64 + 64};
  absl::StatusOr<LossyPayload> p = LossyPayloadOf(TopK(0.01), bucket, tensors);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->gather_floats, 2 * 42);  // ceil(0.01 x 4172).
  EXPECT_EQ(p->select_values, 4172);
  p = LossyPayloadOf(PowerSgd(4), bucket, tensors);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->reduce_floats[0], 12 + 64 * 4 + 64);
  EXPECT_EQ(p->reduce_floats[1], 64 * 4);
  EXPECT_DOUBLE_EQ(p->gemm_flops, 6.0 * 64 * 64 * 4);
  RunRanks(1, [&](ProcessGroup& pg) {
    auto c = LossyCompressor::Create(PowerSgd(4), &pg, {bucket}, tensors, 1);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ((*c)->PayloadFloats(0), p->reduce_floats[0] + p->reduce_floats[1]);
  });
}

// A tensor across a bucket's edge, or a method that is not lossy: refused.
TEST(LossyCompressorTest, RefusesBadLayouts) {
  RunRanks(1, [&](ProcessGroup& pg) {
    auto c = LossyCompressor::Create(PowerSgd(2), &pg, {{0, 10}, {10, 10}}, {{{5, 10}, 2}}, 1);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find("straddles"), std::string::npos) << c.status();
    Compression none;
    EXPECT_EQ(LossyCompressor::Create(none, &pg, {{0, 10}}, {}, 1).status().code(),
              absl::StatusCode::kInvalidArgument);
  });
}

// Gram-Schmidt: the columns come out orthonormal and span what went in.
TEST(LossyCompressorTest, OrthonormalizeColumns) {
  constexpr int kRows = 20, kCols = 4;
  std::vector<float> a(kRows * kCols);
  Rng rng(5);
  for (float& x : a) x = rng.Normal();
  OrthonormalizeColumns(a.data(), kRows, kCols);
  for (int i = 0; i < kCols; ++i) {
    for (int j = 0; j < kCols; ++j) {
      double dot = 0;
      for (int r = 0; r < kRows; ++r) dot += double{a[r * kCols + i]} * a[r * kCols + j];
      EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-5) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace ringside
