// Whole models and training runs on the CUDA ops backend against the CPU backend:
//
// - One forward and backward of each model on the same parameters and batch: the loss
//   sum within 1e-5 relative (a sum of positive per-sample losses, each a few roundings
//   off), the correct count equal, the gradients of every layer within 1e-4 norm-wise
//   relative error (sums over the batch and the layer widths, added in another order
//   on each backend, then propagated back through the layers).
// - 20 training steps of the MLP and of LeNet through the Trainer with SGD and momentum
//   0.9: final parameters within 1e-4 norm-wise relative error (the bar). Rounding
//   differences alone stay near 1e-7 over 20 steps, but now and then one flips a
//   discrete decision (a ReLU input or a max-pool pair within an ulp of a tie), which
//   routes one gradient element differently from then on: in a CPU-vs-CPU check with
//   GPU-like rounding (FMA, other summation orders) one such flip in LeNet at lr 0.05
//   moved the parameters by 7e-5 relative and the momentum by 1.4e-2. Hence lr 0.01
//   (a flip's effect on the parameters scales with it), and looser bounds on what a
//   flip moves most: the parameters' change from their shared initial values within
//   1e-2 and the momentum state within 5e-2. A wrong update (momentum not carried, a
//   stale or unscaled gradient) is off by O(1) in both.
// - Checkpoints are portable: 10 steps on the GPU resumed on the CPU for 10 more, and the
//   reverse, end within the same bounds of 20 CPU steps straight.
//
// With no CUDA in the build or no usable GPU, every test skips with the factory's
// reason.
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint.h"
#include "common/device.h"
#include "common/replica.h"
#include "common/dataset.h"
#include "common/model.h"
#include "common/ops.h"
#include "common/ops_factory.h"
#include "common/random.h"
#include "common/run_config.h"
#include "common/trainer.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// The backend under test; the CPU backend is the reference.
constexpr char kDeviceKind[] = "cuda";

using Vec = std::vector<float>;

enum class Backend { kCpu, kDevice };

const char* Name(Backend b) { return b == Backend::kCpu ? "cpu" : kDeviceKind; }

absl::StatusOr<std::unique_ptr<Ops>> NewBackend(Backend b) {
  return b == Backend::kCpu ? NewOps("cpu", 0, 1) : NewOps(kDeviceKind, 0, 0);
}

Vec Download(Ops* ops, const float* data, int64_t n) {
  Vec host(n);
  const absl::Status copy = ops->CopyToHost(host.data(), data, n * sizeof(float));
  EXPECT_TRUE(copy.ok()) << copy;
  const absl::Status sync = ops->Synchronize();
  EXPECT_TRUE(sync.ok()) << sync;
  return host;
}

template <typename T>
DeviceArray<T> Upload(Ops* ops, const std::vector<T>& host) {
  DeviceArray<T> array = DeviceArray<T>::Create(ops, host.size()).value();
  const absl::Status copy = ops->CopyToDevice(array.data(), host.data(), host.size() * sizeof(T));
  EXPECT_TRUE(copy.ok()) << copy;
  return array;
}

// ||got - want|| / ||want|| over [begin, end) (all of it by default).
double NormRelError(const Vec& got, const Vec& want, int64_t begin = 0, int64_t end = -1) {
  if (end < 0) end = static_cast<int64_t>(want.size());
  double diff = 0, ref = 0;
  for (int64_t i = begin; i < end; ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    ref += static_cast<double>(want[i]) * want[i];
  }
  return ref == 0 ? (diff == 0 ? 0 : INFINITY) : std::sqrt(diff / ref);
}

Vec Minus(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] - b[i];
  return out;
}

// A fresh directory under the test's temporary directory (also when the binary runs
// outside Bazel, where TempDir() is shared).
std::string MakeTempDir(const std::string& name) {
  std::string pattern = ::testing::TempDir();
  if (!pattern.empty() && pattern.back() != '/') pattern += '/';
  pattern += "cuda_model_test_" + name + ".XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << pattern << " failed";
    return "";
  }
  return std::string(buf.data());
}

class CudaModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Ops>> dev = NewBackend(Backend::kDevice);
    if (!dev.ok()) GTEST_SKIP() << "no CUDA GPU: " << dev.status();
  }
};

