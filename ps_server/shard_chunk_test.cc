// ShardChunk alone (a push, the sum, the release of a pull, a drop, a rejoin), then the
// shard's zero-copy entry points, which read a gradient into its chunk block by block.
#include "ps_server/shard_chunk.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "ps_server/consistency_policy.h"
#include "ps_server/ordered_sum.h"
#include "ps_server/shard.h"
#include "ps_server/shard_test_util.h"
#include "ps_server/wire_chunk.h"

namespace ringside {
namespace shard_test {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------
// ShardChunk alone: one chunk of 4 floats under BSP.

constexpr int64_t kFloats = 4;
constexpr float kLr = 0.5f;

// 1 - lr * (sum of the `workers`' gradients of step 0) * scale, element-wise.
std::vector<double> AfterOneStep(const std::vector<int>& workers, double scale) {
  std::vector<double> want(kFloats, 1.0);
  const std::vector<double> sum = SumOfGradients(kFloats, workers, 0, scale);
  for (int64_t i = 0; i < kFloats; ++i) want[i] -= kLr * sum[i];
  return want;
}

class ShardChunkTest : public ::testing::Test {
 protected:
  // A chunk over params_ (kFloats floats, all 1) for `workers` BSP workers, started at
  // step 0.
  // `summation`: a summation server's chunk.
  void Start(int workers, bool summation = false) {
    params_.assign(kFloats, 1.0f);
    absl::StatusOr<std::unique_ptr<ShardChunk>> chunk = ShardChunk::Create(
        0, Slice{0, kFloats}, params_.data(), workers, Hyper(kLr), true, summation);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    chunk_ = *std::move(chunk);
    chunk_->Start(0);
    policy_ = ConsistencyPolicy::Create(Bsp(), workers);
  }

  // Worker w's gradient of `step`, pushed in one block.
  absl::Status Push(int w, int64_t step) {
    std::vector<float> g = Gradient(kFloats, w, step);
    return chunk_
        ->Push(*policy_, w, step, [&g](OrderedSum::Block block) { block(0, g.data(), kFloats); })
        .status();
  }

  // A pull of `step` for `worker`: served (the reply's floats in got_) or not yet.
  absl::StatusOr<bool> Pull(int worker, int64_t step) {
    ShardChunk::Pull pull;
    pull.worker = worker;
    pull.step = step;
    return chunk_->Serve(*policy_, pull, [this](const float* data, const Slice& c) {
      got_.assign(data, data + c.size);
    });
  }

