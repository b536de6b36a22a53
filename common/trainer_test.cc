#include "common/trainer.h"

#include <array>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <iterator>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/checkpoint.h"
#include "common/cpu_ops.h"
#include "common/trace.pb.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

RunConfig SmallConfig() {
  RunConfig c;
  c.set_strategy("single");
  c.set_model("mlp:64-16-4");
  c.set_dataset("synthetic:train=600,test=100,shape=1x8x8,classes=4,seed=3");
  c.set_epochs(4);
  c.set_batch(32);  // 19 batches per epoch, the last one partial (24 samples).
  c.set_lr(0.05f);
  c.set_momentum(0.9f);
  c.set_weight_decay(1e-4f);
  c.set_seed(9);
  c.set_world_size(1);
  return c;
}

// Trains `max_steps` steps (resuming from out_dir if `resume`) and returns the
// checkpoint left in out_dir.
Checkpoint Train(const std::string& out_dir, int64_t max_steps, bool resume,
                 TrainResult* result = nullptr) {
  RunConfig c = SmallConfig();
  c.set_max_steps(max_steps);
  auto data = LoadDataset(c.dataset());
  EXPECT_TRUE(data.ok()) << data.status();
  auto ops = NewCpuOps(1);
  auto model = Model::Create(c.model(), {1, 8, 8}, 4, ops.get());
  EXPECT_TRUE(model.ok()) << model.status();
  auto strategy = LocalSgdStrategy::Create({c.lr(), c.momentum(), c.weight_decay(), false},
                                           model->get(), ops.get());
  EXPECT_TRUE(strategy.ok());
  TrainerOptions o;
  o.config = c;
  o.out_dir = out_dir;
  o.resume = resume;
  o.progress = nullptr;
  auto trainer = Trainer::Create(o, model->get(), ops.get(), &*data, strategy->get());
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  auto r = (*trainer)->Run();
  EXPECT_TRUE(r.ok()) << r.status();
  if (result != nullptr) *result = *r;
  auto ckpt = ReadCheckpoint(out_dir + "/" + kCheckpointFile);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  return *ckpt;
}

int CountLines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// Train k steps, save, resume, train k more == train 2k straight, bit for bit. k = 25
// stops inside the second epoch, so the resumed run must also restore the position in
// the shuffled order.
TEST(TrainerTest, ResumeIsBitIdenticalToTrainingStraight) {
  const std::string split = TempDir("split"), straight = TempDir("straight");
  const Checkpoint first = Train(split, 25, false);
  EXPECT_EQ(first.header.step(), 25);
  EXPECT_EQ(first.header.epoch(), 1);
  EXPECT_EQ(first.header.batch_in_epoch(), 6);
  TrainResult resumed_result;
  const Checkpoint resumed = Train(split, 50, true, &resumed_result);
  EXPECT_EQ(resumed_result.steps_this_run, 25);
  const Checkpoint direct = Train(straight, 50, false);
  ASSERT_EQ(resumed.params.size(), direct.params.size());
  EXPECT_EQ(resumed.header.step(), 50);
  EXPECT_EQ(0, memcmp(resumed.params.data(), direct.params.data(),
                      direct.params.size() * sizeof(float)));
  EXPECT_EQ(0, memcmp(resumed.optimizer_state.data(), direct.optimizer_state.data(),
                      direct.optimizer_state.size() * sizeof(float)));
  // The resumed run appended its records to the first run's.
  EXPECT_EQ(CountLines(split + "/" + OutputFileName(OutputFile::kMetrics, OutputOwner::kSingle, 0)), 50);
  EXPECT_EQ(CountLines(straight + "/" + OutputFileName(OutputFile::kMetrics, OutputOwner::kSingle, 0)), 50);
}

