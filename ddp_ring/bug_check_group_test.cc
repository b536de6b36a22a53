#include "ddp_ring/bug_check_group.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/common.h"
#include "ddp_ring/local_ranks.h"
#include "ddp_ring/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr char kSpec[] = "mlp:4-3-2";

// The strategy the checks wrap: FinishStep returns `finish` (OK by default).
class FakeReducer final : public StepStrategy {
 public:
  std::string role() const override { return "rank"; }
  StepHooks hooks() override { return {}; }
  absl::Status FinishStep(const HookTimes&, StepMetrics*, TraceWriter*) override {
    ++steps;
    return finish;
  }
  absl::StatusOr<std::vector<float>> SaveOptimizerState() override {
    return std::vector<float>();
  }
  absl::Status LoadOptimizerState(absl::Span<const float>) override {
    return absl::OkStatus();
  }

  absl::Status finish;
  int steps = 0;
};

ProcessGroupOptions GroupOptions() {
  ProcessGroupOptions o;
  o.timeout = absl::Seconds(20);
  return o;
}

RunConfig Config(const std::string& bugs, int batch) {
  RunConfig c;
  c.set_bugs(bugs);
  c.set_seed(7);
  c.set_batch(batch);
  c.set_epochs(1);
  return c;
}

// One rank's decorator over `group` with a model initialised from seed + `seed_offset`.
struct Rank {
  std::unique_ptr<Ops> ops = NewCpuOps(1);
  std::unique_ptr<Model> model;
  std::unique_ptr<BugCheckGroup> checks;

  absl::Status Init(ProcessGroup& group, Store* job, const RunConfig* config,
                    int64_t train_size, uint64_t seed) {
    RINGSIDE_ASSIGN_OR_RETURN(model, Model::Create(kSpec, {4, 1, 1}, 2, ops.get()));
    RINGSIDE_RETURN_IF_ERROR(model->InitParams(seed));
    BugCheckGroup::Options o;
    o.config = config;
    o.train_size = train_size;
    o.timeout = absl::Seconds(20);
    RINGSIDE_ASSIGN_OR_RETURN(checks,
                              BugCheckGroup::Create(&group, model.get(), ops.get(), job, o));
    return absl::OkStatus();
  }
};

StepMetrics Step(int64_t step, int epoch) {
  StepMetrics m;
  m.set_step(step);
  m.set_epoch(epoch);
  return m;
}

TEST(BugCheckGroupTest, ForwardsCollectivesToTheWrappedGroup) {
  std::unique_ptr<Store> job = NewInMemoryStore();
  const RunConfig config = Config("rank_seeds", 4);
  ASSERT_TRUE(RunLocalGlooRanks(2, GroupOptions(), [&](ProcessGroup& group) -> absl::Status {
                Rank r;
                RINGSIDE_RETURN_IF_ERROR(r.Init(group, job.get(), &config, 8, 1));
                BugCheckGroup& g = *r.checks;
                EXPECT_EQ(g.rank(), group.rank());
                EXPECT_EQ(g.world_size(), 2);
                EXPECT_EQ(g.backend(), group.backend());
                std::vector<float> data = {1.0f + group.rank(), 10.0f};
                std::shared_ptr<Work> work = g.AllReduce(data.data(), 2, ReduceOp::kSum);
                RINGSIDE_RETURN_IF_ERROR(work->Wait());
                EXPECT_EQ(data, (std::vector<float>{3.0f, 20.0f}));
                // The wrapped group's Work and counter: the bytes are the group's own.
                EXPECT_EQ(g.total_bytes(), group.total_bytes());
                EXPECT_EQ(work->bytes(), group.total_bytes());
                // Without no_broadcast the parameters' broadcast goes through.
                RINGSIDE_RETURN_IF_ERROR(
                    g.Broadcast(r.model->params(), r.model->num_params(), 0)->Wait());
                return g.Barrier()->Wait();
              }).ok());
}

