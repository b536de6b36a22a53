// Tests of the parameter-server shard's state machine without sockets: workers are
// threads (or plain calls) that build ps::Chunk messages the way the service does, and
// every parameter they get back is checked against the closed-form SGD answer.
#include "ps_server/shard.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "gmock/gmock.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "ps_server/wire_chunk.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;

constexpr char kModel[] = "mlp:8-4";
// The configuration the shard and its workers run.
RunConfig JobConfig() {
  RunConfig c;
  c.set_model(kModel);
  c.set_lr(0.02f);
  return c;
}
// The shard under test is shard 1 of 2 over 21 floats: slice [10, 21), 11 floats, cut
// by 16-byte chunks into chunks of 3, 4 and 4 floats (the grid is aligned on the
// slice's end, so chunk 0 is the short one).
constexpr int64_t kNumParams = 21;
constexpr int kNumShards = 2;
constexpr int kShard = 1;
constexpr int64_t kSliceOffset = 10;
constexpr int64_t kSliceSize = 11;
constexpr int64_t kChunkBytes = 16;
constexpr int64_t kChunkFloats = 4;
constexpr int64_t kNumChunks = 3;
// Short timeout for the fault tests; the prompt bound for "returns at once".
constexpr absl::Duration kShortTimeout = absl::Milliseconds(200);
constexpr absl::Duration kPrompt = absl::Seconds(5);
constexpr double kTol = 1e-5;

PsShardOptions Options(int num_workers, SyncPolicy sync, SgdHyper hyper) {
  PsShardOptions o;
  o.shard = kShard;
  o.num_shards = kNumShards;
  o.num_workers = num_workers;
  o.sync = sync;
  o.chunk_bytes = kChunkBytes;
  o.hyper = hyper;
  o.config = JobConfig();
  o.model = kModel;
  o.timeout = absl::Seconds(5);
  return o;
}

SyncPolicy Bsp() { return SyncPolicy{SyncMode::kBsp, 0}; }
SyncPolicy Asp() { return SyncPolicy{SyncMode::kAsp, 0}; }
SyncPolicy Ssp(int k) { return SyncPolicy{SyncMode::kSsp, k}; }

SgdHyper Hyper(float lr, float momentum = 0, float weight_decay = 0) {
  SgdHyper h;
  h.lr = lr;
  h.momentum = momentum;
  h.weight_decay = weight_decay;
  return h;
}

ps::RegisterRequest Registration(int worker, int num_workers, int64_t num_params = kNumParams) {
  ps::RegisterRequest r;
  r.set_worker_id(worker);
  r.set_num_workers(num_workers);
  *r.mutable_config() = JobConfig();
  r.set_model(kModel);
  r.set_num_params(num_params);
  return r;
}

// Creates the shard and registers all of its workers.
std::unique_ptr<Shard> NewShard(const PsShardOptions& options,
                                int64_t num_params = kNumParams) {
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(options);
  EXPECT_TRUE(shard.ok()) << shard.status();
  if (!shard.ok()) return nullptr;
  for (int w = 0; w < options.num_workers; ++w) {
    ps::RegisterResponse response;
    absl::Status s = (*shard)->Register(Registration(w, options.num_workers, num_params), &response);
    EXPECT_TRUE(s.ok()) << s;
  }
  return *std::move(shard);
}

ps::Chunk MakeChunk(int worker, int64_t step, ps::TensorKind kind, int64_t offset,
                    const float* data, int64_t n) {
  ps::Chunk c;
  c.set_worker_id(worker);
  c.set_step(step);
  c.set_kind(kind);
  c.set_offset(offset);
  c.set_data(reinterpret_cast<const char*>(data), n * sizeof(float));
  return c;
}

// Accepts chunk k of `slice_values` (the whole slice) from `worker`, as the service
// does: the wire size is the serialised chunk's. Adds it to *wire_bytes if given.
absl::Status PushChunk(Shard& shard, int worker, int64_t step, ps::TensorKind kind, int64_t k,
                       const std::vector<float>& slice_values, int64_t* wire_bytes = nullptr) {
  const Slice c = ChunkOf(static_cast<int64_t>(slice_values.size()), shard.chunk_floats(), k);
  ps::Chunk chunk = MakeChunk(worker, step, kind, c.offset, slice_values.data() + c.offset, c.size);
  const int64_t wire = static_cast<int64_t>(chunk.ByteSizeLong());
  absl::Status s = shard.Accept(&chunk, wire);
  if (s.ok() && wire_bytes != nullptr) *wire_bytes += wire;
  return s;
}