// ---- Forward and backward. ----

struct ModelCase {
  const char* spec;
  Shape input;
  int classes;
};

std::string Describe(const ModelCase& m) {
  return absl::StrCat(m.spec, " on ", m.input.c, "x", m.input.h, "x", m.input.w, ", ",
                      m.classes, " classes");
}

// What one forward and backward gave on one backend.
struct Pass {
  ForwardResult forward;
  Vec params;
  Vec grads;
  std::vector<ParamRange> announced;
  std::vector<ParamRange> layers;
};

Pass ForwardBackward(Backend b, const ModelCase& m, const Vec& x, const std::vector<int32_t>& y,
                     int batch) {
  Pass pass;
  auto ops = NewBackend(b);
  EXPECT_TRUE(ops.ok()) << ops.status();
  if (!ops.ok()) return pass;
  auto model = Model::Create(m.spec, m.input, m.classes, ops->get());
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return pass;
  Model& net = **model;
  EXPECT_TRUE(net.InitParams(17).ok());
  DeviceArray<float> dx = Upload(ops->get(), x);
  DeviceArray<int32_t> dy = Upload(ops->get(), y);
  auto forward = net.Forward(dx.data(), dy.data(), batch);
  EXPECT_TRUE(forward.ok()) << forward.status();
  if (!forward.ok()) return pass;
  pass.forward = *forward;
  const absl::Status backward = net.Backward(
      1.0f / batch, [&](const ParamRange& r) { pass.announced.push_back(r); });
  EXPECT_TRUE(backward.ok()) << backward;
  pass.params = Download(ops->get(), net.params(), net.num_params());
  pass.grads = Download(ops->get(), net.grads(), net.num_params());
  pass.layers = net.layer_ranges();
  return pass;
}

TEST_F(CudaModelTest, ForwardAndBackwardMatchCpu) {
  const ModelCase cases[] = {
      {"mlp:784-512-512-10", {1, 28, 28}, 10},
      {"cnn:lenet", {1, 28, 28}, 10},
      // Odd channels and sizes: 21x23 -> 17x19 -> 8x9 (pooling drops a row) -> 4x5 -> 2x2.
      {"cnn:lenet", {3, 21, 23}, 7},
      {"mlp:33-17-127-3", {33, 1, 1}, 3},
  };
  const int batch = 37;
  for (const ModelCase& m : cases) {
    SCOPED_TRACE(Describe(m));
    Rng rng(5);
    Vec x(batch * m.input.size());
    for (float& v : x) v = rng.Normal();
    std::vector<int32_t> y(batch);
    for (int32_t& v : y) v = static_cast<int32_t>(rng.Below(m.classes));
    const Pass cpu = ForwardBackward(Backend::kCpu, m, x, y, batch);
    const Pass dev = ForwardBackward(Backend::kDevice, m, x, y, batch);
    ASSERT_FALSE(cpu.grads.empty());
    ASSERT_EQ(dev.grads.size(), cpu.grads.size());
    // Initialisation is drawn on the host: the same floats on both.
    EXPECT_TRUE(dev.params == cpu.params) << "initial parameters differ";
    EXPECT_NEAR(dev.forward.loss_sum, cpu.forward.loss_sum,
                1e-5 * std::fabs(cpu.forward.loss_sum));
    EXPECT_EQ(dev.forward.correct, cpu.forward.correct);
    // The same announcements, in the same order.
    ASSERT_EQ(dev.announced.size(), cpu.announced.size());
    for (size_t i = 0; i < cpu.announced.size(); ++i) {
      EXPECT_EQ(dev.announced[i].offset, cpu.announced[i].offset);
      EXPECT_EQ(dev.announced[i].size, cpu.announced[i].size);
    }
    for (size_t l = 0; l < cpu.layers.size(); ++l) {
      const ParamRange& r = cpu.layers[l];
      const double err = NormRelError(dev.grads, cpu.grads, r.offset, r.offset + r.size);
      EXPECT_LT(err, 1e-4) << "gradients of layer " << l << " (" << r.size << " parameters)";
      std::printf("%s: layer %zu gradient norm-wise relative error %.3g\n",
                  Describe(m).c_str(), l, err);
    }
    EXPECT_LT(NormRelError(dev.grads, cpu.grads), 1e-4) << "all gradients";
  }
}