TEST(BugCheckGroupTest, NoBroadcastSkipsOnlyTheParametersBroadcast) {
  std::unique_ptr<Store> job = NewInMemoryStore();
  const RunConfig config = Config("no_broadcast", 4);
  ASSERT_TRUE(RunLocalGlooRanks(2, GroupOptions(), [&](ProcessGroup& group) -> absl::Status {
                Rank r;
                RINGSIDE_RETURN_IF_ERROR(r.Init(group, job.get(), &config, 8, 1 + group.rank()));
                const std::vector<float> before(r.model->params(),
                                                r.model->params() + r.model->num_params());
                const CollectiveBytes moved = group.total_bytes();
                std::shared_ptr<Work> skipped =
                    r.checks->Broadcast(r.model->params(), r.model->num_params(), 0);
                EXPECT_TRUE(skipped->IsCompleted());
                RINGSIDE_RETURN_IF_ERROR(skipped->Wait());
                EXPECT_EQ(std::vector<float>(r.model->params(),
                                             r.model->params() + r.model->num_params()),
                          before);
                EXPECT_EQ(group.total_bytes(), moved);  // Nothing communicated.
                // Any other buffer is broadcast.
                std::vector<float> other = {5.0f + group.rank()};
                RINGSIDE_RETURN_IF_ERROR(r.checks->Broadcast(other.data(), 1, 0)->Wait());
                EXPECT_EQ(other[0], 5.0f);
                return absl::OkStatus();
              }).ok());
}

// Two ranks as threads, each with its decorator over its group and the strategy
// AroundSteps makes of a FakeReducer: body(group, rank, reducer, steps). Rank r's model
// starts from seed 1 + r with `seed_by_rank`, else from 1. Returns the first failing
// rank's error; what the ranks printed to stderr goes to *err.
absl::Status RunCheckedRanks(
    const RunConfig& config, int64_t train_size, bool seed_by_rank, Store* job,
    const std::function<absl::Status(ProcessGroup&, Rank&, FakeReducer&, StepStrategy&)>& body,
    std::string* err) {
  ::testing::internal::CaptureStderr();
  const absl::Status status =
      RunLocalGlooRanks(2, GroupOptions(), [&](ProcessGroup& group) -> absl::Status {
        Rank r;
        RINGSIDE_RETURN_IF_ERROR(
            r.Init(group, job, &config, train_size, 1 + (seed_by_rank ? group.rank() : 0)));
        FakeReducer reducer;
        std::unique_ptr<StepStrategy> steps = r.checks->AroundSteps(&reducer);
        return body(group, r, reducer, *steps);
      });
  *err = ::testing::internal::GetCapturedStderr();
  return status;
}

// Step `step` of `epoch` through `steps`.
absl::Status FinishStep(StepStrategy& steps, int64_t step, int epoch) {
  StepMetrics m = Step(step, epoch);
  return steps.FinishStep(HookTimes(), &m, nullptr);
}

TEST(BugCheckGroupTest, RankZeroReportsTheFirstDivergedStepOnce) {
  std::unique_ptr<Store> job = NewInMemoryStore();
  std::string err;
  const absl::Status status = RunCheckedRanks(
      Config("no_broadcast", 4), 8, /*seed_by_rank=*/true, job.get(),
      [](ProcessGroup&, Rank&, FakeReducer& reducer, StepStrategy& steps) -> absl::Status {
        for (int64_t s = 3; s < 6; ++s) RINGSIDE_RETURN_IF_ERROR(FinishStep(steps, s, 0));
        EXPECT_EQ(reducer.steps, 3);
        return absl::OkStatus();
      },
      &err);
  ASSERT_TRUE(status.ok()) << status;
  const std::string line =
      "step 3: replicas diverged: rank 1's parameters differ from rank 0's (fingerprints "
      "sum|p| ";
  ASSERT_NE(err.find(line), std::string::npos) << err;
  EXPECT_EQ(err.find(line, err.find(line) + 1), std::string::npos) << err;  // Once.
  EXPECT_NE(err.find("; the initial broadcast was skipped (bug no_broadcast)\n"),
            std::string::npos)
      << err;
}