  std::vector<float> params_;
  std::unique_ptr<ShardChunk> chunk_;
  std::unique_ptr<ConsistencyPolicy> policy_;
  std::vector<float> got_;
};

TEST_F(ShardChunkTest, TheLastPushOfAStepAppliesTheSumAndReleasesTheChunk) {
  ASSERT_NO_FATAL_FAILURE(Start(2));
  ASSERT_TRUE(Push(1, 0).ok());
  // Worker 1 pushed step 0; worker 0 has not: the chunk waits for it.
  absl::StatusOr<bool> ready = Pull(1, 1);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_FALSE(*ready);
  EXPECT_EQ(chunk_->LateWorkers(*policy_, 1, {0, 1}, {false, false}), std::vector<int>{0});
  // Worker 0 cannot be about to run step 1: refused at once.
  EXPECT_EQ(Pull(0, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Push(1, 0).code(), absl::StatusCode::kFailedPrecondition);  // Twice.
  ASSERT_TRUE(Push(0, 0).ok());
  EXPECT_EQ(chunk_->version(), 1);
  ready = Pull(1, 1);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(*ready);
  ExpectNear(got_, AfterOneStep({0, 1}, 1.0));
}

// A summation server's chunk serves worker 0's parameters until the first step
// completes, then each step's mean gradient (the workers scale by 1/N: the sum), in
// worker-id order whichever push came first; it steps nothing.
TEST_F(ShardChunkTest, ASummationChunkServesTheMeanGradientInsteadOfStepping) {
  ASSERT_NO_FATAL_FAILURE(Start(2, /*summation=*/true));
  absl::StatusOr<bool> ready = Pull(0, 0);
  ASSERT_TRUE(ready.ok()) << ready.status();
  ASSERT_TRUE(*ready);
  EXPECT_EQ(got_, std::vector<float>(kFloats, 1.0f));
  ASSERT_TRUE(Push(1, 0).ok());
  ASSERT_TRUE(Push(0, 0).ok());
  EXPECT_EQ(chunk_->version(), 1);
  ready = Pull(1, 1);
  ASSERT_TRUE(ready.ok()) << ready.status();
  ASSERT_TRUE(*ready);
  std::vector<float> want = Gradient(kFloats, 0, 0);  // g0 + g1, added in id order.
  const std::vector<float> g1 = Gradient(kFloats, 1, 0);
  for (int64_t i = 0; i < kFloats; ++i) want[i] += g1[i];
  EXPECT_EQ(got_, want);
}

// With one worker BSP does not sum (the push is the step): the chunk serves that push.
TEST_F(ShardChunkTest, AOneWorkerSummationChunkServesThePush) {
  params_.assign(kFloats, 1.0f);
  absl::StatusOr<std::unique_ptr<ShardChunk>> chunk = ShardChunk::Create(
      0, Slice{0, kFloats}, params_.data(), 1, Hyper(kLr), /*sums=*/false, /*summation=*/true);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  chunk_ = *std::move(chunk);
  chunk_->Start(0);
  policy_ = ConsistencyPolicy::Create(Bsp(), 1);
  ASSERT_TRUE(Push(0, 0).ok());
  absl::StatusOr<bool> ready = Pull(0, 1);
  ASSERT_TRUE(ready.ok()) << ready.status();
  ASSERT_TRUE(*ready);
  EXPECT_EQ(got_, Gradient(kFloats, 0, 0));
}

TEST_F(ShardChunkTest, DroppingTheWorkerAStepWaitsForCompletesItOverTheOthers) {
  ASSERT_NO_FATAL_FAILURE(Start(3));
  ASSERT_TRUE(Push(2, 0).ok());
  ASSERT_TRUE(Push(0, 0).ok());
  EXPECT_EQ(chunk_->version(), 0);
  chunk_->Drop(*policy_, {1});
  EXPECT_EQ(chunk_->version(), 1);
  // Workers scale by 1/3; two pushed: their mean is the sum times 3/2.
  ExpectNear(params_, AfterOneStep({0, 2}, 1.5));
  EXPECT_THAT(Push(1, 1).message(), HasSubstr("dropped"));
  // Nobody waits for it any more.
  EXPECT_TRUE(chunk_->LateWorkers(*policy_, 1, {1, 0, 1}, {false, false, false}).empty());
}

TEST_F(ShardChunkTest, ARejoinedWorkerCountsFromItsStep) {
  ASSERT_NO_FATAL_FAILURE(Start(2));
  chunk_->Drop(*policy_, {1});
  {
    std::vector<std::unique_ptr<ShardChunk>> one;
    one.push_back(std::move(chunk_));
    ChunkSetLock all(one);
    one[0]->AssertHeld();
    EXPECT_EQ(one[0]->VersionLocked(), 0);
    one[0]->RejoinLocked(*policy_, 1, 0, /*moving=*/false);
    chunk_ = std::move(one[0]);
  }
  // Step 0 waits for worker 1 again.
  ASSERT_TRUE(Push(0, 0).ok());
  EXPECT_EQ(chunk_->version(), 0);
  ASSERT_TRUE(Push(1, 0).ok());
  EXPECT_EQ(chunk_->version(), 1);
  ExpectNear(params_, AfterOneStep({0, 1}, 1.0));
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

}  // namespace
}  // namespace shard_test
}  // namespace ringside
