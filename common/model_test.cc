#include "common/model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/cpu_ops.h"
#include "common/random.h"
#include "common/sgd.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batch RandomBatch(Shape shape, int batch, int classes, uint64_t seed) {
  Rng rng(seed);
  Batch b;
  b.x.resize(batch * shape.size());
  for (float& v : b.x) v = rng.Normal();
  for (int i = 0; i < batch; ++i) b.y.push_back(static_cast<int32_t>(rng.Below(classes)));
  return b;
}

double MeanLoss(Model* model, const Batch& b, int batch) {
  auto r = model->Forward(b.x.data(), b.y.data(), batch);
  EXPECT_TRUE(r.ok()) << r.status();
  return r->loss_sum / batch;
}

// Central differences on the mean loss for `per_layer` sampled parameters of every
// layer, against Backward's gradient. Returns the fraction that disagree.
void CheckGradients(Model* model, Shape shape, int batch, int classes, int per_layer) {
  const Batch b = RandomBatch(shape, batch, classes, 7);
  ASSERT_TRUE(model->Forward(b.x.data(), b.y.data(), batch).ok());
  std::vector<ParamRange> announced;
  ASSERT_TRUE(model->Backward(1.0f / batch, [&](const ParamRange& r) {
                     announced.push_back(r);
                   }).ok());
  // Ranges arrive in reverse layer order and tile the buffer.
  ASSERT_EQ(announced.size(), model->layer_ranges().size());
  int64_t end = model->num_params();
  for (const ParamRange& r : announced) {
    EXPECT_EQ(r.offset + r.size, end);
    end = r.offset;
  }
  EXPECT_EQ(end, 0);

  const std::vector<float> grads(model->grads(), model->grads() + model->num_params());
  float* p = model->params();
  Rng rng(11);
  int checked = 0, bad = 0, kinks = 0;
  double worst = 0;
  for (const ParamRange& r : model->layer_ranges()) {
    for (int s = 0; s < per_layer; ++s) {
      const int64_t i = r.offset + static_cast<int64_t>(rng.Below(r.size));
      const float saved = p[i];
      const float eps = 1e-3f * std::max(1.0f, std::fabs(saved));
      const double mid = MeanLoss(model, b, batch);
      p[i] = saved + eps;
      const double up = MeanLoss(model, b, batch);
      p[i] = saved - eps;
      const double down = MeanLoss(model, b, batch);
      p[i] = saved;
      const double tol_abs = 1e-3;
      // A ReLU or max-pool decision that flips inside [p - eps, p + eps] makes the
      // loss non-smooth there; the one-sided slopes then disagree. Skip such samples.
      const double right = (up - mid) / eps, left = (mid - down) / eps;
      if (std::fabs(right - left) > tol_abs + 5e-2 * std::fabs(right)) {
        ++kinks;
        continue;
      }
      const double numeric = (up - down) / (2.0 * eps);
      const double err = std::fabs(numeric - grads[i]);
      const double tol = tol_abs + 2e-2 * std::fabs(numeric);
      worst = std::max(worst, err / (tol_abs + std::fabs(numeric)));
      ++checked;
      if (err > tol) {
        ++bad;
        ADD_FAILURE() << "param " << i << ": analytic " << grads[i] << " numeric " << numeric;
        if (bad > 5) return;
      }
    }
  }
  // Kinks are rare; most samples must be checked.
  EXPECT_LT(kinks, checked / 5) << kinks << " kinks";
  EXPECT_EQ(bad, 0) << "of " << checked << " checked";
  ::testing::Test::RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST(ModelTest, MlpGradientsMatchFiniteDifferences) {
  auto ops = NewCpuOps(1);
  const Shape shape{12, 1, 1};
  auto model = Model::Create("mlp:12-9-7-4", shape, 4, ops.get());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->InitParams(3).ok());
  EXPECT_EQ((*model)->num_params(), 12 * 9 + 9 + 9 * 7 + 7 + 7 * 4 + 4);
  CheckGradients(model->get(), shape, 5, 4, 40);
}

TEST(ModelTest, LenetGradientsMatchFiniteDifferences) {
  auto ops = NewCpuOps(1);
  // Two channels exercise the [B, C, H, W] -> [C, B, H, W] transpose too.
  const Shape shape{2, 16, 16};
  auto model = Model::Create("cnn:lenet", shape, 3, ops.get());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->InitParams(5).ok());
  CheckGradients(model->get(), shape, 3, 3, 30);
}

