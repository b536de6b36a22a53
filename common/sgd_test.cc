#include "common/sgd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "common/cpu_ops.h"
#include "common/model.h"
#include "common/random.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr int kBatch = 16;
constexpr int kClasses = 4;
const Shape kShape{12, 1, 1};

// Trains steps [first_step, first_step + steps) on fixed random batches. In the
// fused form backward adds onto the carried term; in the own-buffer form it
// overwrites the gradients, which Step then reads.
void Train(Model* model, Sgd* sgd, int first_step, int steps) {
  for (int s = first_step; s < first_step + steps; ++s) {
    Rng rng(100 + s);
    std::vector<float> x(kBatch * kShape.size());
    std::vector<int32_t> y(kBatch);
    for (float& v : x) v = rng.Normal();
    for (int32_t& v : y) v = static_cast<int32_t>(rng.Below(kClasses));
    ASSERT_TRUE(model->Forward(x.data(), y.data(), kBatch).ok());
    ASSERT_TRUE(model->Backward(1.0f / kBatch, nullptr, sgd->in_gradients()).ok());
    sgd->Step(model->params(), model->grads());
  }
}

std::unique_ptr<Model> NewModel(Ops* ops) {
  auto model = Model::Create("mlp:12-9-4", kShape, kClasses, ops);
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->InitParams(5).ok());
  return std::move(*model);
}

void ExpectNear(const float* got, const float* want, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6f + 1e-5f * std::fabs(want[i])) << "element " << i;
  }
}

TEST(SgdTest, InGradientsRefusesNesterovAndBadHyperParameters) {
  auto ops = NewCpuOps(1);
  std::vector<float> grads(8, 1.0f);
  EXPECT_EQ(Sgd::CreateInGradients({0.1f, 0.9f, 0.0f, true}, grads.data(), 8, ops.get())
                .status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Sgd::CreateInGradients({-0.1f, 0.9f, 0.0f, false}, grads.data(), 8, ops.get())
                .status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Sgd::CreateInGradients({0.1f, 1.0f, 0.0f, false}, grads.data(), 8, ops.get())
                .status().code(),
            absl::StatusCode::kInvalidArgument);
  auto sgd = Sgd::CreateInGradients({0.1f, 0.9f, 0.0f, false}, grads.data(), 8, ops.get());
  ASSERT_TRUE(sgd.ok());
  EXPECT_TRUE(sgd->in_gradients());
  EXPECT_EQ(grads, std::vector<float>(8, 0.0f));  // The carried term starts at 0.
}

// Both forms train to the same parameters and the same state, within rounding, with
// and without momentum and weight decay.
TEST(SgdTest, InGradientsTrainsLikeTheOwnBufferForm) {
  auto ops = NewCpuOps(1);
  for (const SgdHyper& h : {SgdHyper{0.1f, 0.9f, 0.0f, false}, SgdHyper{0.1f, 0.9f, 1e-2f, false},
                            SgdHyper{0.2f, 0.0f, 0.0f, false}}) {
    SCOPED_TRACE(testing::Message() << "momentum=" << h.momentum << " wd=" << h.weight_decay);
    std::unique_ptr<Model> a = NewModel(ops.get());
    std::unique_ptr<Model> b = NewModel(ops.get());
    const int64_t n = a->num_params();
    auto own = Sgd::Create(h, n, ops.get());
    auto fused = Sgd::CreateInGradients(h, b->grads(), n, ops.get());
    ASSERT_TRUE(own.ok() && fused.ok());
    Train(a.get(), &*own, 0, 12);
    Train(b.get(), &*fused, 0, 12);
    ExpectNear(b->params(), a->params(), n);
    auto sa = own->SaveState();
    auto sb = fused->SaveState();
    ASSERT_TRUE(sa.ok() && sb.ok());
    ASSERT_EQ(sa->size(), h.momentum != 0 ? static_cast<size_t>(n) : 0u);
    ASSERT_EQ(sb->size(), sa->size());
    ExpectNear(sb->data(), sa->data(), static_cast<int64_t>(sa->size()));
  }
}