// The newest checkpoint damaged: the resume falls back to the one kept before it (the
// first epoch's end, step 19), repeats the steps from there, ends bit for bit where
// the straight run does, and its metrics hold every step once.
TEST(TrainerTest, ResumeFallsBackPastADamagedCheckpoint) {
  const std::string split = TempDir("fallback"), straight = TempDir("fallback-straight");
  Train(split, 25, false);
  const std::string newest = split + "/" + kCheckpointFile;
  ASSERT_TRUE(ReadCheckpoint(split + "/checkpoint.19.bin").ok());  // Kept (default 2).
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);  // Inside the header.
    f.put('\x7f');
  }
  ASSERT_EQ(ReadCheckpoint(newest).status().code(), absl::StatusCode::kDataLoss);
  TrainResult resumed_result;
  const Checkpoint resumed = Train(split, 50, true, &resumed_result);
  EXPECT_EQ(resumed_result.steps_this_run, 50 - 19);
  const Checkpoint direct = Train(straight, 50, false);
  ASSERT_EQ(resumed.params.size(), direct.params.size());
  EXPECT_EQ(0, memcmp(resumed.params.data(), direct.params.data(),
                      direct.params.size() * sizeof(float)));
  std::ifstream in(split + "/" + OutputFileName(OutputFile::kMetrics, OutputOwner::kSingle, 0));
  std::vector<int64_t> steps;
  for (std::string line; std::getline(in, line);) {
    StepMetrics m;
    ASSERT_TRUE(FromJsonLine(line, &m).ok()) << line;
    steps.push_back(m.step());
  }
  std::vector<int64_t> expected(50);
  for (int i = 0; i < 50; ++i) expected[i] = i;
  EXPECT_EQ(steps, expected);
}

// Gradient accumulation over 4 micro-batches of 8 steps like one batch of 32 over the
// same samples (up to float summation order).
// Trains `c` with the single-process strategy, writing to `dir`; the final parameters.
std::vector<float> TrainParams(const RunConfig& c, const std::string& dir) {
  auto data = LoadDataset(c.dataset());
  EXPECT_TRUE(data.ok()) << data.status();
  auto ops = NewCpuOps(1);
  auto model = Model::Create(c.model(), {1, 8, 8}, 4, ops.get());
  EXPECT_TRUE(model.ok()) << model.status();
  auto strategy = LocalSgdStrategy::Create({c.lr(), c.momentum(), c.weight_decay(), false},
                                           model->get(), ops.get());
  TrainerOptions o;
  o.config = c;
  o.out_dir = dir;
  o.progress = nullptr;
  auto trainer = Trainer::Create(o, model->get(), ops.get(), &*data, strategy->get());
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  auto r = (*trainer)->Run();
  EXPECT_TRUE(r.ok()) << r.status();
  return std::vector<float>((*model)->params(), (*model)->params() + (*model)->num_params());
}

TEST(TrainerTest, GradientAccumulationMatchesTheBigBatch) {
  auto run = [](int batch, int accum, const std::string& dir) {
    RunConfig c = SmallConfig();
    c.set_batch(batch);
    c.set_grad_accum(accum);
    c.set_max_steps(12);
    return TrainParams(c, dir);
  };
  const std::vector<float> big = run(32, 1, TempDir("big"));
  const std::vector<float> accumulated = run(8, 4, TempDir("accum"));
  ASSERT_EQ(big.size(), accumulated.size());
  float max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < big.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(big[i]));
    max_diff = std::max(max_diff, std::fabs(big[i] - accumulated[i]));
  }
  EXPECT_LT(max_diff / max_abs, 1e-5) << max_diff << " / " << max_abs;
  EXPECT_GT(max_abs, 0);
}