TEST(ModelTest, LenetShapesOnFashionMnistInputs) {
  auto ops = NewCpuOps(1);
  auto model = Model::Create("cnn:lenet", {1, 28, 28}, 10, ops.get());
  ASSERT_TRUE(model.ok()) << model.status();
  // conv1 32*25+32, conv2 64*32*25+64, fc1 1024*512+512, fc2 512*10+10.
  EXPECT_EQ((*model)->num_params(), 832 + 51264 + 524800 + 5130);
  ASSERT_EQ((*model)->layer_ranges().size(), 4u);
}

// Each layer's weight and bias apart, tiling the flat vector: LeNet's fc1 weight (1024 x
// 512) is 90% of its floats, the tensor a whole-tensor PS placement puts on one shard.
TEST(ModelTest, TensorRangesSplitWeightsFromBiases) {
  auto ops = NewCpuOps(1);
  auto model = Model::Create("cnn:lenet", {1, 28, 28}, 10, ops.get());
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<ParamRange> tensors = (*model)->TensorRanges();
  const std::vector<int64_t> want = {800, 32, 51200, 64, 524288, 512, 5120, 10};
  ASSERT_EQ(tensors.size(), want.size());
  int64_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(tensors[i].offset, at) << i;
    EXPECT_EQ(tensors[i].size, want[i]) << i;
    at += tensors[i].size;
  }
  EXPECT_EQ(at, (*model)->num_params());
  // Their shapes: conv1 [32, 1x5x5], conv2 [64, 32x5x5], fc1 [512, 1024], fc2 [10, 512];
  // the biases are vectors.
  const std::vector<ParamTensor> shaped = (*model)->Tensors();
  const std::vector<int64_t> rows = {32, 0, 64, 0, 512, 0, 10, 0};
  ASSERT_EQ(shaped.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(shaped[i].rows, rows[i]) << i;
    EXPECT_EQ(shaped[i].range.offset, tensors[i].offset) << i;
    EXPECT_EQ(shaped[i].range.size, tensors[i].size) << i;
  }
}

TEST(ModelTest, InitIsDeterministicAndSeeded) {
  auto ops = NewCpuOps(1);
  auto a = Model::Create("mlp:6-5-3", {6, 1, 1}, 3, ops.get());
  auto b = Model::Create("mlp:6-5-3", {6, 1, 1}, 3, ops.get());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->InitParams(42).ok());
  ASSERT_TRUE((*b)->InitParams(42).ok());
  const int64_t n = (*a)->num_params();
  EXPECT_EQ(std::vector<float>((*a)->params(), (*a)->params() + n),
            std::vector<float>((*b)->params(), (*b)->params() + n));
  ASSERT_TRUE((*b)->InitParams(43).ok());
  EXPECT_NE(std::vector<float>((*a)->params(), (*a)->params() + n),
            std::vector<float>((*b)->params(), (*b)->params() + n));
  // PyTorch's bounds: |w| <= 1/sqrt(fan_in) for the first layer (fan_in 6).
  for (int i = 0; i < 6 * 5; ++i) EXPECT_LE(std::fabs((*a)->params()[i]), 1 / std::sqrt(6.0f));
}

TEST(ModelTest, SgdStepsReduceTheLoss) {
  auto ops = NewCpuOps(1);
  const Shape shape{10, 1, 1};
  auto model = Model::Create("mlp:10-16-3", shape, 3, ops.get());
  ASSERT_TRUE(model.ok());
  auto sgd = Sgd::Create({0.1f, 0.9f, 0.0f, false}, (*model)->num_params(), ops.get());
  ASSERT_TRUE(sgd.ok());
  const Batch b = RandomBatch(shape, 32, 3, 1);
  const double before = MeanLoss(model->get(), b, 32);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE((*model)->Forward(b.x.data(), b.y.data(), 32).ok());
    ASSERT_TRUE((*model)->Backward(1.0f / 32, nullptr).ok());
    sgd->Step((*model)->params(), (*model)->grads());
  }
  EXPECT_LT(MeanLoss(model->get(), b, 32), 0.5 * before);
}

