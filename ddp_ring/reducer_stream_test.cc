// The reducer's side of the stream contract (process_group.h), checked without a GPU:
// a model on SimulatedDeviceOps (CPU results, device behaviour logged) and a process
// group double that logs what it is asked to do. On a device, a step must issue every
// bucket's all-reduce during backward without waiting for the device, queue each
// bucket's update behind its all-reduce (OrderBefore, then the SGD step), wait for the
// all-reduces on the host only after everything is queued, and synchronise the device
// once; and a failed all-reduce must end the step before anything blocks on the device.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/common.h"
#include "common/simulated_device_ops.h"
#include "common/test_util.h"
#include "ddp_ring/reducer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;

// A world of one that logs "issue B" (B: the collective's number), "order B" and
// "wait B"; collective `fail_at` fails in Wait with Unavailable (a lost peer).
class LoggingGroup final : public ProcessGroup {
 public:
  LoggingGroup(EventLog* log, int fail_at) : log_(log), fail_at_(fail_at) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "logging"; }
  CollectiveBytes total_bytes() const override { return {}; }

  absl::Status OrderAfter(Ops* ops) override {
    producer_ = ops;
    return absl::OkStatus();
  }
  Ops* producer() const { return producer_; }

  std::shared_ptr<Work> AllReduce(float* data, int64_t n, ReduceOp op) override { return Issue(); }
  std::shared_ptr<Work> AllReduceOnWire(float* data, int64_t n, ReduceOp op, WireFormat) override {
    return Issue();
  }
  std::shared_ptr<Work> Broadcast(float* data, int64_t n, int root) override { return Issue(); }
  std::shared_ptr<Work> AllGather(const float* in, int64_t n, float* out) override {
    std::copy(in, in + n, out);
    return Issue();
  }
  std::shared_ptr<Work> ReduceScatter(const float* in, float* out, int64_t n,
                                      ReduceOp op) override {
    std::copy(in, in + n, out);
    return Issue();
  }
  std::shared_ptr<Work> Reduce(float* data, int64_t n, ReduceOp op, int root) override {
    return Issue();
  }
  std::shared_ptr<Work> Scatter(const float* in, float* out, int64_t n, int root) override {
    std::copy(in, in + n, out);
    return Issue();
  }
  std::shared_ptr<Work> Gather(const float* in, int64_t n, float* out, int root) override {
    std::copy(in, in + n, out);
    return Issue();
  }
  std::shared_ptr<Work> AllToAll(const float* in, float* out, int64_t n) override {
    std::copy(in, in + n, out);
    return Issue();
  }
  std::shared_ptr<Work> Barrier() override { return Issue(); }

 private:
  class LoggingWork final : public Work {
   public:
    LoggingWork(EventLog* log, int seq, bool fail) : log_(log), seq_(seq), fail_(fail) {}
    absl::Status Wait() override {
      log_->Add(absl::StrCat("wait ", seq_));
      return fail_ ? absl::UnavailableError("peer rank 1 is gone") : absl::OkStatus();
    }
    bool IsCompleted() override { return true; }
    absl::Status OrderBefore(Ops* ops) override {
      log_->Add(absl::StrCat("order ", seq_));
      return absl::OkStatus();
    }

   private:
    EventLog* const log_;
    const int seq_;
    const bool fail_;
  };

  std::shared_ptr<Work> Issue() {
    const int seq = next_++;
    log_->Add(absl::StrCat("issue ", seq));
    return std::make_shared<LoggingWork>(log_, seq, seq == fail_at_);
  }

  EventLog* const log_;
  const int fail_at_;
  Ops* producer_ = nullptr;
  int next_ = 0;
};

constexpr char kSpec[] = "mlp:24-32-16-5";
constexpr int kDim = 24, kClasses = 5, kBatch = 6, kSteps = 4;
const SgdHyper kHyper{0.1f, 0.9f, 1e-4f, false};

struct Fixture {
  EventLog log;
  std::unique_ptr<SimulatedDeviceOps> ops;
  std::unique_ptr<LoggingGroup> group;
  std::unique_ptr<Model> model;
  std::unique_ptr<Reducer> reducer;
};