int CountOccurrences(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Gathering the next batch during the step's tail changes nothing: micro-batches of
// 16 (2 per step), 45 steps across two epoch boundaries (19 steps an epoch), the
// parameters and momentum bit for bit the same as without it. Every step but the last
// of each epoch and the run's last prefetches: 45 - 3 spans.
TEST(TrainerTest, PrefetchingTheNextBatchIsBitIdentical) {
  auto run = [](bool prefetch, const std::string& dir) {
    RunConfig c = SmallConfig();
    c.set_batch(16);
    c.set_grad_accum(2);
    c.set_max_steps(45);
    c.set_prefetch(prefetch);
    TrainParams(c, dir);
    auto ckpt = ReadCheckpoint(dir + "/" + kCheckpointFile);
    EXPECT_TRUE(ckpt.ok()) << ckpt.status();
    EXPECT_EQ(ckpt->header.step(), 45);
    return *ckpt;
  };
  const std::string on = TempDir("prefetch-on"), off = TempDir("prefetch-off");
  const Checkpoint with = run(true, on);
  const Checkpoint without = run(false, off);
  ASSERT_EQ(with.params.size(), without.params.size());
  EXPECT_EQ(0, memcmp(with.params.data(), without.params.data(),
                      with.params.size() * sizeof(float)));
  ASSERT_EQ(with.optimizer_state.size(), without.optimizer_state.size());
  EXPECT_EQ(0, memcmp(with.optimizer_state.data(), without.optimizer_state.data(),
                      with.optimizer_state.size() * sizeof(float)));
  EXPECT_EQ(CountOccurrences(on + "/" + OutputFileName(OutputFile::kTrace, OutputOwner::kSingle, 0), "data (next step)"), 42);
  EXPECT_EQ(CountOccurrences(off + "/" + OutputFileName(OutputFile::kTrace, OutputOwner::kSingle, 0), "data (next step)"), 0);
}

// The local strategy, but every forward piece first waits 1 ms "for its parameters"
// (as a PS worker's forward waits for the master's update).
class WaitingStrategy final : public StepStrategy {
 public:
  explicit WaitingStrategy(std::unique_ptr<LocalSgdStrategy> inner) : inner_(std::move(inner)) {}
  std::string role() const override { return "single"; }
  StepHooks hooks() override {
    StepHooks h = inner_->hooks();
    h.forward.params_needed = [](const ParamRange&) {
      absl::SleepFor(absl::Milliseconds(1));
      return absl::OkStatus();
    };
    return h;
  }
  absl::Status FinishStep(const HookTimes& hook_times, StepMetrics* m,
                          TraceWriter* trace) override {
    return inner_->FinishStep(hook_times, m, trace);
  }
  absl::StatusOr<std::vector<float>> SaveOptimizerState() override {
    return inner_->SaveOptimizerState();
  }
  absl::Status LoadOptimizerState(absl::Span<const float> state) override {
    return inner_->LoadOptimizerState(state);
  }

 private:
  std::unique_ptr<LocalSgdStrategy> inner_;
};

std::vector<trace::TraceEvent> ReadTrace(const std::string& path) {
  absl::StatusOr<trace::TraceEventBatch> batch = ReadTraceFile(path);
  EXPECT_TRUE(batch.ok()) << batch.status();
  if (!batch.ok()) return {};
  return std::vector<trace::TraceEvent>(batch->events().begin(), batch->events().end());
}

// Waits are spans of their own, never inside forward: a step's "forward" spans add up
// to its forward_ms, its "wait for parameters" spans hold the waits (at least 1 ms per
// parameter range asked for: two layers), and the spans of the training thread's track
// are disjoint or nested.
TEST(TrainerTest, TraceCutsForwardAroundWaits) {
  RunConfig c = SmallConfig();
  c.set_max_steps(6);
  auto data = LoadDataset(c.dataset());
  ASSERT_TRUE(data.ok()) << data.status();
  auto ops = NewCpuOps(1);
  auto model = Model::Create(c.model(), {1, 8, 8}, 4, ops.get());
  ASSERT_TRUE(model.ok());
  auto local = LocalSgdStrategy::Create({c.lr(), c.momentum(), c.weight_decay(), false},
                                        model->get(), ops.get());
  ASSERT_TRUE(local.ok());
  WaitingStrategy strategy(std::move(*local));
  TrainerOptions o;
  o.config = c;
  o.out_dir = TempDir("waits");
  o.progress = nullptr;
  auto trainer = Trainer::Create(o, model->get(), ops.get(), &*data, &strategy);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Run().ok());

  std::map<int64_t, double> forward_us, wait_us;
  std::vector<TraceInterval> spans;
  for (const trace::TraceEvent& e : ReadTrace(
           o.out_dir + "/" + OutputFileName(OutputFile::kTrace, OutputOwner::kSingle, 0))) {
    if (e.ph() != "X") continue;
    EXPECT_EQ(e.tid(), kTrainingTrack);
    const int64_t step = static_cast<int64_t>(e.args().fields().at("step").number_value());
    if (e.name() == "forward") forward_us[step] += e.dur();
    if (e.name() == "wait for parameters") {
      EXPECT_EQ(e.cat(), kCatWait);
      wait_us[step] += e.dur();
    }
    spans.push_back({static_cast<int64_t>(e.ts()), static_cast<int64_t>(e.ts() + e.dur())});
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    for (size_t j = i + 1; j < spans.size(); ++j) {
      EXPECT_TRUE(NestOrDisjoint(spans[i], spans[j])) << i << " and " << j;
    }
  }
  std::ifstream in(o.out_dir + "/" + OutputFileName(OutputFile::kMetrics, OutputOwner::kSingle, 0));
  int records = 0;
  for (std::string line; std::getline(in, line); ++records) {
    StepMetrics m;
    ASSERT_TRUE(FromJsonLine(line, &m).ok());
    EXPECT_NEAR(forward_us[m.step()] / 1e3, m.forward_ms(), 0.002) << "step " << m.step();
    EXPECT_GE(wait_us[m.step()], 2000) << "step " << m.step();
  }
  EXPECT_EQ(records, 6);
}