// ---- Training through the Trainer. ----

constexpr int kBatch = 37;

RunConfig TrainConfig(const std::string& spec, bool nesterov) {
  RunConfig c;
  c.set_strategy("single");
  c.set_model(spec);
  // 1000 samples: 27 batches of 37 per epoch, so 10 and 20 steps end inside the first.
  c.set_dataset("synthetic:train=1000,test=100,shape=1x28x28,classes=10,seed=4");
  c.set_epochs(100);
  c.set_batch(kBatch);
  c.set_lr(0.01f);  // See the header comment.
  c.set_momentum(0.9f);
  c.set_weight_decay(1e-3f);
  c.set_nesterov(nesterov);
  c.set_seed(9);
  c.set_world_size(1);
  return c;
}

struct TrainOutcome {
  Vec initial_params;
  Vec params;
  Vec optimizer_state;
  TrainResult result;
};

// Trains `c` for max_steps on `backend` (resuming from out_dir when `resume`); the
// parameters and momentum state it ends with.
TrainOutcome Train(Backend backend, RunConfig c, int64_t max_steps, const std::string& out_dir,
                   bool resume) {
  TrainOutcome out;
  c.set_max_steps(max_steps);
  SyntheticOptions so;
  so.train_size = 1000;
  so.test_size = 100;
  so.channels = 1;
  so.height = 28;
  so.width = 28;
  so.num_classes = 10;
  so.seed = 4;
  auto data = MakeSyntheticDataset(so);
  EXPECT_TRUE(data.ok()) << data.status();
  auto ops = NewBackend(backend);
  EXPECT_TRUE(ops.ok()) << ops.status();
  if (!data.ok() || !ops.ok()) return out;
  auto model = Model::Create(c.model(), {1, 28, 28}, 10, ops->get());
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return out;
  auto strategy = LocalSgdStrategy::Create(
      {c.lr(), c.momentum(), c.weight_decay(), c.nesterov()}, model->get(), ops->get());
  EXPECT_TRUE(strategy.ok()) << strategy.status();
  if (!strategy.ok()) return out;
  TrainerOptions o;
  o.config = c;
  o.out_dir = out_dir;
  o.resume = resume;
  o.progress = nullptr;
  auto trainer = Trainer::Create(o, model->get(), ops->get(), &*data, strategy->get());
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return out;
  out.initial_params = Download(ops->get(), (*model)->params(), (*model)->num_params());
  auto result = (*trainer)->Run();
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return out;
  out.result = *result;
  out.params = Download(ops->get(), (*model)->params(), (*model)->num_params());
  auto state = (*strategy)->SaveOptimizerState();
  EXPECT_TRUE(state.ok()) << state.status();
  if (state.ok()) out.optimizer_state = *std::move(state);
  return out;
}

// `got` ended within the bounds of the header comment of `want`, both having started
// from `start`'s parameters.
void ExpectSameTraining(const TrainOutcome& got, const TrainOutcome& want, const Vec& start,
                        const std::string& what) {
  ASSERT_FALSE(want.params.empty()) << what;
  ASSERT_EQ(got.params.size(), want.params.size()) << what;
  ASSERT_EQ(got.optimizer_state.size(), want.optimizer_state.size()) << what;
  ASSERT_EQ(start.size(), want.params.size()) << what;
  const double params = NormRelError(got.params, want.params);
  const double moved = NormRelError(Minus(got.params, start), Minus(want.params, start));
  const double state = NormRelError(got.optimizer_state, want.optimizer_state);
  EXPECT_LT(params, 1e-4) << what << ": parameters";
  EXPECT_LT(moved, 1e-2) << what << ": parameters' change from the initial values";
  EXPECT_LT(state, 5e-2) << what << ": momentum state";
  EXPECT_EQ(got.result.steps, want.result.steps) << what;
  EXPECT_NEAR(got.result.last_loss, want.result.last_loss, 1e-3 * want.result.last_loss)
      << what;
  std::printf("%s: norm-wise relative error of the parameters %.3g, of their change %.3g, "
              "of the momentum %.3g\n",
              what.c_str(), params, moved, state);
}