// Accepts every chunk of the slice, last chunk first (as ShardClient::PushPull sends).
absl::Status PushSlice(Shard& shard, int worker, int64_t step, ps::TensorKind kind,
                       const std::vector<float>& slice_values, int64_t* wire_bytes = nullptr) {
  const int64_t n = NumChunks(static_cast<int64_t>(slice_values.size()), shard.chunk_floats());
  for (int64_t k = n - 1; k >= 0; --k) {
    absl::Status s = PushChunk(shard, worker, step, kind, k, slice_values, wire_bytes);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Serves (blocking) every chunk of `kind` for `worker` about to run `step` and
// assembles the slice. With `served_bytes` each chunk is also counted as sent, as the
// service does after writing it.
absl::StatusOr<std::vector<float>> ServeSlice(Shard& shard, int worker, int64_t step,
                                              ps::TensorKind kind = ps::PARAMS,
                                              int64_t* served_bytes = nullptr) {
  const Slice slice = shard.slice();
  std::vector<float> out(slice.size, -12345.0f);
  for (int64_t k = 0; k < shard.num_chunks(); ++k) {
    ps::Chunk chunk;
    absl::Status s = shard.Serve(worker, step, kind, k, &chunk);
    if (!s.ok()) return s;
    const Slice c = ChunkOf(slice.size, shard.chunk_floats(), k);
    EXPECT_EQ(chunk.worker_id(), worker);
    EXPECT_EQ(chunk.step(), step);
    EXPECT_EQ(chunk.kind(), kind);
    EXPECT_EQ(chunk.offset(), c.offset);
    EXPECT_EQ(chunk.data().size(), c.size * sizeof(float));
    std::memcpy(out.data() + c.offset, chunk.data().data(),
                std::min<size_t>(chunk.data().size(), c.size * sizeof(float)));
    if (served_bytes != nullptr) {
      const int64_t wire = static_cast<int64_t>(chunk.ByteSizeLong());
      shard.CountServed(worker, step, kind, wire);
      *served_bytes += wire;
    }
  }
  return out;
}

// Whether chunk k of PARAMS for `worker` at `step` can be served now.
bool Ready(Shard& shard, int worker, int64_t step, int64_t k) {
  ps::Chunk chunk;
  absl::StatusOr<bool> ready = shard.ServeIfReady(worker, step, ps::PARAMS, k, &chunk);
  EXPECT_TRUE(ready.ok()) << ready.status();
  return ready.ok() && *ready;
}

// Whether a pull of chunk k of PARAMS for `worker` at `step` is refused at once (a step
// the worker cannot be about to run).
bool Refused(Shard& shard, int worker, int64_t step, int64_t k) {
  ps::Chunk chunk;
  absl::StatusOr<bool> ready = shard.ServeIfReady(worker, step, ps::PARAMS, k, &chunk);
  return ready.status().code() == absl::StatusCode::kFailedPrecondition;
}

// Deterministic, distinct test values: the initial parameters, and worker w's
// gradient of step s (already scaled by 1/N as workers do; any values work).
std::vector<float> InitialParams(int64_t size) {
  std::vector<float> p(size);
  for (int64_t i = 0; i < size; ++i) p[i] = 0.25f * static_cast<float>(i + 1) - 1.0f;
  return p;
}

std::vector<float> Gradient(int64_t size, int worker, int64_t step) {
  std::vector<float> g(size);
  for (int64_t i = 0; i < size; ++i) {
    g[i] = 0.125f * static_cast<float>((worker + 1) * ((i % 5) - 2)) +
           0.0625f * static_cast<float>(step + 1);
  }
  return g;
}

// The closed form of one torch.optim.SGD step (dampening 0) in double precision.
// `carried` is the optimizer state ringside keeps: momentum * PyTorch's momentum_buffer.
void SgdStep(const SgdHyper& h, const std::vector<double>& grad, std::vector<double>* params,
             std::vector<double>* carried) {
  for (size_t i = 0; i < params->size(); ++i) {
    const double d = grad[i] + h.weight_decay * (*params)[i];
    if (h.momentum != 0) {
      const double v = (*carried)[i] + d;
      (*carried)[i] = h.momentum * v;
      (*params)[i] -= h.lr * v;
    } else {
      (*params)[i] -= h.lr * d;
    }
  }
}

std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Sum over workers of their step-s gradients, times `scale`.
std::vector<double> SumOfGradients(int64_t size, const std::vector<int>& workers, int64_t step,
                                   double scale = 1.0) {
  std::vector<double> sum(size, 0.0);
  for (int w : workers) {
    const std::vector<float> g = Gradient(size, w, step);
    for (int64_t i = 0; i < size; ++i) sum[i] += scale * g[i];
  }
  return sum;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                double tol = kTol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

// Worker 0 initialises the slice with InitialParams at `step`.
void Initialise(Shard& shard, int64_t step = 0) {
  ASSERT_TRUE(PushSlice(shard, 0, step, ps::PARAMS, InitialParams(shard.slice().size)).ok());
}

// ---------------------------------------------------------------------------------
// Creation and registration.

TEST(ShardCreateTest, RejectsBadOptions) {
  PsShardOptions o = Options(2, Bsp(), Hyper(0.1f));
  o.num_workers = 0;
  EXPECT_EQ(Shard::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(2, Bsp(), Hyper(0.1f));
  o.shard = 2;
  EXPECT_EQ(Shard::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(2, Bsp(), Hyper(0.1f));
  o.chunk_bytes = 6;
  EXPECT_EQ(Shard::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(2, Bsp(), Hyper(-0.1f));
  EXPECT_EQ(Shard::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(2, Bsp(), Hyper(0.1f, /*momentum=*/1.0f));
  EXPECT_EQ(Shard::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Shard::Create(Options(2, Bsp(), Hyper(0.1f))).ok());
}

TEST(ShardRegisterTest, ReportsLayoutAndInitialisation) {
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(Options(3, Ssp(3), Hyper(0.1f)));
  ASSERT_TRUE(shard.ok()) << shard.status();
  ps::RegisterResponse r;
  ASSERT_TRUE((*shard)->Register(Registration(1, 3), &r).ok());
  EXPECT_EQ(r.shard(), kShard);
  EXPECT_EQ(r.num_shards(), kNumShards);
  EXPECT_EQ(r.offset(), kSliceOffset);
  EXPECT_EQ(r.size(), kSliceSize);
  EXPECT_EQ(r.chunk_floats(), kChunkFloats);
  EXPECT_EQ(r.sync(), "ssp");
  EXPECT_EQ(r.staleness(), 3);
  EXPECT_FALSE(r.initialized());
  EXPECT_EQ((*shard)->num_chunks(), kNumChunks);
  EXPECT_EQ((*shard)->slice().offset, kSliceOffset);
  EXPECT_EQ((*shard)->slice().size, kSliceSize);

  const uint64_t session1 = r.session();
  EXPECT_NE(session1, 0u);
  ASSERT_TRUE((*shard)->Register(Registration(0, 3), &r).ok());
  EXPECT_FALSE(r.initialized());
  EXPECT_NE(r.session(), session1);  // Drawn per registration.
  Initialise(**shard, /*step=*/7);
  // A worker that registers after the start learns where training stands.
  ASSERT_TRUE((*shard)->Register(Registration(2, 3), &r).ok());
  EXPECT_TRUE(r.initialized());
  EXPECT_EQ(r.step(), 7);
  // Sessions: only the holder's passes.
  EXPECT_TRUE((*shard)->CheckSession(1, session1).ok());
  EXPECT_EQ((*shard)->CheckSession(1, session1 + 1).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*shard)->CheckSession(1, 0).code(), absl::StatusCode::kPermissionDenied);
}

// A second registration of a registered id is refused; the first holder keeps its id,
// its session and its place in training.
TEST(ShardRegisterTest, RefusesDuplicateWorkerIdsLeavingTheFirstHolderAlone) {
  absl::StatusOr<std::unique_ptr<Shard>> created = Shard::Create(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_TRUE(created.ok()) << created.status();
  Shard& shard = **created;
  ps::RegisterResponse first, r0, dup;
  ASSERT_TRUE(shard.Register(Registration(0, 2), &r0).ok());
  ASSERT_TRUE(shard.Register(Registration(1, 2), &first).ok());
  Initialise(shard);
  const absl::Status s = shard.Register(Registration(1, 2), &dup);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(), "worker id 1 is registered already");
  EXPECT_EQ(dup.session(), 0u);  // Nothing was handed out.
  EXPECT_TRUE(shard.CheckSession(1, first.session()).ok());
  // The first holder trains on: a full step.
  ASSERT_TRUE(PushSlice(shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  ASSERT_TRUE(PushSlice(shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(Hyper(0.5f), SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  absl::StatusOr<std::vector<float>> got = ServeSlice(shard, 1, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
  EXPECT_TRUE(shard.health().ok());
}

TEST(ShardRegisterTest, RejectsMismatchedWorkersAndStaysUsable) {
  absl::StatusOr<std::unique_ptr<Shard>> created = Shard::Create(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_TRUE(created.ok()) << created.status();
  Shard& shard = **created;
  ps::RegisterResponse r;

  ps::RegisterRequest bad = Registration(2, 2);
  EXPECT_EQ(shard.Register(bad, &r).code(), absl::StatusCode::kInvalidArgument);
  bad = Registration(-1, 2);
  EXPECT_EQ(shard.Register(bad, &r).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shard.Register(bad, &r).message(), "unknown worker id -1");
  // Every mismatch gets the same reply, which tells the caller nothing of the shard's
  // configuration (the shard's operator reads the differences on its stderr).
  bad = Registration(0, 3);
  absl::Status s = shard.Register(bad, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "configuration mismatch");
  bad = Registration(0, 2);
  bad.mutable_config()->set_lr(0.5f);
  s = shard.Register(bad, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "configuration mismatch");
  bad = Registration(0, 2);
  bad.set_model("mlp:9-9");
  s = shard.Register(bad, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "configuration mismatch");
  EXPECT_EQ(r.session(), 0u);
  // Fewer parameters than shards cannot be sharded.
  bad = Registration(0, 2, /*num_params=*/1);
  EXPECT_EQ(shard.Register(bad, &r).code(), absl::StatusCode::kInvalidArgument);

  // None of that fixed the layout: the first valid registration does.
  ASSERT_TRUE(shard.Register(Registration(0, 2), &r).ok());
  EXPECT_EQ(r.size(), kSliceSize);
  // A second worker with a different model size is refused.
  bad = Registration(1, 2, kNumParams + 1);
  EXPECT_EQ(shard.Register(bad, &r).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard.Register(bad, &r).message(), "configuration mismatch");
  // Unregistered worker 1 may not push yet.
  Initialise(shard);
  EXPECT_EQ(PushSlice(shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard.CheckWorker(1).code(), absl::StatusCode::kFailedPrecondition);

  // After all of it, a full step works.
  ASSERT_TRUE(shard.Register(Registration(1, 2), &r).ok());
  EXPECT_TRUE(shard.CheckWorker(1).ok());
  ASSERT_TRUE(PushSlice(shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  ASSERT_TRUE(PushSlice(shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(Hyper(0.5f), SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  absl::StatusOr<std::vector<float>> got = ServeSlice(shard, 1, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
  EXPECT_TRUE(shard.health().ok());
}

// ---------------------------------------------------------------------------------
// BSP.

TEST(ShardBspTest, SumsTheWorkersGradientsChunkByChunk) {
  const SgdHyper hyper = Hyper(0.5f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  const std::vector<float> p0 = InitialParams(kSliceSize);
  const std::vector<float> g0 = Gradient(kSliceSize, 0, 0);
  const std::vector<float> g1 = Gradient(kSliceSize, 1, 0);

  // Both workers start from worker 0's parameters.
  for (int w = 0; w < 2; ++w) {
    absl::StatusOr<std::vector<float>> start = ServeSlice(*shard, w, 0);
    ASSERT_TRUE(start.ok()) << start.status();
    EXPECT_EQ(*start, p0);
  }

  // Worker 0 pushes everything; nothing of step 1 is ready for it, and worker 1, who
  // has not pushed step 0, may not ask for step 1 at all.
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, g0).ok());
  for (int64_t k = 0; k < kNumChunks; ++k) {
    EXPECT_FALSE(Ready(*shard, 0, 1, k)) << "chunk " << k;
    EXPECT_TRUE(Refused(*shard, 1, 1, k)) << "chunk " << k;
  }
  // Worker 1 pushes chunk 1 only: exactly that chunk is updated (pipelining).
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 1, g1).ok());
  EXPECT_FALSE(Ready(*shard, 0, 1, 0));
  EXPECT_TRUE(Ready(*shard, 0, 1, 1));
  EXPECT_FALSE(Ready(*shard, 0, 1, 2));
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 0, g1).ok());
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 2, g1).ok());

  // p1 = p0 - lr * (g0 + g1): the workers' gradients are summed, not averaged again.
  std::vector<double> want = ToDouble(p0);
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  for (int w = 0; w < 2; ++w) {
    for (int64_t k = 0; k < kNumChunks; ++k) EXPECT_TRUE(Ready(*shard, w, 1, k));
    absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, w, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(*got, want);
  }
  // The step-0 parameters are gone.
  ps::Chunk chunk;
  EXPECT_EQ(shard->ServeIfReady(0, 0, ps::PARAMS, 0, &chunk).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ShardBspTest, MomentumAndWeightDecayOverTwoSteps) {
  const SgdHyper hyper = Hyper(0.1f, /*momentum=*/0.9f, /*weight_decay=*/0.01f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  std::vector<double> buf(kSliceSize, 0.0);
  for (int64_t step = 0; step < 2; ++step) {
    // Worker 1 first this time: the order of arrival does not matter.
    ASSERT_TRUE(PushSlice(*shard, 1, step, ps::GRADIENTS, Gradient(kSliceSize, 1, step)).ok());
    ASSERT_TRUE(PushSlice(*shard, 0, step, ps::GRADIENTS, Gradient(kSliceSize, 0, step)).ok());
    SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, step), &want, &buf);
    for (int w = 0; w < 2; ++w) {
      absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, w, step + 1);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectNear(*got, want);
    }
    // The carried momentum is the optimizer state a checkpoint pulls.
    absl::StatusOr<std::vector<float>> state =
        ServeSlice(*shard, 0, step + 1, ps::OPTIMIZER_STATE);
    ASSERT_TRUE(state.ok()) << state.status();
    ExpectNear(*state, buf);
  }
}

TEST(ShardBspTest, ResumesFromPushedParamsAndOptimizerState) {
  const SgdHyper hyper = Hyper(0.1f, /*momentum=*/0.5f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  constexpr int64_t kResume = 5;
  std::vector<float> m0(kSliceSize);
  for (int64_t i = 0; i < kSliceSize; ++i) m0[i] = 0.5f - 0.125f * static_cast<float>(i);
  ASSERT_TRUE(PushSlice(*shard, 0, kResume, ps::OPTIMIZER_STATE, m0).ok());
  Initialise(*shard, kResume);

  absl::StatusOr<std::vector<float>> start = ServeSlice(*shard, 1, kResume);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(*start, InitialParams(kSliceSize));
  // Steps before the resume point are not the shard's.
  EXPECT_EQ(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).code(),
            absl::StatusCode::kFailedPrecondition);

  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(PushSlice(*shard, w, kResume, ps::GRADIENTS, Gradient(kSliceSize, w, kResume)).ok());
  }
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  std::vector<double> buf = ToDouble(m0);
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, kResume), &want, &buf);
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, kResume + 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
  absl::StatusOr<std::vector<float>> state = ServeSlice(*shard, 0, kResume + 1, ps::OPTIMIZER_STATE);
  ASSERT_TRUE(state.ok()) << state.status();
  ExpectNear(*state, buf);
}

// Threads as workers, over worker counts x slice sizes x chunk sizes: every worker
// pushes, then blocks in Serve for the next step's parameters, for three steps of SGD
// with momentum. Every worker must see the closed-form parameters of every step.
class ShardBspThreadsTest
    : public ::testing::TestWithParam<std::tuple<int, int64_t, int64_t>> {};

TEST_P(ShardBspThreadsTest, EveryWorkerSeesTheClosedFormAfterEveryStep) {
  const auto [num_workers, num_params, chunk_bytes] = GetParam();
  const SgdHyper hyper = Hyper(0.05f, /*momentum=*/0.9f);
  PsShardOptions options = Options(num_workers, Bsp(), hyper);
  options.shard = 0;
  options.num_shards = 1;
  options.chunk_bytes = chunk_bytes;
  std::unique_ptr<Shard> shard = NewShard(options, num_params);
  ASSERT_NE(shard, nullptr);
  ASSERT_EQ(shard->slice().size, num_params);
  ASSERT_EQ(shard->num_chunks(), NumChunks(num_params, chunk_bytes / 4));
  Initialise(*shard);

  constexpr int64_t kSteps = 3;
  std::vector<int> everyone;
  for (int w = 0; w < num_workers; ++w) everyone.push_back(w);
  std::vector<std::vector<double>> want(kSteps + 1);
  want[0] = ToDouble(InitialParams(num_params));
  std::vector<double> buf(num_params, 0.0);
  for (int64_t s = 0; s < kSteps; ++s) {
    want[s + 1] = want[s];
    SgdStep(hyper, SumOfGradients(num_params, everyone, s), &want[s + 1], &buf);
  }

  std::vector<std::vector<std::vector<float>>> got(num_workers);
  std::vector<absl::Status> status(num_workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < num_workers; ++w) {
    threads.emplace_back([&, w] {
      for (int64_t s = 0; s < kSteps; ++s) {
        absl::Status st = PushSlice(*shard, w, s, ps::GRADIENTS, Gradient(num_params, w, s));
        if (!st.ok()) {
          status[w] = st;
          return;
        }
        absl::StatusOr<std::vector<float>> params = ServeSlice(*shard, w, s + 1);
        if (!params.ok()) {
          status[w] = params.status();
          return;
        }
        got[w].push_back(*std::move(params));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < num_workers; ++w) {
    SCOPED_TRACE(absl::StrCat("worker ", w));
    ASSERT_TRUE(status[w].ok()) << status[w];
    ASSERT_EQ(got[w].size(), kSteps);
    for (int64_t s = 0; s < kSteps; ++s) {
      SCOPED_TRACE(absl::StrCat("step ", s + 1));
      ExpectNear(got[w][s], want[s + 1]);
    }
  }
  EXPECT_TRUE(shard->health().ok());
}

INSTANTIATE_TEST_SUITE_P(
    WorkersSizesChunks, ShardBspThreadsTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       ::testing::Values(int64_t{1}, int64_t{5}, int64_t{11}),
                       ::testing::Values(int64_t{4}, int64_t{16})),
    [](const ::testing::TestParamInfo<std::tuple<int, int64_t, int64_t>>& info) {
      return absl::StrCat(std::get<0>(info.param), "workers_", std::get<1>(info.param),
                          "floats_", std::get<2>(info.param), "bytechunks");
    });

// ---------------------------------------------------------------------------------
// ASP and SSP.

TEST(ShardAspTest, AppliesEachPushAtOnceScaledByTheWorkerCount) {
  const SgdHyper hyper = Hyper(0.25f);
  constexpr int kWorkers = 2;
  std::unique_ptr<Shard> shard = NewShard(Options(kWorkers, Asp(), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));

  // Worker 0 pushes step 0: applied at once as p -= lr * N * g0, and worker 0 may go on
  // without worker 1.
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  SgdStep(hyper, SumOfGradients(kSliceSize, {0}, 0, kWorkers), &want, nullptr);
  for (int64_t k = 0; k < kNumChunks; ++k) EXPECT_TRUE(Ready(*shard, 0, 1, k));
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);

  // Worker 0 runs two more steps ahead of worker 1.
  for (int64_t s = 1; s < 3; ++s) {
    ASSERT_TRUE(PushSlice(*shard, 0, s, ps::GRADIENTS, Gradient(kSliceSize, 0, s)).ok());
    SgdStep(hyper, SumOfGradients(kSliceSize, {0}, s, kWorkers), &want, nullptr);
  }
  got = ServeSlice(*shard, 0, 3);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);

  // Worker 1's stale step-0 gradient lands on whatever the parameters are now.
  ASSERT_TRUE(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  SgdStep(hyper, SumOfGradients(kSliceSize, {1}, 0, kWorkers), &want, nullptr);
  got = ServeSlice(*shard, 1, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);

  // A push of a step that is not the worker's current one is refused, and changes
  // nothing.
  EXPECT_EQ(PushSlice(*shard, 1, 5, ps::GRADIENTS, Gradient(kSliceSize, 1, 5)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).code(),
            absl::StatusCode::kFailedPrecondition);
  got = ServeSlice(*shard, 1, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
}

TEST(ShardSspTest, ServesOnlyWithinTheStalenessBound) {
  const SgdHyper hyper = Hyper(0.25f);
  constexpr int kWorkers = 2;
  std::unique_ptr<Shard> shard = NewShard(Options(kWorkers, Ssp(1), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));

  // Worker 0 pushes step 0 (applied at once, scaled by N) and may start step 1: the
  // slowest worker has pushed 0 >= 1 - 1 steps.
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  SgdStep(hyper, SumOfGradients(kSliceSize, {0}, 0, kWorkers), &want, nullptr);
  for (int64_t k = 0; k < kNumChunks; ++k) EXPECT_TRUE(Ready(*shard, 0, 1, k));
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);

  // After its step 1, worker 0 would start step 2 while worker 1 pushed 0 < 2 - 1.
  ASSERT_TRUE(PushSlice(*shard, 0, 1, ps::GRADIENTS, Gradient(kSliceSize, 0, 1)).ok());
  SgdStep(hyper, SumOfGradients(kSliceSize, {0}, 1, kWorkers), &want, nullptr);
  for (int64_t k = 0; k < kNumChunks; ++k) EXPECT_FALSE(Ready(*shard, 0, 2, k));

  // A blocked Serve is released by the slow worker's push. A partial push (two of
  // three chunks) does not count as a pushed step.
  std::future<absl::StatusOr<std::vector<float>>> waiting =
      std::async(std::launch::async, [&] { return ServeSlice(*shard, 0, 2); });
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 2, Gradient(kSliceSize, 1, 0)).ok());
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 1, Gradient(kSliceSize, 1, 0)).ok());
  EXPECT_FALSE(Ready(*shard, 0, 2, 0));
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 0, Gradient(kSliceSize, 1, 0)).ok());
  SgdStep(hyper, SumOfGradients(kSliceSize, {1}, 0, kWorkers), &want, nullptr);
  ASSERT_EQ(waiting.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
  got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
  for (int64_t k = 0; k < kNumChunks; ++k) EXPECT_TRUE(Ready(*shard, 0, 2, k));
  // Step 3 is not worker 0's to ask for before it pushed step 2.
  EXPECT_TRUE(Refused(*shard, 0, 3, 0));
  // The slow worker itself is never held back.
  EXPECT_TRUE(Ready(*shard, 1, 1, 0));
}

TEST(ShardSspTest, ZeroStalenessWaitsForEveryWorkersPush) {
  const SgdHyper hyper = Hyper(0.5f);
  constexpr int kWorkers = 3;
  std::unique_ptr<Shard> shard = NewShard(Options(kWorkers, Ssp(0), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  for (int w = 0; w < kWorkers; ++w) {
    // The start (step 0) is always served.
    EXPECT_TRUE(Ready(*shard, w, 0, 0));
  }
  for (int w = 0; w < kWorkers; ++w) {
    if (w > 0) EXPECT_FALSE(Ready(*shard, 0, 1, 0)) << "after " << w << " pushes";
    ASSERT_TRUE(PushSlice(*shard, w, 0, ps::GRADIENTS, Gradient(kSliceSize, w, 0)).ok());
    SgdStep(hyper, SumOfGradients(kSliceSize, {w}, 0, kWorkers), &want, nullptr);
  }
  for (int w = 0; w < kWorkers; ++w) {
    absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, w, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(*got, want);
  }
}

// ---------------------------------------------------------------------------------
// Rejected input: the right code, no side effect, and the shard goes on working.

TEST(ShardErrorsTest, RejectedChunksLeaveTheShardWorking) {
  const SgdHyper hyper = Hyper(0.5f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  const std::vector<float> g0 = Gradient(kSliceSize, 0, 0);
  const std::vector<float> g1 = Gradient(kSliceSize, 1, 0);
  const std::vector<float> junk(2 * kChunkFloats, 1000.0f);
  // Chunk 1, a full one; chunk 0 (offset 0) is the short one.
  const int64_t full = ChunkOf(kSliceSize, kChunkFloats, 1).offset;
  ASSERT_EQ(ChunkOf(kSliceSize, kChunkFloats, 0).size, kChunkFloats - 1);

  auto accept = [&](ps::Chunk chunk) {
    const absl::StatusOr<int64_t> checked = shard->CheckChunk(chunk, -1);
    absl::Status s = shard->Accept(&chunk, static_cast<int64_t>(chunk.ByteSizeLong()));
    // CheckChunk and Accept agree on malformed chunks.
    if (!checked.ok()) {
      EXPECT_EQ(checked.status().code(), s.code()) << s;
    }
    return s.code();
  };
  using absl::StatusCode;
  // Unknown workers.
  EXPECT_EQ(accept(MakeChunk(2, 0, ps::GRADIENTS, full, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(-1, 0, ps::GRADIENTS, full, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  // Payload not the chunk's exact length: short, long (bigger than a chunk), empty, and
  // a full-size payload on the short chunk.
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, full, junk.data(), kChunkFloats - 1)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, full, junk.data(), 2 * kChunkFloats)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, full, junk.data(), 0)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, 0, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  {
    ps::Chunk odd = MakeChunk(0, 0, ps::GRADIENTS, full, junk.data(), kChunkFloats);
    odd.mutable_data()->push_back('x');  // Not even whole floats.
    EXPECT_EQ(accept(odd), StatusCode::kInvalidArgument);
  }
  // Offsets off the grid (2; 4 is where a start-aligned grid would have chunk 1) or
  // outside the slice.
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, 2, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, 4, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, kSliceSize, junk.data(), kChunkFloats)),
            StatusCode::kOutOfRange);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, 100, junk.data(), kChunkFloats)),
            StatusCode::kOutOfRange);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, -4, junk.data(), kChunkFloats)),
            StatusCode::kOutOfRange);
  // Negative step, unknown kind.
  EXPECT_EQ(accept(MakeChunk(0, -1, ps::GRADIENTS, full, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accept(MakeChunk(0, 0, static_cast<ps::TensorKind>(7), full, junk.data(), kChunkFloats)),
            StatusCode::kInvalidArgument);
  // A chunk of worker 1 in worker 0's stream.
  EXPECT_EQ(shard->CheckChunk(MakeChunk(1, 0, ps::GRADIENTS, full, g1.data() + full, kChunkFloats), 0)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  // Only worker 0 sets parameters or optimizer state.
  EXPECT_EQ(accept(MakeChunk(1, 0, ps::PARAMS, full, junk.data(), kChunkFloats)),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(accept(MakeChunk(1, 0, ps::OPTIMIZER_STATE, full, junk.data(), kChunkFloats)),
            StatusCode::kPermissionDenied);
  // Chunks that do not exist.
  {
    ps::Chunk out;
    EXPECT_EQ(shard->ServeIfReady(0, 0, ps::PARAMS, kNumChunks, &out).status().code(),
              StatusCode::kOutOfRange);
    EXPECT_EQ(shard->ServeIfReady(0, 0, ps::PARAMS, -1, &out).status().code(),
              StatusCode::kOutOfRange);
  }
  // A step ahead of the shard.
  EXPECT_EQ(accept(MakeChunk(0, 1, ps::GRADIENTS, full, junk.data(), kChunkFloats)),
            StatusCode::kFailedPrecondition);
  // The same chunk twice: the second is refused, not added again.
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 0, g0).ok());
  EXPECT_EQ(PushChunk(*shard, 0, 0, ps::GRADIENTS, 0, g0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(accept(MakeChunk(0, 0, ps::GRADIENTS, 0, junk.data(), kChunkFloats - 1)),
            StatusCode::kFailedPrecondition);
  EXPECT_FALSE(Ready(*shard, 0, 1, 0));
  EXPECT_TRUE(shard->health().ok());

  // The valid step completes with exactly the valid gradients.
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 1, g0).ok());
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 2, g0).ok());
  ASSERT_TRUE(PushSlice(*shard, 1, 0, ps::GRADIENTS, g1).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  for (int w = 0; w < 2; ++w) {
    absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, w, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(*got, want);
  }

  // Once training started: a repeated push of a finished step and a late
  // initialisation are refused; step 1 still completes.
  EXPECT_EQ(PushChunk(*shard, 1, 0, ps::GRADIENTS, 0, g1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(PushChunk(*shard, 0, 0, ps::PARAMS, 0, std::vector<float>(kSliceSize, 1000.0f)).code(),
            StatusCode::kFailedPrecondition);
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(PushSlice(*shard, w, 1, ps::GRADIENTS, Gradient(kSliceSize, w, 1)).ok());
  }
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, 1), &want, nullptr);
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 1, 2);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
  EXPECT_TRUE(shard->health().ok());
}

TEST(ShardErrorsTest, GradientsBeforeInitialisationAreRefused) {
  const SgdHyper hyper = Hyper(0.5f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  const std::vector<float> g0 = Gradient(kSliceSize, 0, 0);
  absl::Status s = PushSlice(*shard, 0, 0, ps::GRADIENTS, g0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("initialised"));
  // Nothing is served before initialisation.
  EXPECT_FALSE(Ready(*shard, 1, 0, 0));
  // A partial initialisation is not one either.
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::PARAMS, 0, InitialParams(kSliceSize)).ok());
  EXPECT_FALSE(Ready(*shard, 1, 0, 0));
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::PARAMS, 1, InitialParams(kSliceSize)).ok());
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::PARAMS, 2, InitialParams(kSliceSize)).ok());
  EXPECT_TRUE(Ready(*shard, 1, 0, 0));

  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(PushSlice(*shard, w, 0, ps::GRADIENTS, Gradient(kSliceSize, w, 0)).ok());
  }
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
}

// A PARAMS chunk sent again does not count as another chunk of the initialisation.
TEST(ShardErrorsTest, RepeatedInitialisationChunkDoesNotCompleteIt) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::PARAMS, 0, InitialParams(kSliceSize)).ok());
  }
  EXPECT_FALSE(Ready(*shard, 1, 0, 2));
}

// A worker may not start pushing step t + 1 before its push of step t is complete.
TEST(ShardErrorsTest, PushOfTheNextStepBeforeFinishingThisOneIsRefused) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  const std::vector<float> g0 = Gradient(kSliceSize, 0, 0);
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 0, g0).ok());
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 1, g0).ok());
  ASSERT_TRUE(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  absl::Status s = PushChunk(*shard, 0, 1, ps::GRADIENTS, 0, Gradient(kSliceSize, 0, 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  // Finishing step 0 still works and gives the closed form.
  ASSERT_TRUE(PushChunk(*shard, 0, 0, ps::GRADIENTS, 2, g0).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(Hyper(0.5f), SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectNear(*got, want);
}

// ---------------------------------------------------------------------------------
// The zero-copy entry points the service's PushPull uses.

// The bytes a WireChunk puts on the wire.
std::string WireBytes(const WireChunk& c) {
  grpc::ByteBuffer buffer;
  EXPECT_TRUE(c.Serialize(&buffer).ok());
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  EXPECT_EQ(c.wire_bytes(), static_cast<int64_t>(bytes.size()));
  return bytes;
}

// Those bytes parsed back as ps.proto's Chunk.
ps::Chunk OnTheWire(const WireChunk& c) {
  const std::string bytes = WireBytes(c);
  ps::Chunk chunk;
  EXPECT_TRUE(chunk.ParseFromString(bytes));
  return chunk;
}

ChunkHeader Header(int worker, int64_t step, ps::TensorKind kind, int64_t offset) {
  ChunkHeader h;
  h.worker_id = worker;
  h.step = step;
  h.kind = kind;
  h.offset = offset;
  return h;
}

// Accepts chunk k of `values` through Accept(ChunkHeader, payload), as PushPull does.
absl::Status PushChunkRaw(Shard& shard, int worker, int64_t step, ps::TensorKind kind, int64_t k,
                          std::vector<float> values) {
  const Slice c = ChunkOf(static_cast<int64_t>(values.size()), shard.chunk_floats(), k);
  const ChunkHeader h = Header(worker, step, kind, c.offset);
  absl::StatusOr<int64_t> checked = shard.CheckChunk(h, c.size * sizeof(float), worker);
  if (!checked.ok()) return checked.status();
  EXPECT_EQ(*checked, k);
  return shard.Accept(h, values.data() + c.offset, 10);
}

TEST(ShardWireTest, HeaderChecksMatchTheMessageChecks) {
  absl::StatusOr<std::unique_ptr<Shard>> created = Shard::Create(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_TRUE(created.ok());
  std::vector<float> data(kChunkFloats, 1.0f);
  // Nothing is taken before the layout is known.
  EXPECT_FALSE((*created)->Accept(Header(0, 0, ps::PARAMS, 0), data.data(), 10).ok());
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  using absl::StatusCode;
  auto check = [&](const ChunkHeader& h, size_t bytes, int expected = -1) {
    return shard->CheckChunk(h, bytes, expected).status().code();
  };
  // The grid: [0, 3), [3, 7), [7, 11).
  EXPECT_EQ(check(Header(0, 0, ps::PARAMS, 3), 16), StatusCode::kOk);
  EXPECT_EQ(check(Header(0, 0, ps::PARAMS, 7), 16), StatusCode::kOk);
  EXPECT_EQ(check(Header(0, 0, ps::PARAMS, 0), 12), StatusCode::kOk);
  EXPECT_EQ(check(Header(0, 0, ps::PARAMS, 0), 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(check(Header(0, 0, ps::PARAMS, 3), 15), StatusCode::kInvalidArgument);
  EXPECT_EQ(check(Header(0, 0, ps::PARAMS, 2), 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(check(Header(0, 0, ps::PARAMS, 4), 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(check(Header(0, 0, ps::PARAMS, kSliceSize), 16), StatusCode::kOutOfRange);
  EXPECT_EQ(check(Header(0, 0, ps::PARAMS, -4), 16), StatusCode::kOutOfRange);
  EXPECT_EQ(check(Header(0, -2, ps::PARAMS, 3), 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(check(Header(3, 0, ps::PARAMS, 3), 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(check(Header(1, 0, ps::PARAMS, 3), 16, 0), StatusCode::kInvalidArgument);
  // Accept re-checks the header on its own.
  EXPECT_EQ(shard->Accept(Header(0, 0, ps::PARAMS, kSliceSize), data.data(), 10).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(shard->Accept(Header(0, 0, ps::PARAMS, -4), data.data(), 10).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(shard->Accept(Header(0, 0, ps::PARAMS, 1), data.data(), 10).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(shard->Accept(Header(1, 0, ps::PARAMS, 0), data.data(), 10).code(),
            StatusCode::kPermissionDenied);
}

TEST(ShardWireTest, ZeroCopyStepMatchesTheClosedForm) {
  const SgdHyper hyper = Hyper(0.5f, /*momentum=*/0.5f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), hyper));
  ASSERT_NE(shard, nullptr);
  for (int64_t k = 0; k < kNumChunks; ++k) {
    ASSERT_TRUE(PushChunkRaw(*shard, 0, 0, ps::PARAMS, k, InitialParams(kSliceSize)).ok());
  }
  for (int w = 0; w < 2; ++w) {
    for (int64_t k = kNumChunks - 1; k >= 0; --k) {
      ASSERT_TRUE(PushChunkRaw(*shard, w, 0, ps::GRADIENTS, k, Gradient(kSliceSize, w, 0)).ok());
    }
  }
  // Pushed twice through the raw path: refused as well.
  EXPECT_EQ(PushChunkRaw(*shard, 1, 0, ps::GRADIENTS, 0, Gradient(kSliceSize, 1, 0)).code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  std::vector<double> buf(kSliceSize, 0.0);
  SgdStep(hyper, SumOfGradients(kSliceSize, {0, 1}, 0), &want, &buf);
  for (int w = 0; w < 2; ++w) {
    std::vector<float> got(kSliceSize, -1.0f);
    for (int64_t k = 0; k < kNumChunks; ++k) {
      WireChunk out;
      if (k == 0) {
        absl::StatusOr<bool> ready = shard->ServeIfReady(w, 1, ps::PARAMS, k, &out);
        ASSERT_TRUE(ready.ok() && *ready);
      } else {
        ASSERT_TRUE(shard->Serve(w, 1, ps::PARAMS, k, &out).ok());
      }
      const ps::Chunk chunk = OnTheWire(out);
      const Slice c = ChunkOf(kSliceSize, kChunkFloats, k);
      EXPECT_EQ(chunk.worker_id(), w);
      EXPECT_EQ(chunk.step(), 1);
      EXPECT_EQ(chunk.kind(), ps::PARAMS);
      EXPECT_EQ(chunk.offset(), c.offset);
      ASSERT_EQ(chunk.data().size(), c.size * sizeof(float));
      std::memcpy(got.data() + c.offset, chunk.data().data(), chunk.data().size());
    }
    ExpectNear(got, want);
  }
  WireChunk state;
  ASSERT_TRUE(shard->Serve(0, 1, ps::OPTIMIZER_STATE, 0, &state).ok());
  const ps::Chunk s = OnTheWire(state);
  const int64_t n0 = ChunkOf(kSliceSize, kChunkFloats, 0).size;
  ASSERT_EQ(s.data().size(), n0 * sizeof(float));
  std::vector<float> got(n0);
  std::memcpy(got.data(), s.data().data(), s.data().size());
  ExpectNear(got, std::vector<double>(buf.begin(), buf.begin() + n0));
}

TEST(ShardWireTest, AspRepliesAreSnapshotsNotViews) {
  // Under ASP another worker's push may change a chunk while its reply is in flight:
  // the reply must hold the values it was served with.
  const SgdHyper hyper = Hyper(0.25f);
  std::unique_ptr<Shard> shard = NewShard(Options(2, Asp(), hyper));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(hyper, SumOfGradients(kSliceSize, {0}, 0, 2), &want, nullptr);
  WireChunk reply;
  ASSERT_TRUE(shard->Serve(0, 1, ps::PARAMS, 0, &reply).ok());
  ASSERT_TRUE(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  const ps::Chunk chunk = OnTheWire(reply);
  const int64_t n0 = ChunkOf(kSliceSize, kChunkFloats, 0).size;
  ASSERT_EQ(chunk.data().size(), n0 * sizeof(float));
  std::vector<float> got(n0);
  std::memcpy(got.data(), chunk.data().data(), chunk.data().size());
  ExpectNear(got, std::vector<double>(want.begin(), want.begin() + n0));
}

// Chunk `sent` as the shard receives it from PushPull: parsed from its bytes on the
// wire cut into `piece`-byte slices (so that floats straddle slice boundaries).
WireChunk Received(const WireChunk& sent, size_t piece) {
  const std::string bytes = WireBytes(sent);
  std::vector<grpc::Slice> cut;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    cut.emplace_back(bytes.data() + at, std::min(piece, bytes.size() - at));
  }
  grpc::ByteBuffer odd(cut.data(), cut.size());
  WireChunk received;
  EXPECT_TRUE(received.Parse(&odd).ok());
  return received;
}

TEST(ShardWireTest, PayloadReaderReadsAcrossOddSlices) {
  const std::vector<float> values = Gradient(1000, 0, 0);
  WireChunk sent;
  sent.offset = 3;
  sent.BorrowPayload(values.data(), values.size() * sizeof(float));
  const WireChunk received = Received(sent, 7);
  ASSERT_EQ(received.payload_size(), values.size() * sizeof(float));
  EXPECT_EQ(received.offset, 3);
  std::vector<float> got(values.size(), -1.0f);
  char* out = reinterpret_cast<char*>(got.data());
  WireChunk::PayloadReader reader(received);
  size_t total = 0;
  for (size_t piece = 1; reader.bytes_left() > 0; piece = piece % 13 + 5) {
    const size_t n = reader.Read(out + total, piece);
    ASSERT_GT(n, 0u);
    total += n;
  }
  EXPECT_EQ(total, values.size() * sizeof(float));
  EXPECT_EQ(reader.Read(out, 4), 0u);
  EXPECT_EQ(got, values);
  std::vector<float> whole(values.size(), -1.0f);
  received.CopyPayloadTo(whole.data());
  EXPECT_EQ(whole, values);
}

// PushPull's Accept(header, WireChunk) takes gradients in blocks of 2048 floats read
// straight from the received slices. With chunks of several blocks plus a partial one,
// on each path (BSP's sum, BSP with one worker, ASP's rescaling by N), the parameters
// equal the closed form.
TEST(ShardWireTest, BlockwiseGradientsFromOddSlicesMatchTheClosedForm) {
  constexpr int64_t kBigSlice = 11000;  // Shard 1 of 2 over 22000 floats.
  struct Case {
    const char* name;
    int workers;
    SyncPolicy sync;
  };
  for (const Case& t : {Case{"bsp, 2 workers", 2, Bsp()}, Case{"bsp, 1 worker", 1, Bsp()},
                        Case{"asp, 2 workers", 2, Asp()}}) {
    SCOPED_TRACE(t.name);
    const SgdHyper hyper = Hyper(0.5f, /*momentum=*/0.9f, /*weight_decay=*/0.01f);
    PsShardOptions o = Options(t.workers, t.sync, hyper);
    o.chunk_bytes = 5000 * sizeof(float);  // Chunks of 1000, 5000 and 5000 floats.
    std::unique_ptr<Shard> shard = NewShard(o, 2 * kBigSlice);
    ASSERT_NE(shard, nullptr);
    ASSERT_EQ(shard->num_chunks(), 3);
    Initialise(*shard);
    std::vector<double> want = ToDouble(InitialParams(kBigSlice));
    std::vector<double> carried(kBigSlice, 0.0);
    std::vector<int> all;
    for (int w = 0; w < t.workers; ++w) {
      const std::vector<float> g = Gradient(kBigSlice, w, 0);
      for (int64_t k = shard->num_chunks() - 1; k >= 0; --k) {
        const Slice c = ChunkOf(kBigSlice, shard->chunk_floats(), k);
        WireChunk sent;
        sent.worker_id = w;
        sent.kind = ps::GRADIENTS;
        sent.offset = c.offset;
        sent.BorrowPayload(g.data() + c.offset, c.size * sizeof(float));
        const WireChunk in = Received(sent, 8191);
        const ChunkHeader h = Header(w, 0, ps::GRADIENTS, c.offset);
        ASSERT_TRUE(shard->CheckChunk(h, in.payload_size(), w).ok());
        ASSERT_TRUE(shard->Accept(h, in).ok());
      }
      all.push_back(w);
      if (t.sync.mode == SyncMode::kAsp) {
        SgdStep(hyper, SumOfGradients(kBigSlice, {w}, 0, t.workers), &want, &carried);
      }
    }
    if (t.sync.mode == SyncMode::kBsp) {
      SgdStep(hyper, SumOfGradients(kBigSlice, all, 0), &want, &carried);
    }
    absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 0, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(*got, want);
  }
}

// ---------------------------------------------------------------------------------
// Statistics.

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(ShardStatsTest, StepRecordsCountTheWireBytesOfPushesAndPulls) {
  const std::string path = TempPath("shard_stats.jsonl");
  absl::StatusOr<std::unique_ptr<MetricsWriter>> writer = MetricsWriter::Open(path, false);
  ASSERT_TRUE(writer.ok()) << writer.status();
  constexpr int kWorkers = 2;
  PsShardOptions options = Options(kWorkers, Bsp(), Hyper(0.5f));
  options.metrics = writer->get();
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);

  int64_t total_in = 0;
  int64_t total_out = 0;
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::PARAMS, InitialParams(kSliceSize), &total_in).ok());
  // Start-up pulls count in the totals but belong to no step.
  for (int w = 0; w < kWorkers; ++w) ASSERT_TRUE(ServeSlice(*shard, w, 0, ps::PARAMS, &total_out).ok());
  EXPECT_EQ(shard->Stats().steps_completed(), 0);

  constexpr int64_t kSteps = 2;
  std::vector<int64_t> step_in(kSteps, 0), step_out(kSteps, 0);
  for (int64_t s = 0; s < kSteps; ++s) {
    // Two streams in flight during the step.
    shard->StreamStarted();
    shard->StreamStarted();
    // Step 0 in worker order, step 1 in reverse: the last complete push is late_worker.
    for (int i = 0; i < kWorkers; ++i) {
      const int w = s % 2 == 0 ? i : kWorkers - 1 - i;
      ASSERT_TRUE(PushSlice(*shard, w, s, ps::GRADIENTS, Gradient(kSliceSize, w, s), &step_in[s]).ok());
    }
    shard->StreamEnded();
    shard->StreamEnded();
    // All pushed, but the step is complete only when every chunk went back to everyone.
    ASSERT_TRUE(ServeSlice(*shard, 0, s + 1, ps::PARAMS, &step_out[s]).ok());
    EXPECT_EQ(shard->Stats().steps_completed(), s);
    ASSERT_TRUE(ServeSlice(*shard, 1, s + 1, ps::PARAMS, &step_out[s]).ok());
    const ps::ShardStats stats = shard->Stats();
    EXPECT_EQ(stats.steps_completed(), s + 1);
    const StepMetrics& last = stats.last_step();
    EXPECT_EQ(last.step(), s);
    EXPECT_EQ(last.rank(), kShard);
    EXPECT_EQ(last.role(), "server");
    EXPECT_EQ(last.bytes_received(), step_in[s]);
    EXPECT_EQ(last.bytes_sent(), step_out[s]);
    EXPECT_EQ(last.queue_depth(), 2);
    EXPECT_GE(last.wait_ms(), 0);
    EXPECT_EQ(last.late_worker(), s % 2 == 0 ? kWorkers - 1 : 0);
    EXPECT_GE(last.step_ms(), 0);
    total_in += step_in[s];
    total_out += step_out[s];
  }
  // Wire sizes differ between steps (step 0 is not on the wire in proto3): the shard
  // counts what it was told, per step.
  EXPECT_NE(step_in[0], step_in[1]);
  // By hand, step 0: chunks at offsets 0, 4, 8 carry 16, 16, 12 payload bytes, each
  // with a 2-byte data header, offsets 4 and 8 take 2 bytes, worker 1's id 2 bytes per
  // chunk (zeros are not on the wire): 18 + 20 + 16 = 54 for worker 0, 60 for worker 1.
  EXPECT_EQ(step_in[0], 114);
  EXPECT_EQ(step_in[1], 114 + 2 * kWorkers * kNumChunks);  // Plus the step field.
  const ps::ShardStats stats = shard->Stats();
  EXPECT_EQ(stats.shard(), kShard);
  EXPECT_EQ(stats.bytes_in(), total_in);
  EXPECT_EQ(stats.bytes_out(), total_out);
  EXPECT_EQ(stats.max_queue_depth(), 2);

  // The same records went to the metrics file, one line per step.
  shard.reset();
  ASSERT_TRUE((*writer)->Close().ok());
  std::ifstream in(path);
  std::vector<StepMetrics> records;
  for (std::string line; std::getline(in, line);) {
    StepMetrics m;
    ASSERT_TRUE(FromJsonLine(line, &m).ok()) << line;
    records.push_back(m);
  }
  ASSERT_EQ(records.size(), kSteps);
  for (int64_t s = 0; s < kSteps; ++s) {
    EXPECT_EQ(records[s].step(), s);
    EXPECT_EQ(records[s].role(), "server");
    EXPECT_EQ(records[s].bytes_received(), step_in[s]);
    EXPECT_EQ(records[s].bytes_sent(), step_out[s]);
  }
}

// ---------------------------------------------------------------------------------
// Barriers.

TEST(ShardBarrierTest, EveryWorkerGetsTheElementWiseSums) {
  constexpr int kWorkers = 3;
  std::unique_ptr<Shard> shard = NewShard(Options(kWorkers, Bsp(), Hyper(0.1f)));
  ASSERT_NE(shard, nullptr);
  for (int round = 0; round < 2; ++round) {
    // The workers' successive barriers.
    std::vector<absl::StatusOr<std::vector<double>>> got(kWorkers);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w) {
      threads.emplace_back([&, w] {
        got[w] = shard->Barrier(w, absl::StrCat("eval/", round), {1.0 * w, 10.0 * w + round, 0.5});
      });
    }
    for (std::thread& t : threads) t.join();
    for (int w = 0; w < kWorkers; ++w) {
      ASSERT_TRUE(got[w].ok()) << got[w].status();
      EXPECT_EQ(*got[w], (std::vector<double>{3.0, 30.0 + 3 * round, 1.5})) << "worker " << w;
    }
  }
  // No values at all is a plain rendezvous.
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<std::vector<double>>> got(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] { got[w] = shard->Barrier(w, "end", {}); });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(got[w].ok()) << got[w].status();
    EXPECT_TRUE(got[w]->empty());
  }
}

TEST(ShardBarrierTest, RejectsUnknownWorkers) {
  absl::StatusOr<std::unique_ptr<Shard>> created = Shard::Create(Options(2, Bsp(), Hyper(0.1f)));
  ASSERT_TRUE(created.ok());
  // Before any registration, and for ids outside the job.
  EXPECT_EQ((*created)->Barrier(0, "b", {1}).status().code(), absl::StatusCode::kInvalidArgument);
  ps::RegisterResponse r;
  ASSERT_TRUE((*created)->Register(Registration(0, 2), &r).ok());
  EXPECT_EQ((*created)->Barrier(2, "b", {1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*created)->Barrier(1, "b", {1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*created)->health().ok());
}

TEST(ShardBarrierTest, MissingWorkerAbortsTheJobNamingIt) {
  constexpr int kWorkers = 3;
  PsShardOptions options = Options(kWorkers, Bsp(), Hyper(0.1f));
  options.timeout = kShortTimeout;
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);
  const absl::Time start = absl::Now();
  std::vector<absl::StatusOr<std::vector<double>>> got(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] { got[w] = shard->Barrier(w, "eval/0", {1.0}); });
  }
  for (std::thread& t : threads) t.join();
  const absl::Duration elapsed = absl::Now() - start;
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(got[w].status().code(), absl::StatusCode::kAborted) << got[w].status();
    EXPECT_THAT(got[w].status().message(), HasSubstr("worker(s) 2 did not reach barrier 'eval/0'"));
  }
  EXPECT_GE(elapsed, kShortTimeout);
  EXPECT_LT(elapsed, kPrompt);
  EXPECT_EQ(shard->health().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(shard->health().message(), HasSubstr("worker(s) 2"));
  // The late worker is told too, at once.
  EXPECT_EQ(shard->Barrier(2, "eval/0", {1.0}).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(shard->WaitUntilDone().code(), absl::StatusCode::kAborted);
}

// ---------------------------------------------------------------------------------
// Faults: bounded waits, errors that name the culprit.

TEST(ShardFaultTest, BspTimeoutNamesTheWorkerThatDidNotPush) {
  PsShardOptions options = Options(2, Bsp(), Hyper(0.1f));
  options.timeout = kShortTimeout;
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  const absl::Time start = absl::Now();
  ps::Chunk chunk;
  absl::Status s = shard->Serve(0, 1, ps::PARAMS, 0, &chunk);
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker(s) 1 did not push step 0"));
  EXPECT_GE(elapsed, kShortTimeout);
  EXPECT_LT(elapsed, kPrompt);
  EXPECT_EQ(shard->health().code(), absl::StatusCode::kAborted);
  // Everyone else is refused from now on, at once.
  EXPECT_EQ(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(shard->ServeIfReady(1, 1, ps::PARAMS, 0, &chunk).status().code(),
            absl::StatusCode::kAborted);
  ps::RegisterResponse r;
  EXPECT_EQ(shard->Register(Registration(1, 2), &r).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(shard->WaitUntilDone().code(), absl::StatusCode::kAborted);
}

TEST(ShardFaultTest, SspTimeoutNamesTheStraggler) {
  PsShardOptions options = Options(2, Ssp(0), Hyper(0.1f));
  options.timeout = kShortTimeout;
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  ps::Chunk chunk;
  absl::Status s = shard->Serve(0, 1, ps::PARAMS, 0, &chunk);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker(s) 1 stayed more than 0 steps behind worker 0"));
}

TEST(ShardFaultTest, MissingInitialisationTimesOutNamingWorker0) {
  PsShardOptions options = Options(2, Bsp(), Hyper(0.1f));
  options.timeout = kShortTimeout;
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);
  ps::Chunk chunk;
  absl::Status s = shard->Serve(1, 0, ps::PARAMS, 0, &chunk);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker 0 did not initialise"));
}

TEST(ShardFaultTest, LostWorkerReleasesEveryBlockedCall) {
  // A long timeout: only the loss may release the waits.
  PsShardOptions options = Options(2, Bsp(), Hyper(0.1f));
  options.timeout = absl::Seconds(30);
  std::unique_ptr<Shard> shard = NewShard(options);
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());

  auto serve = std::async(std::launch::async, [&] {
    ps::Chunk chunk;
    return shard->Serve(0, 1, ps::PARAMS, 0, &chunk);
  });
  auto barrier = std::async(std::launch::async,
                            [&] { return shard->Barrier(0, "eval/0", {1.0}).status(); });
  auto done = std::async(std::launch::async, [&] { return shard->WaitUntilDone(); });
  EXPECT_EQ(serve.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);

  const absl::Time start = absl::Now();
  shard->WorkerLost(1, "its stream broke during step 0");
  for (auto* f : {&serve, &barrier, &done}) {
    ASSERT_EQ(f->wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
    absl::Status s = f->get();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_THAT(s.message(), HasSubstr("worker 1 lost: its stream broke during step 0"));
  }
  EXPECT_LT(absl::Now() - start, kPrompt);
  EXPECT_EQ(shard->health().code(), absl::StatusCode::kAborted);
  // The first reason sticks.
  shard->WorkerLost(0, "something else");
  EXPECT_THAT(shard->health().message(), HasSubstr("worker 1 lost"));
}

TEST(ShardDoneTest, WaitUntilDoneReturnsOnceEveryWorkerSaidGoodbye) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.1f)));
  ASSERT_NE(shard, nullptr);
  auto done = std::async(std::launch::async, [&] { return shard->WaitUntilDone(); });
  ASSERT_TRUE(shard->Goodbye(0).ok());
  EXPECT_EQ(shard->Goodbye(0).code(), absl::StatusCode::kFailedPrecondition);  // Once.
  EXPECT_EQ(shard->Goodbye(7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(done.wait_for(std::chrono::milliseconds(150)), std::future_status::timeout);
  ASSERT_TRUE(shard->Goodbye(1).ok());
  ASSERT_EQ(done.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
  EXPECT_TRUE(done.get().ok());
  EXPECT_TRUE(shard->health().ok());
}

// ---------------------------------------------------------------------------------
// Determinism (BSP): the sum is g_0 + g_1 + ... in worker-id order, whatever the order of
// arrival, so the result is the same bits every time.

// Worker w's gradient, chosen so that float addition order shows: 3e7 + 1 loses the 1.
std::vector<float> OrderSensitiveGradient(int64_t size, int worker, int64_t step) {
  static constexpr float kBase[] = {3e7f, 1.0f, -3e7f, 0.5f, 7e6f, -0.25f, -7e6f, 0.125f};
  std::vector<float> g(size);
  for (int64_t i = 0; i < size; ++i) {
    g[i] = kBase[worker % 8] * (1.0f + 0.01f * static_cast<float>(i)) + 0.001f * static_cast<float>(step);
  }
  return g;
}

TEST(ShardDeterminismTest, BspSumsInWorkerIdOrderWhateverTheArrivalOrder) {
  for (int workers : {3, 4, 8}) {
    // The float left fold in worker-id order, stepped with lr 1 (no momentum).
    std::vector<float> want = InitialParams(kSliceSize);
    for (int64_t i = 0; i < kSliceSize; ++i) {
      float sum = 0.0f;
      for (int w = 0; w < workers; ++w) sum += OrderSensitiveGradient(kSliceSize, w, 0)[i];
      want[i] -= sum;
    }
    std::vector<int> order(workers);
    for (int w = 0; w < workers; ++w) order[w] = w;
    // Several arrival orders (each chunk in a different one): identity, reversed,
    // rotations and swaps.
    for (int trial = 0; trial < 12; ++trial) {
      std::unique_ptr<Shard> shard = NewShard(Options(workers, Bsp(), Hyper(1.0f)));
      ASSERT_NE(shard, nullptr);
      Initialise(*shard);
      for (int64_t k = kNumChunks - 1; k >= 0; --k) {
        std::vector<int> arrival = order;
        if ((trial + k) % 2 == 1) std::reverse(arrival.begin(), arrival.end());
        std::rotate(arrival.begin(), arrival.begin() + (trial + k) % workers, arrival.end());
        if (trial % 3 == 2) std::swap(arrival[0], arrival[workers - 1]);
        for (int w : arrival) {
          ASSERT_TRUE(PushChunk(*shard, w, 0, ps::GRADIENTS, k,
                                OrderSensitiveGradient(kSliceSize, w, 0)).ok());
        }
      }
      absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, workers - 1, 1);
      ASSERT_TRUE(got.ok()) << got.status();
      for (int64_t i = 0; i < kSliceSize; ++i) {
        // Bit for bit (as floats compare: none is NaN).
        EXPECT_EQ((*got)[i], want[i]) << workers << " workers, trial " << trial << ", element " << i;
      }
    }
  }
}

// ---------------------------------------------------------------------------------
// Non-finite gradients: refused with the worker, the step and the element range, and
// nothing of them applied, on each path a push takes.

TEST(ShardNonFiniteTest, RefusesNaNAndInfPushesAndAppliesNothing) {
  for (SyncPolicy sync : {Bsp(), Asp()}) {
    SCOPED_TRACE(SyncPolicyText(sync));
    std::unique_ptr<Shard> shard = NewShard(Options(3, sync, Hyper(0.5f, 0.9f)));
    ASSERT_NE(shard, nullptr);
    Initialise(*shard);
    const ps::ShardStats before = shard->Stats();
    // Worker 2 (BSP: ahead of its turn, would be parked) pushes a NaN in chunk 1, whose
    // floats are [3, 7) of the slice, [13, 17) of the parameters.
    std::vector<float> g = Gradient(kSliceSize, 2, 0);
    g[5] = std::nanf("");
    absl::Status s = PushChunk(*shard, 2, 0, ps::GRADIENTS, 1, g);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "worker 2 pushed a non-finite gradient in step 0: elements [13, 17) of the "
              "parameters (first at 15: nan); push refused, nothing applied");
    // Worker 0 (its turn, summed in place / stepped at once) pushes an infinity.
    g = Gradient(kSliceSize, 0, 0);
    g[3] = -INFINITY;
    s = PushChunk(*shard, 0, 0, ps::GRADIENTS, 1, g);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("worker 0 pushed a non-finite gradient in step 0: "
                                       "elements [13, 17) of the parameters (first at 13: -inf)"));
    // Nothing changed: the parameters, the statistics, the health.
    absl::StatusOr<std::vector<float>> params = ServeSlice(*shard, 1, 0);
    ASSERT_TRUE(params.ok()) << params.status();
    EXPECT_EQ(*params, InitialParams(kSliceSize));
    EXPECT_EQ(shard->Stats().bytes_in(), before.bytes_in());
    EXPECT_EQ(shard->Stats().steps_completed(), 0);
    EXPECT_TRUE(shard->health().ok());
    // The same workers' finite pushes of the step are taken as if nothing happened.
    for (int w : {2, 1, 0}) {
      ASSERT_TRUE(PushSlice(*shard, w, 0, ps::GRADIENTS, Gradient(kSliceSize, w, 0)).ok());
    }
    std::vector<double> want = ToDouble(InitialParams(kSliceSize));
    std::vector<double> carried(kSliceSize, 0.0);
    if (sync.mode == SyncMode::kBsp) {
      SgdStep(Hyper(0.5f, 0.9f), SumOfGradients(kSliceSize, {0, 1, 2}, 0), &want, &carried);
    } else {
      for (int w : {2, 1, 0}) {  // Each push its own step, with the 1/N undone.
        SgdStep(Hyper(0.5f, 0.9f), SumOfGradients(kSliceSize, {w}, 0, 3.0), &want, &carried);
      }
    }
    params = ServeSlice(*shard, 0, 1);
    ASSERT_TRUE(params.ok()) << params.status();
    ExpectNear(*params, want);
  }
}

// ---------------------------------------------------------------------------------
// Calls the protocol does not allow fail that call at once, blame nobody and change
// nothing.

TEST(ShardProtocolTest, PullOfAFutureStepFailsAtOnceAndTheJobGoesOn) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<float>> got = ServeSlice(*shard, 1, 5);
  EXPECT_LT(absl::Now() - start, kPrompt);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(got.status().message(),
            "worker 1 asked for the parameters of step 5 (chunk 0), but has pushed that chunk "
            "only for no step");
  // Step 1 while step 0 is not pushed: the same.
  ASSERT_TRUE(PushSlice(*shard, 1, 0, ps::GRADIENTS, Gradient(kSliceSize, 1, 0)).ok());
  got = ServeSlice(*shard, 1, 2);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(got.status().message(), HasSubstr("but has pushed that chunk only through step 0"));
  EXPECT_TRUE(shard->health().ok());
  EXPECT_EQ(shard->Stats().steps_completed(), 0);
  // The step completes as usual.
  ASSERT_TRUE(PushSlice(*shard, 0, 0, ps::GRADIENTS, Gradient(kSliceSize, 0, 0)).ok());
  std::vector<double> want = ToDouble(InitialParams(kSliceSize));
  SgdStep(Hyper(0.5f), SumOfGradients(kSliceSize, {0, 1}, 0), &want, nullptr);
  for (int w : {0, 1}) {
    got = ServeSlice(*shard, w, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(*got, want);
  }
}

TEST(ShardProtocolTest, MadeUpBarriersFailAtOnceAndChangeNothing) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  const absl::Time start = absl::Now();
  absl::Status s = shard->Barrier(0, "foo", {1.0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "worker 0: 'foo' is not a barrier of the protocol (end, eval/N, checkpoint/N)");
  EXPECT_EQ(shard->Barrier(0, "eval/x", {1.0}).status().code(), absl::StatusCode::kInvalidArgument);
  s = shard->Barrier(1, "eval/3", {1.0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "worker 1 entered barrier 'eval/3', its next barrier is number 0");
  EXPECT_LT(absl::Now() - start, kPrompt);
  EXPECT_TRUE(shard->health().ok());
  // The real barrier 0 sums only what the real calls bring.
  std::vector<absl::StatusOr<std::vector<double>>> got(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] { got[w] = shard->Barrier(w, "checkpoint/0", {1.0 + w}); });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(got[w].ok()) << got[w].status();
    EXPECT_EQ(*got[w], std::vector<double>{3.0});
  }
  EXPECT_TRUE(shard->health().ok());
}

TEST(ShardProtocolTest, GoodbyeInTheMiddleOfAPushIsRefused) {
  std::unique_ptr<Shard> shard = NewShard(Options(2, Bsp(), Hyper(0.5f)));
  ASSERT_NE(shard, nullptr);
  Initialise(*shard);
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 2, Gradient(kSliceSize, 1, 0)).ok());
  absl::Status s = shard->Goodbye(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "worker 1 said goodbye in the middle of pushing step 0");
  EXPECT_TRUE(shard->health().ok());
  // It finishes the step and then may leave.
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 1, Gradient(kSliceSize, 1, 0)).ok());
  ASSERT_TRUE(PushChunk(*shard, 1, 0, ps::GRADIENTS, 0, Gradient(kSliceSize, 1, 0)).ok());
  EXPECT_TRUE(shard->Goodbye(1).ok());
}

}  // namespace
}  // namespace ringside