TEST(BugCheckGroupTest, EqualReplicasPrintNothing) {
  std::unique_ptr<Store> job = NewInMemoryStore();
  std::string err;
  const absl::Status status = RunCheckedRanks(
      Config("rank_seeds", 4), 100, /*seed_by_rank=*/false, job.get(),
      [](ProcessGroup&, Rank&, FakeReducer&, StepStrategy& steps) {
        return FinishStep(steps, 0, 0);
      },
      &err);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(err, "");
}

// 9 samples over 2 ranks, padded: 5 each, one sample seen twice; batch 5: one step.
TEST(BugCheckGroupTest, RankZeroSummarisesTheEpochsVisits) {
  std::unique_ptr<Store> job = NewInMemoryStore();
  std::string err;
  const absl::Status status = RunCheckedRanks(
      Config("no_set_epoch", 5), 9, /*seed_by_rank=*/false, job.get(),
      [](ProcessGroup&, Rank&, FakeReducer&, StepStrategy& steps) -> absl::Status {
        RINGSIDE_RETURN_IF_ERROR(FinishStep(steps, 0, 0));
        EvalResult local;
        local.correct = 3;
        local.count = 4;
        RINGSIDE_ASSIGN_OR_RETURN(EvalResult total, steps.ReduceEval(local));
        EXPECT_EQ(total.count, 4);  // The wrapped strategy's (here: the identity).
        // Reported once per epoch.
        return steps.ReduceEval(local).status();
      },
      &err);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(err,
            "epoch 1/1: 2 ranks visited all 9 samples; 1 of them twice or more (padding "
            "evens out the shards)\n");
}

// 9 samples over 2 ranks without padding: 5 and 4; batch 2: 3 steps and 2.
TEST(BugCheckGroupTest, UnevenShardsNameTheRankThatRanOutOfData) {
  std::unique_ptr<Store> job = NewInMemoryStore();
  absl::Status rank0_step;
  std::string err;
  const absl::Status status = RunCheckedRanks(
      Config("uneven_shards", 2), 9, /*seed_by_rank=*/false, job.get(),
      [&](ProcessGroup& group, Rank&, FakeReducer& reducer, StepStrategy& steps) -> absl::Status {
        for (int64_t s = 0; s < 2; ++s) RINGSIDE_RETURN_IF_ERROR(FinishStep(steps, s, 0));
        if (group.rank() == 0) {
          // Rank 1, out of data, went on to the epoch's end (ReduceEval below: it says so
          // in the store and waits there). Rank 0's third step: its all-reduce fails.
          while (!job->Get("bugs/epoch_end/0/1", absl::ZeroDuration()).ok()) {
            absl::SleepFor(absl::Milliseconds(1));
          }
          reducer.finish = absl::DeadlineExceededError("all-reduce of bucket 0 timed out");
          rank0_step = FinishStep(steps, 2, 0);
        }
        return steps.ReduceEval(EvalResult()).status();
      },
      &err);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(err,
            "bug uneven_shards: 9 training samples over 2 ranks without padding: steps per "
            "epoch by rank: 3, 2\n");
  EXPECT_TRUE(absl::IsDeadlineExceeded(rank0_step)) << rank0_step;
  // The wait as measured (tenths of a second), then the timeout that ended it.
  EXPECT_THAT(std::string(rank0_step.message()),
              testing::MatchesRegex("all-reduce waited 0\\.[0-9] s \\(its timeout: [0-9.]+m?s, then naming the lost rank\\) "
                                    "for rank 1, which ran out of data after step 1 \\(uneven "
                                    "shards without padding: bug uneven_shards\\)"));
}

TEST(BugCheckGroupTest, UnevenShardsKeepAnErrorNoRankExplains) {
  std::unique_ptr<Store> job = NewInMemoryStore();
  std::string err;
  const absl::Status status = RunCheckedRanks(
      Config("uneven_shards", 2), 9, /*seed_by_rank=*/false, job.get(),
      [](ProcessGroup&, Rank&, FakeReducer& reducer, StepStrategy& steps) {
        reducer.finish = absl::UnavailableError("peer lost");
        EXPECT_EQ(FinishStep(steps, 0, 0), absl::UnavailableError("peer lost"));
        return absl::OkStatus();
      },
      &err);
  ASSERT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace ringside
