// Elastic PS (issue 23, --ps_min_workers): a BSP shard that loses a worker goes on with
// the live ones, averaging each step over the workers that pushed; below the minimum
// it aborts naming the lost workers; a lost worker that registers again pulls the
// current parameters and counts again from its rejoin step. Workers are plain calls
// (as in shard_test.cc); every parameter is checked against the closed form.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;

constexpr char kModel[] = "mlp:8-4";
// Shard 0 of 1 over 11 floats in 16-byte chunks: chunks of 3, 4 and 4 floats.
constexpr int64_t kNumParams = 11;
constexpr int64_t kChunkBytes = 16;
constexpr int kWorkers = 3;
constexpr float kLr = 0.5f;
constexpr double kTol = 1e-5;
constexpr absl::Duration kPrompt = absl::Seconds(5);

RunConfig JobConfig(int min_workers) {
  RunConfig c;
  c.set_model(kModel);
  c.set_strategy("ps");
  c.set_world_size(kWorkers);
  c.set_ps_sync("bsp");
  c.set_ps_min_workers(min_workers);
  return c;
}

PsShardOptions Options(int min_workers, absl::Duration timeout = absl::Seconds(30)) {
  PsShardOptions o;
  o.num_workers = kWorkers;
  o.chunk_bytes = kChunkBytes;
  o.hyper.lr = kLr;
  o.config = JobConfig(min_workers);
  o.model = kModel;
  o.timeout = timeout;
  return o;
}

ps::RegisterRequest Registration(int worker, int min_workers) {
  ps::RegisterRequest r;
  r.set_worker_id(worker);
  r.set_num_workers(kWorkers);
  *r.mutable_config() = JobConfig(min_workers);
  r.set_model(kModel);
  r.set_num_params(kNumParams);
  return r;
}

// A shard with every worker registered (sessions in *sessions) and initialised by
// worker 0 with Initial().
std::vector<float> Initial() {
  std::vector<float> p(kNumParams);
  for (int64_t i = 0; i < kNumParams; ++i) p[i] = 0.25f * static_cast<float>(i + 1) - 1.0f;
  return p;
}

std::vector<double> InitialD() {
  const std::vector<float> p = Initial();
  return std::vector<double>(p.begin(), p.end());
}