// Several buckets: the first holds the last layer only, the others one layer each.
void Build(Fixture* f, int fail_at) {
  f->ops = std::make_unique<SimulatedDeviceOps>(NewCpuOps(1), &f->log);
  f->group = std::make_unique<LoggingGroup>(&f->log, fail_at);
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(kSpec, {kDim, 1, 1}, kClasses, f->ops.get());
  ASSERT_TRUE(model.ok()) << model.status();
  f->model = *std::move(model);
  ASSERT_TRUE(f->model->InitParams(7).ok());
  ReducerOptions options;
  options.first_bucket_bytes = 16 * 5 * 4 + 5 * 4;
  options.bucket_cap_bytes = 4;
  absl::StatusOr<std::unique_ptr<Reducer>> reducer =
      Reducer::Create(f->group.get(), f->model.get(), f->ops.get(), kHyper, options);
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  f->reducer = *std::move(reducer);
  ASSERT_EQ(f->reducer->buckets().size(), 3u);
}

int IndexOf(const std::vector<std::string>& log, const std::string& entry) {
  auto it = std::find(log.begin(), log.end(), entry);
  return it == log.end() ? -1 : static_cast<int>(it - log.begin());
}

TEST(ReducerStreamTest, DeviceStepQueuesUpdatesBehindAllReducesAndSynchronisesOnce) {
  Fixture f;
  Build(&f, /*fail_at=*/-1);
  EXPECT_EQ(f.group->producer(), f.ops.get()) << "the reducer must order the group after its ops";
  const StepHooks hooks = f.reducer->hooks();
  EXPECT_TRUE(hooks.backward.device_ordered);
  ASSERT_TRUE(f.reducer->Start(0).ok());
  // Reference: the same batches, one process, plain SGD (a world of one sums nothing).
  auto ref_ops = NewCpuOps(1);
  auto ref = Model::Create(kSpec, {kDim, 1, 1}, kClasses, ref_ops.get());
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE((*ref)->InitParams(7).ok());
  auto sgd = Sgd::Create(kHyper, (*ref)->num_params(), ref_ops.get());
  ASSERT_TRUE(sgd.ok());

  int seq = 1;  // Collective 0 was Start's broadcast.
  for (int step = 0; step < kSteps; ++step) {
    Rng rng(100 + step);
    std::vector<float> x(kBatch * kDim);
    std::vector<int32_t> y(kBatch);
    for (float& v : x) v = rng.Normal();
    for (int32_t& v : y) v = static_cast<int32_t>(rng.Below(kClasses));
    ASSERT_TRUE(f.model->Forward(x.data(), y.data(), kBatch).ok());
    f.log.Take();
    ASSERT_TRUE(f.model->Backward(1.0f / kBatch, hooks.backward, hooks.accumulate_gradients).ok());
    const std::vector<std::string> backward = f.log.Take();
    // Backward issued the three all-reduces, in bucket order, and never waited.
    EXPECT_EQ(backward, (std::vector<std::string>{absl::StrCat("issue ", seq),
                                                  absl::StrCat("issue ", seq + 1),
                                                  absl::StrCat("issue ", seq + 2)}));
    StepMetrics m;
    ASSERT_TRUE(f.reducer->FinishStep(HookTimes(), &m, nullptr).ok());
    const std::vector<std::string> finish = f.log.Take();
    // FinishStep: mark backward's end, then per bucket "order" before its "sgd", all
    // queued before any host wait; then the waits; then one synchronisation, last.
    ASSERT_FALSE(finish.empty());
    EXPECT_EQ(finish.front(), "event");
    EXPECT_EQ(std::count(finish.begin(), finish.end(), "sgd"), 3);
    EXPECT_EQ(std::count(finish.begin(), finish.end(), "sync"), 1);
    EXPECT_EQ(finish.back(), "sync");
    int last_sgd = -1;
    for (int b = 0; b < 3; ++b) {
      const int order = IndexOf(finish, absl::StrCat("order ", seq + b));
      const int wait = IndexOf(finish, absl::StrCat("wait ", seq + b));
      ASSERT_GE(order, 0) << "bucket " << b;
      ASSERT_GE(wait, 0) << "bucket " << b;
      // The bucket's update is the first "sgd" after its "order".
      const int sgd_at = static_cast<int>(
          std::find(finish.begin() + order, finish.end(), "sgd") - finish.begin());
      EXPECT_GT(sgd_at, last_sgd);
      EXPECT_LT(sgd_at, IndexOf(finish, absl::StrCat("wait ", seq))) << "bucket " << b;
      last_sgd = sgd_at;
    }
    seq += 3;

    ASSERT_TRUE((*ref)->Forward(x.data(), y.data(), kBatch).ok());
    ASSERT_TRUE((*ref)->Backward(1.0f / kBatch, nullptr).ok());
    sgd->Step((*ref)->params(), (*ref)->grads());
  }
  // The updates are the single-process ones, bit for bit.
  const int64_t n = f.model->num_params();
  EXPECT_EQ(std::vector<float>(f.model->params(), f.model->params() + n),
            std::vector<float>((*ref)->params(), (*ref)->params() + n));
}

