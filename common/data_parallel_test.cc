// DataParallel equals single-process training at the same global batch: R replicas
// with batch b against LocalSgdStrategy with batch R x b, parameters and losses after
// a few steps, on a small MLP and the LeNet CNN (synthetic data, momentum on).
#include "common/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "common/replica.h"
#include "common/trainer.h"

namespace ringside {
namespace {

struct Case {
  std::string model;
  std::string dataset;
  int batch;  // Per replica.
  int steps;
};

RunConfig ConfigFor(const Case& k) {
  RunConfig c = DefaultRunConfig();
  c.set_model(k.model);
  c.set_dataset(k.dataset);
  c.set_epochs(1);
  c.set_max_steps(k.steps);
  c.set_lr(0.05f);
  c.set_momentum(0.9f);
  c.set_weight_decay(1e-4f);
  c.set_seed(7);
  return c;
}

struct Outcome {
  std::vector<float> params;
  double last_loss = 0;
  DataParallelPhases phases;
};

Outcome Params(const Replica& r) {
  Outcome o;
  o.params.assign(r.model->params(), r.model->params() + r.model->num_params());
  return o;
}

// Single-process training with batch `global_batch`.
Outcome TrainSingle(const Case& k, int global_batch) {
  RunOptions run;
  run.config = ConfigFor(k);
  run.config.set_batch(global_batch);
  absl::StatusOr<Replica> replica = NewReplica(run.config);
  EXPECT_TRUE(replica.ok()) << replica.status();
  auto strategy = LocalSgdStrategy::Create(replica->hyper, replica->model.get(),
                                           replica->ops.get());
  EXPECT_TRUE(strategy.ok()) << strategy.status();
  TrainerOptions o = TrainerOptionsFor(run, 0, 1);
  o.progress = nullptr;
  auto trainer = Trainer::Create(o, replica->model.get(), replica->ops.get(), &replica->data,
                                 strategy->get());
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  absl::StatusOr<TrainResult> result = (*trainer)->Run();
  EXPECT_TRUE(result.ok()) << result.status();
  Outcome out = Params(*replica);
  out.last_loss = result.ok() ? result->last_loss : 0;
  return out;
}

// DataParallel with `replicas` replicas of batch `batch` each.
Outcome TrainDp(const Case& k, int replicas, int batch, bool lock) {
  RunOptions run;
  run.config = ConfigFor(k);
  run.config.set_strategy("dp");
  run.config.set_world_size(replicas);
  run.config.set_batch(batch);
  run.config.set_dp_interpreter_lock(lock);
  absl::StatusOr<Replica> replica = NewReplica(run.config);
  EXPECT_TRUE(replica.ok()) << replica.status();
  auto dp = DataParallelStrategy::Create(run.config, &*replica);
  EXPECT_TRUE(dp.ok()) << dp.status();
  absl::StatusOr<TrainResult> result = TrainDataParallel(run, &*replica, dp->get());
  EXPECT_TRUE(result.ok()) << result.status();
  Outcome out = Params(*replica);
  out.last_loss = result.ok() ? result->last_loss : 0;
  out.phases = (*dp)->phases();
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return d;
}

void ExpectEquivalent(const Case& k) {
  for (int replicas = 1; replicas <= 4; ++replicas) {
    const Outcome single = TrainSingle(k, k.batch * replicas);
    const Outcome dp = TrainDp(k, replicas, k.batch, /*lock=*/false);
    const double diff = MaxAbsDiff(single.params, dp.params);
    const double loss_diff = std::fabs(single.last_loss - dp.last_loss);
    std::printf("%s, %d replicas x batch %d vs single batch %d: params max |diff| %.3g, "
                "last loss %.6f vs %.6f\n",
                k.model.c_str(), replicas, k.batch, k.batch * replicas, diff, single.last_loss,
                dp.last_loss);
    EXPECT_LE(diff, 1e-5) << replicas << " replicas";
    EXPECT_LE(loss_diff, 1e-5) << replicas << " replicas";
    EXPECT_EQ(dp.phases.steps, k.steps);
  }
}

TEST(DataParallelTest, MlpEqualsSingleAtTheGlobalBatch) {
  ExpectEquivalent({"mlp:64-32-16-4",
                    "synthetic:train=600,test=100,shape=1x8x8,classes=4,seed=3", 8, 5});
}

TEST(DataParallelTest, CnnEqualsSingleAtTheGlobalBatch) {
  ExpectEquivalent({"cnn:lenet",
                    "synthetic:train=200,test=20,shape=1x28x28,classes=4,seed=3", 4, 3});
}

// The last step of an epoch is short: 50 samples in steps of 3 x 8 leave 2, which
// go to replica 0 and 1 only (torch.chunk), the third idle.
TEST(DataParallelTest, ShortLastStepLeavesReplicasIdle) {
  const Case k{"mlp:64-32-4", "synthetic:train=50,test=10,shape=1x8x8,classes=4,seed=3", 8,
               0};
  const Outcome single = TrainSingle(k, 24);
  const Outcome dp = TrainDp(k, 3, 8, /*lock=*/false);
  EXPECT_LE(MaxAbsDiff(single.params, dp.params), 1e-5);
  EXPECT_EQ(dp.phases.steps, 3);  // ceil(50 / 24)
}

TEST(DataParallelTest, InterpreterLockGivesTheSameResultAndCountsWaits) {
  const Case k{"mlp:64-32-16-4", "synthetic:train=600,test=100,shape=1x8x8,classes=4,seed=3",
               8, 4};
  const Outcome plain = TrainDp(k, 3, 8, /*lock=*/false);
  const Outcome locked = TrainDp(k, 3, 8, /*lock=*/true);
  EXPECT_EQ(MaxAbsDiff(plain.params, locked.params), 0);
  EXPECT_EQ(plain.phases.lock_wait_ms, 0);
  EXPECT_GE(locked.phases.lock_wait_ms, 0);
}

TEST(DataParallelTest, RefusesBadConfigurations) {
  absl::StatusOr<Replica> replica = NewReplica(ConfigFor(
      {"mlp:64-4", "synthetic:train=60,test=10,shape=1x8x8,classes=4,seed=3", 8, 1}));
  ASSERT_TRUE(replica.ok()) << replica.status();
  RunConfig c = ConfigFor({"mlp:64-4", "", 8, 1});
  c.set_strategy("dp");
  c.set_world_size(0);
  EXPECT_TRUE(absl::IsInvalidArgument(DataParallelStrategy::Create(c, &*replica).status()));
  c.set_world_size(kMaxDataParallelReplicas + 1);
  EXPECT_TRUE(absl::IsInvalidArgument(DataParallelStrategy::Create(c, &*replica).status()));
  c.set_world_size(2);
  c.set_grad_accum(2);
  EXPECT_TRUE(absl::IsInvalidArgument(DataParallelStrategy::Create(c, &*replica).status()));
  c.set_grad_accum(1);
  c.set_device("cuda");
  EXPECT_TRUE(absl::IsInvalidArgument(DataParallelStrategy::Create(c, &*replica).status()));
}

}  // namespace
}  // namespace ringside