TEST_F(CudaModelTest, TwentyTrainingStepsMatchCpu) {
  struct Case {
    const char* spec;
    bool nesterov;
  };
  for (const Case& t : {Case{"mlp:784-512-512-10", false}, Case{"cnn:lenet", false},
                        Case{"mlp:784-512-512-10", true}}) {
    const std::string what = absl::StrCat(t.spec, t.nesterov ? " nesterov" : "");
    SCOPED_TRACE(what);
    const RunConfig c = TrainConfig(t.spec, t.nesterov);
    const TrainOutcome cpu = Train(Backend::kCpu, c, 20, "", false);
    const TrainOutcome dev = Train(Backend::kDevice, c, 20, "", false);
    EXPECT_EQ(cpu.result.steps, 20);
    EXPECT_TRUE(dev.initial_params == cpu.initial_params) << "initial parameters differ";
    ExpectSameTraining(dev, cpu, cpu.initial_params, what + ", 20 steps");
  }
}

// 10 steps on one backend, checkpointed; 10 more on the other, resumed from it.
TEST_F(CudaModelTest, CheckpointsResumeAcrossBackends) {
  for (const char* spec : {"mlp:784-512-512-10", "cnn:lenet"}) {
    SCOPED_TRACE(spec);
    const RunConfig c = TrainConfig(spec, false);
    const TrainOutcome straight =
        Train(Backend::kCpu, c, 20, MakeTempDir("straight"), false);
    for (Backend first : {Backend::kDevice, Backend::kCpu}) {
      const Backend second = first == Backend::kCpu ? Backend::kDevice : Backend::kCpu;
      const std::string what =
          absl::StrCat(spec, ": 10 steps on ", Name(first), ", 10 resumed on ", Name(second));
      SCOPED_TRACE(what);
      const std::string dir = MakeTempDir(Name(first));
      ASSERT_FALSE(dir.empty());
      const TrainOutcome half = Train(first, c, 10, dir, false);
      EXPECT_EQ(half.result.steps, 10);
      auto ckpt = ReadCheckpoint(dir + "/" + kCheckpointFile);
      ASSERT_TRUE(ckpt.ok()) << ckpt.status();
      EXPECT_EQ(ckpt->header.step(), 10);
      const TrainOutcome resumed = Train(second, c, 20, dir, true);
      EXPECT_EQ(resumed.result.steps_this_run, 10);
      ExpectSameTraining(resumed, straight, straight.initial_params, what);
    }
  }
}

// --device=cuda with no index inside a launched job takes the GPU of LOCAL_RANK modulo
// the machine's GPU count (NewReplica); cuda:K takes GPU K.
TEST_F(CudaModelTest, ReplicaPicksTheGpuOfItsLocalRank) {
  const int gpus = DetectDevices().gpu_count;
  ASSERT_GT(gpus, 0);
  RunConfig c = DefaultRunConfig();
  c.set_model("mlp:784-16-10");
  c.set_dataset("synthetic:train=64,test=16");
  c.set_device("cuda");
  const int local_rank = 2 * gpus + gpus - 1;  // Wraps around to the last GPU.
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("LOCAL_RANK", absl::StrCat(local_rank).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", absl::StrCat(local_rank + 1).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "1", 1);
  absl::StatusOr<Replica> launched = NewReplica(c);
  for (const char* var : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                          "MASTER_PORT"}) {
    unsetenv(var);
  }
  ASSERT_TRUE(launched.ok()) << launched.status();
  EXPECT_EQ(launched->ops->name(), absl::StrCat("cuda:", gpus - 1));
  absl::StatusOr<Replica> plain = NewReplica(c);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->ops->name(), "cuda:0");
  c.set_device(absl::StrCat("cuda:", gpus - 1));
  absl::StatusOr<Replica> explicit_index = NewReplica(c);
  ASSERT_TRUE(explicit_index.ok()) << explicit_index.status();
  EXPECT_EQ(explicit_index->ops->name(), absl::StrCat("cuda:", gpus - 1));
}

}  // namespace
}  // namespace ringside