TEST(ModelTest, BadSpecsAreRejected) {
  auto ops = NewCpuOps(1);
  const Shape shape{784, 1, 1};
  for (const char* spec : {"resnet:50", "mlp:", "mlp:784", "mlp:784-x-10", "mlp:784--10",
                           "mlp:784-0-10", "mlp:100-10", "mlp:784-12", "cnn:alexnet"}) {
    auto model = Model::Create(spec, shape, 10, ops.get());
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
  EXPECT_FALSE(Model::Create("cnn:lenet", {1, 8, 8}, 10, ops.get()).ok());
}

// The two models the backward tests run: an MLP on 64 inputs, LeNet on 16 x 16 images.
Shape InputShapeOf(const std::string& spec) {
  return spec == "cnn:lenet" ? Shape{1, 16, 16} : Shape{64, 1, 1};
}

// Forward and a hook-less backward over `b` (`batch` samples): the gradients.
std::vector<float> PlainGradients(Model& m, const Batch& b, int batch) {
  EXPECT_TRUE(m.Forward(b.x.data(), b.y.data(), batch).ok());
  EXPECT_TRUE(m.Backward(1.0f / batch, nullptr).ok());
  return std::vector<float>(m.grads(), m.grads() + m.num_params());
}

// Accumulating backward adds: two backward passes over halves of a batch sum to
// the overwriting backward of the whole batch (both scaled by 1 / whole batch).
TEST(ModelTest, AccumulatedHalvesEqualTheWholeBatch) {
  auto ops = NewCpuOps(1);
  for (const char* spec : {"mlp:64-12-5", "cnn:lenet"}) {
    SCOPED_TRACE(spec);
    const Shape shape = InputShapeOf(spec);
    auto model = Model::Create(spec, shape, 5, ops.get());
    ASSERT_TRUE(model.ok());
    Model& m = **model;
    const Batch b = RandomBatch(shape, 8, 5, 3);
    const std::vector<float> whole = PlainGradients(m, b, 8);
    ops->Fill(m.grads(), m.num_params(), 0.0f);
    for (int half = 0; half < 2; ++half) {
      const float* x = b.x.data() + half * 4 * shape.size();
      ASSERT_TRUE(m.Forward(x, b.y.data() + half * 4, 4).ok());
      ASSERT_TRUE(m.Backward(1.0f / 8, nullptr, /*accumulate=*/true).ok());
    }
    for (int64_t i = 0; i < m.num_params(); ++i) {
      ASSERT_NEAR(m.grads()[i], whole[i], 1e-5f + 1e-4f * std::fabs(whole[i])) << i;
    }
  }
}

// BackwardHooks: per layer (last first), grads_ready and then params_free; the
// gradients are final at grads_ready, and backward reads no parameter of a layer after
// its params_free (garbage written there changes no gradient).
TEST(ModelTest, HooksComeInOrderAndParamsFreeMeansUnread) {
  auto ops = NewCpuOps(1);
  for (const char* spec : {"mlp:64-12-9-5", "cnn:lenet"}) {
    SCOPED_TRACE(spec);
    const Shape shape = InputShapeOf(spec);
    auto model = Model::Create(spec, shape, 5, ops.get());
    ASSERT_TRUE(model.ok());
    Model& m = **model;
    const Batch b = RandomBatch(shape, 8, 5, 3);
    const std::vector<float> want = PlainGradients(m, b, 8);

    ASSERT_TRUE(m.Forward(b.x.data(), b.y.data(), 8).ok());
    ops->Fill(m.grads(), m.num_params(), 0.0f);
    std::vector<std::pair<char, ParamRange>> events;
    BackwardHooks hooks;
    hooks.grads_ready = [&](const ParamRange& r) {
      events.push_back({'g', r});
      for (int64_t i = r.offset; i < r.offset + r.size; ++i) {
        ASSERT_EQ(m.grads()[i], want[i]) << i;
      }
    };
    hooks.params_free = [&](const ParamRange& r) {
      events.push_back({'f', r});
      std::fill(m.params() + r.offset, m.params() + r.offset + r.size, NAN);
    };
    ASSERT_TRUE(m.Backward(1.0f / 8, hooks).ok());
    for (int64_t i = 0; i < m.num_params(); ++i) ASSERT_EQ(m.grads()[i], want[i]) << i;

    const std::vector<ParamRange>& layers = m.layer_ranges();
    ASSERT_EQ(events.size(), 2 * layers.size());
    for (size_t j = 0; j < layers.size(); ++j) {
      const ParamRange& layer = layers[layers.size() - 1 - j];
      for (int e = 0; e < 2; ++e) {
        EXPECT_EQ(events[2 * j + e].first, e == 0 ? 'g' : 'f');
        EXPECT_EQ(events[2 * j + e].second.offset, layer.offset);
        EXPECT_EQ(events[2 * j + e].second.size, layer.size);
      }
    }
  }
}

// BackwardHooks::split_at: a layer cut by a split offset is announced in pieces, its
// bias first, then row blocks from the top down, each starting at the row that holds
// a split offset; the first layer's pieces are freed at once. The exact sequence for
// an MLP: layers [0, 780) (W 12x64, b 12), [780, 897) (W 9x12, b 9), [897, 947).
TEST(ModelTest, SplitAtAnnouncesRowBlocksTopDown) {
  auto ops = NewCpuOps(1);
  const std::string spec = "mlp:64-12-9-5";
  const Shape shape = InputShapeOf(spec);
  auto model = Model::Create(spec, shape, 5, ops.get());
  ASSERT_TRUE(model.ok());
  Model& m = **model;
  ASSERT_EQ(m.num_params(), 947);
  const Batch b = RandomBatch(shape, 8, 5, 3);
  const std::vector<float> want = PlainGradients(m, b, 8);

  ASSERT_TRUE(m.Forward(b.x.data(), b.y.data(), 8).ok());
  std::vector<std::pair<char, ParamRange>> events;
  BackwardHooks hooks;
  hooks.grads_ready = [&](const ParamRange& r) {
    events.push_back({'g', r});
    for (int64_t i = r.offset; i < r.offset + r.size; ++i) {
      ASSERT_NEAR(m.grads()[i], want[i], 1e-6f + 1e-5f * std::fabs(want[i])) << i;
    }
  };
  hooks.params_free = [&](const ParamRange& r) {
    events.push_back({'f', r});
    std::fill(m.params() + r.offset, m.params() + r.offset + r.size, NAN);
  };
  // Row 1 and row 10 of layer 0's weight, its bias, row 1 of layer 1's weight; layer
  // boundaries and the ends add nothing.
  hooks.split_at = {800, 100, 700, 770, 0, 780, 897, 947, 5000, -3};
  ASSERT_TRUE(m.Backward(1.0f / 8, hooks).ok());

  using E = std::pair<char, std::pair<int64_t, int64_t>>;
  std::vector<E> got;
  for (const auto& [kind, r] : events) got.push_back({kind, {r.offset, r.offset + r.size}});
  const std::vector<E> expected = {
      {'g', {897, 947}}, {'f', {897, 947}},                       // layer 2, whole
      {'g', {792, 897}}, {'g', {780, 792}}, {'f', {780, 897}},    // layer 1: din reads W
      {'g', {768, 780}}, {'f', {768, 780}}, {'g', {640, 768}}, {'f', {640, 768}},
      {'g', {64, 640}},  {'f', {64, 640}},  {'g', {0, 64}},      {'f', {0, 64}}};
  EXPECT_EQ(got, expected);
  for (int64_t i = 0; i < m.num_params(); ++i) {
    ASSERT_NEAR(m.grads()[i], want[i], 1e-6f + 1e-5f * std::fabs(want[i])) << i;
  }
}

// The same contract for every layer kind that splits (linear and convolution), with
// six split offsets evenly spread, and with gradient accumulation.
TEST(ModelTest, SplitAtPiecesTileAndMatchTheUnsplitGradients) {
  auto ops = NewCpuOps(1);
  for (const char* spec : {"mlp:64-12-9-5", "cnn:lenet"}) {
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(testing::Message() << spec << " accumulate=" << accumulate);
      const Shape shape = InputShapeOf(spec);
      auto model = Model::Create(spec, shape, 5, ops.get());
      ASSERT_TRUE(model.ok());
      Model& m = **model;
      const Batch b = RandomBatch(shape, 4, 5, 9);
      std::vector<float> want = PlainGradients(m, b, 4);
      if (accumulate) {
        for (int64_t i = 0; i < m.num_params(); ++i) want[i] += 0.5f;
      }
      ASSERT_TRUE(m.Forward(b.x.data(), b.y.data(), 4).ok());
      ops->Fill(m.grads(), m.num_params(), accumulate ? 0.5f : 7.0f);
      std::vector<ParamRange> pieces;
      BackwardHooks hooks;
      hooks.grads_ready = [&](const ParamRange& r) { pieces.push_back(r); };
      const int64_t every = m.num_params() / 7 + 1;
      for (int64_t at = every; at < m.num_params(); at += every) hooks.split_at.push_back(at);
      ASSERT_TRUE(m.Backward(1.0f / 4, hooks, accumulate).ok());

      // Highest first, tiling [0, num_params()); more pieces than layers.
      int64_t top = m.num_params();
      for (const ParamRange& r : pieces) {
        ASSERT_GT(r.size, 0);
        EXPECT_EQ(r.offset + r.size, top);
        top = r.offset;
      }
      EXPECT_EQ(top, 0);
      EXPECT_GT(pieces.size(), m.layer_ranges().size());
      for (int64_t i = 0; i < m.num_params(); ++i) {
        ASSERT_NEAR(m.grads()[i], want[i], 1e-6f + 1e-5f * std::fabs(want[i])) << i;
      }
    }
  }
}