TEST(ReducerStreamTest, FailedAllReduceEndsTheStepBeforeTheDeviceIsWaitedFor) {
  Fixture f;
  Build(&f, /*fail_at=*/2);  // The second bucket of the first step.
  const StepHooks hooks = f.reducer->hooks();
  ASSERT_TRUE(f.reducer->Start(0).ok());
  std::vector<float> x(kBatch * kDim, 0.5f);
  std::vector<int32_t> y(kBatch, 1);
  ASSERT_TRUE(f.model->Forward(x.data(), y.data(), kBatch).ok());
  ASSERT_TRUE(f.model->Backward(1.0f / kBatch, hooks.backward, hooks.accumulate_gradients).ok());
  f.log.Take();
  StepMetrics m;
  const absl::Status status = f.reducer->FinishStep(HookTimes(), &m, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("all-reduce of bucket 1"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("peer rank 1 is gone"));
  const std::vector<std::string> finish = f.log.Take();
  // Every all-reduce was waited for (their buffers are the gradients), and the device
  // was never synchronised behind the failed one.
  for (int s = 1; s <= 3; ++s) EXPECT_GE(IndexOf(finish, absl::StrCat("wait ", s)), 0) << s;
  EXPECT_EQ(std::count(finish.begin(), finish.end(), "sync"), 0);
}

TEST(ReducerStreamTest, GroupThatCannotReadTheModelsMemoryIsRefused) {
  // Gloo reduces host memory: a model on a device is refused at Create, naming both.
  EventLog log;
  SimulatedDeviceOps ops(NewCpuOps(1), &log);
  class HostOnlyGroup final : public ProcessGroup {
   public:
    int rank() const override { return 0; }
    int world_size() const override { return 1; }
    std::string backend() const override { return "host"; }
    CollectiveBytes total_bytes() const override { return {}; }
    absl::Status OrderAfter(Ops* ops) override {
      return ops->kind() == DeviceKind::kCpu
                 ? absl::OkStatus()
                 : absl::InvalidArgumentError(absl::StrCat("host memory only, not ", ops->name()));
    }
    std::shared_ptr<Work> AllReduce(float*, int64_t, ReduceOp) override { return nullptr; }
    std::shared_ptr<Work> AllReduceOnWire(float*, int64_t, ReduceOp, WireFormat) override { return nullptr; }
    std::shared_ptr<Work> Broadcast(float*, int64_t, int) override { return nullptr; }
    std::shared_ptr<Work> AllGather(const float*, int64_t, float*) override { return nullptr; }
    std::shared_ptr<Work> ReduceScatter(const float*, float*, int64_t, ReduceOp) override {
      return nullptr;
    }
    std::shared_ptr<Work> Reduce(float*, int64_t, ReduceOp, int) override { return nullptr; }
    std::shared_ptr<Work> Scatter(const float*, float*, int64_t, int) override { return nullptr; }
    std::shared_ptr<Work> Gather(const float*, int64_t, float*, int) override { return nullptr; }
    std::shared_ptr<Work> AllToAll(const float*, float*, int64_t) override { return nullptr; }
    std::shared_ptr<Work> Barrier() override { return nullptr; }
  } group;
  auto model = Model::Create(kSpec, {kDim, 1, 1}, kClasses, &ops);
  ASSERT_TRUE(model.ok());
  absl::StatusOr<std::unique_ptr<Reducer>> reducer =
      Reducer::Create(&group, model->get(), &ops, kHyper, ReducerOptions());
  EXPECT_EQ(reducer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(reducer.status().message()), HasSubstr("cuda:0"));
}

}  // namespace
}  // namespace ringside