// A state saved by one form resumes under the other: the same steps follow.
TEST(SgdTest, StateMovesBetweenTheForms) {
  auto ops = NewCpuOps(1);
  const SgdHyper h{0.1f, 0.9f, 0.0f, false};
  std::unique_ptr<Model> a = NewModel(ops.get());
  const int64_t n = a->num_params();
  auto own = Sgd::Create(h, n, ops.get());
  ASSERT_TRUE(own.ok());
  Train(a.get(), &*own, 0, 5);
  auto saved = own->SaveState();
  ASSERT_TRUE(saved.ok());

  // b resumes a's parameters and state in the fused form; a goes on as it was.
  std::unique_ptr<Model> b = NewModel(ops.get());
  std::copy(a->params(), a->params() + n, b->params());
  auto fused = Sgd::CreateInGradients(h, b->grads(), n, ops.get());
  ASSERT_TRUE(fused.ok());
  ASSERT_TRUE(fused->LoadState(*saved).ok());
  EXPECT_EQ(std::vector<float>(b->grads(), b->grads() + n), *saved);
  Train(a.get(), &*own, 5, 5);
  Train(b.get(), &*fused, 5, 5);
  ExpectNear(b->params(), a->params(), n);

  // Ranges (a parameter-server chunk) read and write the same floats.
  std::vector<float> range(7);
  ASSERT_TRUE(fused->SaveStateRange(3, absl::MakeSpan(range)).ok());
  EXPECT_EQ(range, std::vector<float>(b->grads() + 3, b->grads() + 10));
  EXPECT_EQ(fused->SaveStateRange(n - 3, absl::MakeSpan(range)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fused->LoadState(std::vector<float>(n - 1)).code(),
            absl::StatusCode::kInvalidArgument);
}

// Numerical safety: the update pass flags a non-finite parameter it writes, leaves the
// flag alone otherwise, and computes the same floats with the check as without.
TEST(SgdTest, UpdatePassFlagsNonFiniteParameters) {
  auto ops = NewCpuOps(1);
  for (bool in_gradients : {false, true}) {
    for (float momentum : {0.0f, 0.9f}) {
      constexpr int64_t kN = 5000;  // More than one block of the CPU loops.
      const SgdHyper hyper{0.1f, momentum, 0.01f, false};
      std::vector<float> p1(kN), p2(kN), g1(kN), g2(kN);
      for (int64_t i = 0; i < kN; ++i) {
        p1[i] = p2[i] = 0.001f * static_cast<float>(i % 97);
        g1[i] = g2[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
      }
      auto make = [&](std::vector<float>* g) {
        return in_gradients ? Sgd::CreateInGradients(hyper, g->data(), kN, ops.get())
                            : Sgd::Create(hyper, kN, ops.get());
      };
      auto checked = make(&g1);
      auto plain = make(&g2);
      ASSERT_TRUE(checked.ok() && plain.ok());
      if (in_gradients) {  // Create zeroed them: put the gradients back.
        for (int64_t i = 0; i < kN; ++i) g1[i] = g2[i] = 0.01f * static_cast<float>(i % 13);
      }
      float flag = 0.0f;
      checked->StepRange(0, kN, p1.data(), g1.data(), false, &flag);
      plain->StepRange(0, kN, p2.data(), g2.data(), false);
      EXPECT_EQ(flag, 0.0f);
      EXPECT_EQ(p1, p2) << "momentum " << momentum << " in_gradients " << in_gradients;
      // A NaN gradient, an infinite one, and an update that overflows.
      for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(), 3e38f}) {
        g1[kN - 7] += bad;
        if (bad == 3e38f) p1[kN - 7] = -3.3e38f;  // p - lr * (g + wd p) overflows.
        flag = 0.0f;
        checked->StepRange(0, kN, p1.data(), g1.data(), false, &flag);
        EXPECT_EQ(flag, 1.0f) << "bad " << bad;
        for (float& v : p1) v = std::isfinite(v) ? v : 0.0f;
        std::fill(g1.begin(), g1.end(), 0.0f);
        if (in_gradients) {
          ASSERT_TRUE(checked->LoadState(std::vector<float>(momentum != 0 ? kN : 0, 0.0f)).ok());
        }
      }
    }
  }
}

TEST(SgdTest, RefusesNonFiniteHyperParameters) {
  auto ops = NewCpuOps(1);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Sgd::Create({inf, 0.9f, 0.0f, false}, 8, ops.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Sgd::Create({0.1f, 0.9f, inf, false}, 8, ops.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CpuOpsTest, FlagNonFiniteSetsTheFlagOnlyForNanOrInf) {
  auto ops = NewCpuOps(1);
  std::vector<float> x(3000, 1e38f);
  x[5] = -3.4e38f;
  float flag = 0.0f;
  ops->FlagNonFinite(x.data(), static_cast<int64_t>(x.size()), &flag);
  EXPECT_EQ(flag, 0.0f);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    x[2999] = bad;
    ops->FlagNonFinite(x.data(), static_cast<int64_t>(x.size()), &flag);
    EXPECT_EQ(flag, 1.0f);
    flag = 0.0f;
  }
}

}  // namespace
}  // namespace ringside