// Forward with params_needed reads each range only after asking for it: the model
// starts with wrong parameters, and the hook writes the right ones into exactly the
// range it is asked for (as a parameter server's replies would arrive). The loss and
// the gradients then match a plain forward on the right parameters; the asked ranges
// tile [0, num_params()), each layer's highest first, and the split layers are asked
// in more pieces than there are layers.
TEST(ModelTest, ForwardAsksForEachPieceBeforeReadingIt) {
  auto ops = NewCpuOps(1);
  for (const char* spec : {"mlp:64-12-9-5", "cnn:lenet"}) {
    SCOPED_TRACE(spec);
    const Shape shape = InputShapeOf(spec);
    auto model = Model::Create(spec, shape, 5, ops.get());
    ASSERT_TRUE(model.ok());
    Model& m = **model;
    ASSERT_TRUE(m.InitParams(5).ok());
    const std::vector<float> right(m.params(), m.params() + m.num_params());
    const Batch b = RandomBatch(shape, 4, 5, 11);
    auto plain = m.Forward(b.x.data(), b.y.data(), 4);
    ASSERT_TRUE(plain.ok());
    const std::vector<float> want = PlainGradients(m, b, 4);

    ops->Fill(m.params(), m.num_params(), 0.25f);
    std::vector<ParamRange> asked;
    ForwardHooks hooks;
    hooks.params_needed = [&](const ParamRange& r) {
      asked.push_back(r);
      std::copy(right.begin() + r.offset, right.begin() + r.offset + r.size,
                m.params() + r.offset);
      return absl::OkStatus();
    };
    const int64_t every = m.num_params() / 7 + 1;
    for (int64_t at = every; at < m.num_params(); at += every) hooks.split_at.push_back(at);
    auto hooked = m.Forward(b.x.data(), b.y.data(), 4, hooks);
    ASSERT_TRUE(hooked.ok()) << hooked.status();
    EXPECT_NEAR(hooked->loss_sum, plain->loss_sum, 1e-5 * std::fabs(plain->loss_sum));
    EXPECT_EQ(hooked->correct, plain->correct);
    ASSERT_TRUE(m.Backward(1.0f / 4, nullptr).ok());
    for (int64_t i = 0; i < m.num_params(); ++i) {
      ASSERT_NEAR(m.grads()[i], want[i], 1e-6f + 1e-5f * std::fabs(want[i])) << i;
    }

    std::vector<int> owner(m.num_params(), 0);
    for (const ParamRange& r : asked) {
      ASSERT_GT(r.size, 0);
      for (int64_t i = r.offset; i < r.offset + r.size; ++i) ++owner[i];
    }
    EXPECT_EQ(std::count(owner.begin(), owner.end(), 1), m.num_params());
    EXPECT_GT(asked.size(), m.layer_ranges().size());
    // Within a layer, the pieces come highest offset first.
    for (const ParamRange& layer : m.layer_ranges()) {
      int64_t top = layer.offset + layer.size;
      for (const ParamRange& r : asked) {
        if (r.offset < layer.offset || r.offset >= layer.offset + layer.size) continue;
        EXPECT_EQ(r.offset + r.size, top);
        top = r.offset;
      }
      EXPECT_EQ(top, layer.offset);
    }
  }
}

TEST(ModelTest, ForwardStopsWithTheHooksError) {
  auto ops = NewCpuOps(1);
  auto model = Model::Create("mlp:64-12-5", {1, 8, 8}, 5, ops.get());
  ASSERT_TRUE(model.ok());
  const Batch b = RandomBatch({1, 8, 8}, 2, 5, 3);
  int calls = 0;
  ForwardHooks hooks;
  hooks.params_needed = [&](const ParamRange&) {
    ++calls;
    return absl::UnavailableError("shard 0: gone");
  };
  auto r = (*model)->Forward(b.x.data(), b.y.data(), 2, hooks);
  EXPECT_EQ(r.status(), absl::UnavailableError("shard 0: gone"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ((*model)->Backward(1.0f, nullptr).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ModelTest, BackwardBeforeForwardFails) {
  auto ops = NewCpuOps(1);
  auto model = Model::Create("mlp:4-3", {4, 1, 1}, 3, ops.get());
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->Backward(1.0f, nullptr).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringside
