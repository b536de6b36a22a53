#include "ps_server/shard_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gtest/gtest.h"

namespace ringside {
namespace shard_test {

RunConfig JobConfig() {
  RunConfig c;
  c.set_model(kModel);
  c.set_lr(0.02f);
  return c;
}

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

SgdHyper Hyper(float lr, float momentum, float weight_decay) {
  SgdHyper h;
  h.lr = lr;
  h.momentum = momentum;
  h.weight_decay = weight_decay;
  return h;
}

ps::RegisterRequest Registration(int worker, int num_workers, int64_t num_params) {
  ps::RegisterRequest r;
  r.set_worker_id(worker);
  r.set_num_workers(num_workers);
  *r.mutable_config() = JobConfig();
  r.set_model(kModel);
  r.set_num_params(num_params);
  return r;
}

std::unique_ptr<Shard> NewShard(const PsShardOptions& options, int64_t num_params) {
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

absl::Status PushChunk(Shard& shard, int worker, int64_t step, ps::TensorKind kind, int64_t k,
                       const std::vector<float>& slice_values, int64_t* wire_bytes) {
  const Slice c = ChunkOf(static_cast<int64_t>(slice_values.size()), shard.chunk_floats(), k);
  ps::Chunk chunk = MakeChunk(worker, step, kind, c.offset, slice_values.data() + c.offset, c.size);
  const int64_t wire = static_cast<int64_t>(chunk.ByteSizeLong());
  absl::Status s = shard.Accept(&chunk, wire);
  if (s.ok() && wire_bytes != nullptr) *wire_bytes += wire;
  return s;
}

absl::Status PushSlice(Shard& shard, int worker, int64_t step, ps::TensorKind kind,
                       const std::vector<float>& slice_values, int64_t* wire_bytes) {
  const int64_t n = NumChunks(static_cast<int64_t>(slice_values.size()), shard.chunk_floats());
  for (int64_t k = n - 1; k >= 0; --k) {
    absl::Status s = PushChunk(shard, worker, step, kind, k, slice_values, wire_bytes);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> ServeSlice(Shard& shard, int worker, int64_t step,
                                              ps::TensorKind kind, int64_t* served_bytes) {
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

bool Ready(Shard& shard, int worker, int64_t step, int64_t k) {
  ps::Chunk chunk;
  absl::StatusOr<bool> ready = shard.ServeIfReady(worker, step, ps::PARAMS, k, &chunk);
  EXPECT_TRUE(ready.ok()) << ready.status();
  return ready.ok() && *ready;
}

bool Refused(Shard& shard, int worker, int64_t step, int64_t k) {
  ps::Chunk chunk;
  absl::StatusOr<bool> ready = shard.ServeIfReady(worker, step, ps::PARAMS, k, &chunk);
  return ready.status().code() == absl::StatusCode::kFailedPrecondition;
}

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

std::vector<double> SumOfGradients(int64_t size, const std::vector<int>& workers, int64_t step,
                                   double scale) {
  std::vector<double> sum(size, 0.0);
  for (int w : workers) {
    const std::vector<float> g = Gradient(size, w, step);
    for (int64_t i = 0; i < size; ++i) sum[i] += scale * g[i];
  }
  return sum;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

void Initialise(Shard& shard, int64_t step) {
  ASSERT_TRUE(PushSlice(shard, 0, step, ps::PARAMS, InitialParams(shard.slice().size)).ok());
}

}  // namespace shard_test
}  // namespace ringside