TEST(TrainerTest, LearnsTheSyntheticTask) {
  TrainResult r;
  Train(TempDir("learn"), 0, false, &r);
  EXPECT_EQ(r.steps, 4 * 19);
  EXPECT_GT(r.test_accuracy, 0.6);  // Chance is 0.25.
}

TEST(TrainerTest, ResumeRejectsAnotherModelAndCorruptCheckpoints) {
  const std::string dir = TempDir("reject");
  Train(dir, 5, false);
  RunConfig c = SmallConfig();
  auto data = LoadDataset(c.dataset());
  ASSERT_TRUE(data.ok());
  auto ops = NewCpuOps(1);
  auto other = Model::Create("mlp:64-8-4", {1, 8, 8}, 4, ops.get());
  ASSERT_TRUE(other.ok());
  auto strategy = LocalSgdStrategy::Create({0.1f, 0.9f, 0, false}, other->get(), ops.get());
  TrainerOptions o;
  o.config = c;
  o.out_dir = dir;
  o.resume = true;
  o.progress = nullptr;
  auto t = Trainer::Create(o, other->get(), ops.get(), &*data, strategy->get());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition) << t.status();

  // Flip one byte of the parameters: the checksum catches it.
  const std::string path = dir + "/" + kCheckpointFile;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-40, std::ios::end);
  f.put('\x7f');
  f.close();
  auto model = Model::Create(c.model(), {1, 8, 8}, 4, ops.get());
  auto s2 = LocalSgdStrategy::Create({0.1f, 0.9f, 0, false}, model->get(), ops.get());
  t = Trainer::Create(o, model->get(), ops.get(), &*data, s2->get());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();

  // No checkpoint yet: --resume starts from step 0 with the seed's parameters.
  o.out_dir = TempDir("empty-dir");
  t = Trainer::Create(o, model->get(), ops.get(), &*data, s2->get());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->step(), 0);
  auto fresh = Model::Create(c.model(), {1, 8, 8}, 4, ops.get());
  ASSERT_TRUE(fresh.ok() && (*fresh)->InitParams(c.seed()).ok());
  EXPECT_EQ(std::vector<float>((*model)->params(), (*model)->params() + (*model)->num_params()),
            std::vector<float>((*fresh)->params(), (*fresh)->params() + (*fresh)->num_params()));
}

// The sums DDP's all-reduce and the parameter server's eval barrier add up: one order,
// and counts that come back whole from a float sum that carried them inexactly.
TEST(EvalResultSumsTest, RoundTripAndSumOfTwoWorkers) {
  EvalResult a;
  a.loss_sum = 12.5;
  a.correct = 41;
  a.count = 50;
  a.train_loss_sum = 101.25;
  a.train_count = 400;
  EvalResult b = a;
  b.correct = 7;
  b.count = 51;
  const std::array<double, kEvalResultSums> sa = EvalResultSums(a), sb = EvalResultSums(b);
  EXPECT_EQ(sa[0], 12.5);
  EXPECT_EQ(sa[1], 41);
  EXPECT_EQ(sa[2], 50);
  EXPECT_EQ(sa[3], 101.25);
  EXPECT_EQ(sa[4], 400);
  std::vector<double> sum(kEvalResultSums);
  for (int i = 0; i < kEvalResultSums; ++i) sum[i] = sa[i] + sb[i];
  sum[1] -= 1e-3;  // A float reduction's error on a count.
  sum[2] += 1e-3;
  const EvalResult total = EvalResultFromSums(sum);
  EXPECT_EQ(total.loss_sum, 25);
  EXPECT_EQ(total.correct, 48);
  EXPECT_EQ(total.count, 101);
  EXPECT_EQ(total.train_loss_sum, 202.5);
  EXPECT_EQ(total.train_count, 800);
}

}  // namespace
}  // namespace ringside