absl::Status PushSlice(Shard& shard, int worker, int64_t step, ps::TensorKind kind,
                       const std::vector<float>& values, int64_t first_chunk = 0) {
  for (int64_t k = shard.num_chunks() - 1; k >= first_chunk; --k) {
    const Slice c = ChunkOf(kNumParams, shard.chunk_floats(), k);
    ps::Chunk chunk;
    chunk.set_worker_id(worker);
    chunk.set_step(step);
    chunk.set_kind(kind);
    chunk.set_offset(c.offset);
    chunk.set_data(reinterpret_cast<const char*>(values.data() + c.offset), c.size * sizeof(float));
    if (absl::Status s = shard.Accept(&chunk, static_cast<int64_t>(chunk.ByteSizeLong())); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Pull(Shard& shard, int worker, int64_t step) {
  std::vector<float> out(kNumParams);
  for (int64_t k = 0; k < shard.num_chunks(); ++k) {
    ps::Chunk chunk;
    if (absl::Status s = shard.Serve(worker, step, ps::PARAMS, k, &chunk); !s.ok()) return s;
    const Slice c = ChunkOf(kNumParams, shard.chunk_floats(), k);
    std::memcpy(out.data() + c.offset, chunk.data().data(), c.size * sizeof(float));
    shard.CountServed(worker, step, ps::PARAMS, static_cast<int64_t>(chunk.ByteSizeLong()));
  }
  return out;
}

// Worker w's push of step s: its own batch-mean gradient G_w,s divided by N (workers
// scale their loss by 1/N).
std::vector<float> Pushed(int worker, int64_t step) {
  std::vector<float> g(kNumParams);
  for (int64_t i = 0; i < kNumParams; ++i) {
    const float own = 0.125f * static_cast<float>((worker + 1) * ((i % 5) - 2)) +
                      0.0625f * static_cast<float>(step + 1);
    g[i] = own / kWorkers;
  }
  return g;
}

// params - lr * the mean over `workers` of their own gradients G_w,s (N * pushed).
std::vector<double> Sgd(const std::vector<double>& params, const std::vector<int>& workers,
                        int64_t step) {
  std::vector<double> out = params;
  for (int64_t i = 0; i < kNumParams; ++i) {
    double mean = 0;
    for (int w : workers) mean += static_cast<double>(Pushed(w, step)[i]) * kWorkers;
    out[i] -= kLr * mean / static_cast<double>(workers.size());
  }
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], kTol * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

struct Job {
  std::unique_ptr<Shard> shard;
  std::vector<uint64_t> sessions;
};

Job NewJob(const PsShardOptions& options) {
  Job job;
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(options);
  EXPECT_TRUE(shard.ok()) << shard.status();
  if (!shard.ok()) return job;
  job.shard = *std::move(shard);
  for (int w = 0; w < kWorkers; ++w) {
    ps::RegisterResponse r;
    EXPECT_TRUE(job.shard->Register(Registration(w, options.config.ps_min_workers()), &r).ok());
    EXPECT_FALSE(r.rejoin());
    job.sessions.push_back(r.session());
  }
  EXPECT_TRUE(PushSlice(*job.shard, 0, 0, ps::PARAMS, Initial()).ok());
  for (int w = 0; w < kWorkers; ++w) EXPECT_TRUE(Pull(*job.shard, w, 0).ok());
  return job;
}

// The shard records' live_workers, by step, from the metrics file.
std::map<int64_t, int> LiveWorkers(const std::string& path) {
  std::map<int64_t, int> live;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto field = [&line](const std::string& name) -> int64_t {
      const size_t at = line.find("\"" + name + "\":");
      return at == std::string::npos ? -1 : std::stoll(line.substr(at + name.size() + 3));
    };
    live[field("step")] = static_cast<int>(field("live_workers"));
  }
  return live;
}

// Three workers push g0, g1, g2 in each step; worker 2 is lost in step 0 before it
// pushed: the update is (G0 + G1) / 2 (the mean over the live workers that pushed),
// and from then on the shard waits only for workers 0 and 1.
TEST(ElasticShardTest, LostWorkerStepAveragesOverTheLiveWorkers) {
  const std::string metrics_path = absl::StrCat(testing::TempDir(), "/elastic_live.jsonl");
  absl::StatusOr<std::unique_ptr<MetricsWriter>> metrics = MetricsWriter::Open(metrics_path, false);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  PsShardOptions options = Options(/*min_workers=*/2);
  options.metrics = metrics->get();
  Job job = NewJob(options);
  ASSERT_NE(job.shard, nullptr);
  Shard& shard = *job.shard;
  ASSERT_TRUE(PushSlice(shard, 0, 0, ps::GRADIENTS, Pushed(0, 0)).ok());
  ASSERT_TRUE(PushSlice(shard, 1, 0, ps::GRADIENTS, Pushed(1, 0)).ok());
  auto pull = std::async(std::launch::async, [&] { return Pull(shard, 0, 1); });
  EXPECT_EQ(pull.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "step 0 completed without worker 2";
  shard.WorkerLost(2, "its stream broke during step 0");
  ASSERT_EQ(pull.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
  absl::StatusOr<std::vector<float>> p1 = pull.get();
  ASSERT_TRUE(p1.ok()) << p1.status();
  const std::vector<double> want1 = Sgd(InitialD(), {0, 1}, 0);
  ExpectNear(*p1, want1);
  absl::StatusOr<std::vector<float>> p1b = Pull(shard, 1, 1);
  ASSERT_TRUE(p1b.ok()) << p1b.status();
  EXPECT_EQ(*p1b, *p1);
  EXPECT_TRUE(shard.health().ok()) << shard.health();
  EXPECT_EQ(shard.live_workers(), 2);
  // The dropped worker's calls are refused; nothing changed.
  absl::Status refused = shard.CheckSession(2, job.sessions[2]);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("dropped"));
  EXPECT_FALSE(PushSlice(shard, 2, 0, ps::GRADIENTS, Pushed(2, 0)).ok());

  // Step 1: two pushes complete it (nobody waits for worker 2).
  ASSERT_TRUE(PushSlice(shard, 1, 1, ps::GRADIENTS, Pushed(1, 1)).ok());
  ASSERT_TRUE(PushSlice(shard, 0, 1, ps::GRADIENTS, Pushed(0, 1)).ok());
  absl::StatusOr<std::vector<float>> p2 = Pull(shard, 0, 2);
  ASSERT_TRUE(p2.ok()) << p2.status();
  ExpectNear(*p2, Sgd(want1, {0, 1}, 1));
  ASSERT_TRUE(Pull(shard, 1, 2).ok());
  std::map<int64_t, int> live = LiveWorkers(metrics_path);
  EXPECT_EQ(live[0], 2);
  EXPECT_EQ(live[1], 2);
}

// A worker lost after pushing part of its step: the chunks it pushed keep its push
// (mean over 3), the others average over the 2 that pushed.
TEST(ElasticShardTest, PartOfAStepPushedBeforeTheLossStillCounts) {
  Job job = NewJob(Options(2));
  ASSERT_NE(job.shard, nullptr);
  Shard& shard = *job.shard;
  ASSERT_TRUE(PushSlice(shard, 2, 0, ps::GRADIENTS, Pushed(2, 0), /*first_chunk=*/2).ok());
  ASSERT_TRUE(PushSlice(shard, 0, 0, ps::GRADIENTS, Pushed(0, 0)).ok());
  ASSERT_TRUE(PushSlice(shard, 1, 0, ps::GRADIENTS, Pushed(1, 0)).ok());
  shard.WorkerLost(2, "its stream broke during step 0");
  absl::StatusOr<std::vector<float>> p1 = Pull(shard, 0, 1);
  ASSERT_TRUE(p1.ok()) << p1.status();
  const std::vector<double> p0 = InitialD();
  const std::vector<double> two = Sgd(p0, {0, 1}, 0), three = Sgd(p0, {0, 1, 2}, 0);
  const Slice last = ChunkOf(kNumParams, shard.chunk_floats(), 2);
  std::vector<double> want = two;
  for (int64_t i = last.offset; i < last.offset + last.size; ++i) want[i] = three[i];
  ExpectNear(*p1, want);
}

TEST(ElasticShardTest, HungWorkerIsDroppedAfterTheTimeout) {
  constexpr absl::Duration kTimeout = absl::Milliseconds(300);
  Job job = NewJob(Options(2, kTimeout));
  ASSERT_NE(job.shard, nullptr);
  Shard& shard = *job.shard;
  ASSERT_TRUE(PushSlice(shard, 0, 0, ps::GRADIENTS, Pushed(0, 0)).ok());
  ASSERT_TRUE(PushSlice(shard, 1, 0, ps::GRADIENTS, Pushed(1, 0)).ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<float>> p1 = Pull(shard, 0, 1);  // Worker 2 never pushes.
  const absl::Duration waited = absl::Now() - start;
  ASSERT_TRUE(p1.ok()) << p1.status();
  EXPECT_GE(waited, kTimeout * 0.9);
  EXPECT_LT(waited, kTimeout * 2 + absl::Seconds(1));
  ExpectNear(*p1, Sgd(InitialD(), {0, 1}, 0));
  EXPECT_EQ(shard.live_workers(), 2);
  EXPECT_TRUE(shard.health().ok());
}

TEST(ElasticShardTest, FewerThanTheMinimumAbortsNamingTheLostWorkers) {
  {
    Job job = NewJob(Options(3));
    ASSERT_NE(job.shard, nullptr);
    job.shard->WorkerLost(2, "its stream broke during step 0");
    absl::Status s = job.shard->health();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
    EXPECT_THAT(s.message(), HasSubstr("worker 2 lost"));
    EXPECT_THAT(s.message(), HasSubstr("lost worker(s) 2: 2 live worker(s) left, fewer than --ps_min_workers=3"));
  }
  {
    Job job = NewJob(Options(2));
    ASSERT_NE(job.shard, nullptr);
    ASSERT_TRUE(PushSlice(*job.shard, 0, 0, ps::GRADIENTS, Pushed(0, 0)).ok());
    auto pull = std::async(std::launch::async, [&] { return Pull(*job.shard, 0, 1).status(); });
    job.shard->WorkerLost(2, "its stream broke during step 0");
    EXPECT_TRUE(job.shard->health().ok());
    job.shard->WorkerLost(1, "its stream broke during step 0");
    ASSERT_EQ(pull.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
    absl::Status s = pull.get();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_THAT(s.message(), HasSubstr("lost worker(s) 1, 2: 1 live worker(s) left"));
  }
  {
    Job job = NewJob(Options(1));
    ASSERT_NE(job.shard, nullptr);
    job.shard->WorkerLost(0, "its stream broke during step 0");
    EXPECT_THAT(job.shard->health().message(), HasSubstr("cannot go on without it"));
  }
}

// Worker 2 is lost in step 0; started again, it registers (a new session), pulls the
// current parameters and rejoins at step 1: step 1 averages over all three again; its
// barriers line up with the others'.
TEST(ElasticShardTest, RejoinedWorkerPullsTheCurrentParametersAndCountsAgain) {
  const std::string metrics_path = absl::StrCat(testing::TempDir(), "/elastic_rejoin.jsonl");
  absl::StatusOr<std::unique_ptr<MetricsWriter>> metrics = MetricsWriter::Open(metrics_path, false);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  PsShardOptions options = Options(2);
  options.metrics = metrics->get();
  Job job = NewJob(options);
  ASSERT_NE(job.shard, nullptr);
  Shard& shard = *job.shard;
  // A barrier of all three before the loss.
  {
    auto b1 = std::async(std::launch::async, [&] { return shard.Barrier(1, "checkpoint/0", {}); });
    auto b2 = std::async(std::launch::async, [&] { return shard.Barrier(2, "checkpoint/0", {}); });
    ASSERT_TRUE(shard.Barrier(0, "checkpoint/0", {}).ok());
    ASSERT_TRUE(b1.get().ok());
    ASSERT_TRUE(b2.get().ok());
  }
  ps::RegisterResponse refused;
  EXPECT_EQ(shard.Register(Registration(2, 2), &refused).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(PushSlice(shard, 0, 0, ps::GRADIENTS, Pushed(0, 0)).ok());
  ASSERT_TRUE(PushSlice(shard, 1, 0, ps::GRADIENTS, Pushed(1, 0)).ok());
  shard.WorkerLost(2, "its stream broke during step 0");
  absl::StatusOr<std::vector<float>> p1 = Pull(shard, 0, 1);
  ASSERT_TRUE(p1.ok()) << p1.status();
  ASSERT_TRUE(Pull(shard, 1, 1).ok());
  // Workers 0 and 1 pass a barrier at step 1 without worker 2.
  {
    auto b1 = std::async(std::launch::async, [&] { return shard.Barrier(1, "eval/1", {1.0}); });
    absl::StatusOr<std::vector<double>> sums = shard.Barrier(0, "eval/1", {2.0});
    ASSERT_TRUE(sums.ok()) << sums.status();
    EXPECT_EQ(*sums, std::vector<double>{3.0});
    ASSERT_TRUE(b1.get().ok());
  }

  ps::RegisterResponse again;
  ASSERT_TRUE(shard.Register(Registration(2, 2), &again).ok());
  EXPECT_TRUE(again.rejoin());
  EXPECT_EQ(again.step(), 1);
  EXPECT_NE(again.session(), job.sessions[2]);
  EXPECT_EQ(shard.CheckSession(2, job.sessions[2]).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(shard.CheckSession(2, again.session()).ok());
  EXPECT_EQ(shard.live_workers(), 2);  // Not before its first pull.
  // Too early a step: refused, nothing changed.
  EXPECT_EQ(shard.Rejoin(2, 0).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(shard.Rejoin(2, 1).ok());
  EXPECT_EQ(shard.live_workers(), 3);
  absl::StatusOr<std::vector<float>> rejoined = Pull(shard, 2, 1);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  EXPECT_EQ(*rejoined, *p1);  // The current parameters.

  // Step 1 waits for worker 2 again and averages over all three.
  ASSERT_TRUE(PushSlice(shard, 0, 1, ps::GRADIENTS, Pushed(0, 1)).ok());
  ASSERT_TRUE(PushSlice(shard, 1, 1, ps::GRADIENTS, Pushed(1, 1)).ok());
  ps::Chunk chunk;
  absl::StatusOr<bool> ready = shard.ServeIfReady(0, 2, ps::PARAMS, 0, &chunk);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_FALSE(*ready) << "step 1 completed without the rejoined worker";
  ASSERT_TRUE(PushSlice(shard, 2, 1, ps::GRADIENTS, Pushed(2, 1)).ok());
  std::vector<double> want(p1->begin(), p1->end());
  want = Sgd(want, {0, 1, 2}, 1);
  for (int w = 0; w < kWorkers; ++w) {
    absl::StatusOr<std::vector<float>> p2 = Pull(shard, w, 2);
    ASSERT_TRUE(p2.ok()) << p2.status();
    ExpectNear(*p2, want);
  }
  // The next barrier: the rejoined worker's first ("eval/0") is the others' third.
  {
    auto b1 = std::async(std::launch::async, [&] { return shard.Barrier(1, "eval/2", {1.0}); });
    auto b2 = std::async(std::launch::async, [&] { return shard.Barrier(2, "eval/0", {4.0}); });
    absl::StatusOr<std::vector<double>> sums = shard.Barrier(0, "eval/2", {2.0});
    ASSERT_TRUE(sums.ok()) << sums.status();
    EXPECT_EQ(*sums, std::vector<double>{7.0});
    ASSERT_TRUE(b1.get().ok());
    ASSERT_TRUE(b2.get().ok());
  }
  std::map<int64_t, int> live = LiveWorkers(metrics_path);
  EXPECT_EQ(live[0], 2);
  EXPECT_EQ(live[1], 3);
  // Everyone says goodbye: done.
  for (int w = 0; w < kWorkers; ++w) ASSERT_TRUE(shard.Goodbye(w).ok());
  EXPECT_TRUE(shard.WaitUntilDone().ok());
}

// Without --ps_min_workers a lost worker still aborts the job (today's behaviour).
TEST(ElasticShardTest, OffByDefault) {
  Job job = NewJob(Options(0));
  ASSERT_NE(job.shard, nullptr);
  job.shard->WorkerLost(2, "its stream broke during step 0");
  EXPECT_EQ(job.shard->health().code(), absl::StatusCode::kAborted);
  ps::RegisterResponse again;
  EXPECT_EQ(job.shard->Register(Registration(2, 0), &again).code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace ringside
