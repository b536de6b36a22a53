#include "experiments/explain/ps_explainer.h"

#include <algorithm>
#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "ps_server/ps.pb.h"
#include "ps_server/wire_chunk.h"

namespace ringside {
namespace {

constexpr char kModel[] = "mlp:784-256-256-10";
// 784 x 256 + 256 + 256 x 256 + 256 + 256 x 10 + 10.
constexpr int64_t kParams = 269322;

TEST(PsExplainerTest, ParamCountIsTheTrainersModel) {
  absl::StatusOr<int64_t> p = ModelParamCount(kModel);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, kParams);
  EXPECT_FALSE(ModelParamCount("mlp:100-10").ok());  // The input is 784 floats.
  EXPECT_FALSE(ModelParamCount("nonsense").ok());
}

TEST(PsExplainerTest, ChunkWireBytesIsTheProtobufEncoding) {
  // A pull: five 1-byte tags, four 1-byte varints, the length's varint, the payload.
  EXPECT_EQ(ChunkWireBytes(0, 0, ps::PARAMS, 0, 4), 5 + 4 + 1 + 4);
  EXPECT_EQ(ChunkWireBytes(0, 0, ps::PARAMS, 0, 0), 5 + 4 + 1);
  // A push adds the session: a 1-byte tag and a fixed64.
  EXPECT_EQ(ChunkWireBytes(0, 0, ps::GRADIENTS, 0, 4), 5 + 4 + 1 + 4 + 9);
  // 2^20 payload bytes take a 3-byte length; offset 7178 a 2-byte varint; worker 200 and
  // step 300 two bytes each.
  EXPECT_EQ(ChunkWireBytes(0, 0, ps::PARAMS, 0, 1 << 20), 5 + 4 + 3 + (1 << 20));
  EXPECT_EQ(ChunkWireBytes(200, 300, ps::PARAMS, 7178, 40), 5 + 2 + 2 + 1 + 2 + 1 + 40);
  // A negative int32 is sign-extended to 10 bytes.
  EXPECT_EQ(ChunkWireBytes(-1, 0, ps::PARAMS, 0, 0), 5 + 10 + 3 + 1);
}

TEST(PsExplainerTest, ChunkWireBytesIsWhatTheCodecSends) {
  // The bytes a real WireChunk serialises to, push and pull, small and large.
  for (ps::TensorKind kind : {ps::GRADIENTS, ps::PARAMS}) {
    for (size_t payload : {size_t{0}, size_t{4}, size_t{28712}, size_t{1} << 20}) {
      WireChunk c;
      c.worker_id = 3;
      c.step = 129;
      c.kind = kind;
      c.offset = 7178;
      c.session = kind == ps::GRADIENTS ? 0x0123456789abcdefULL : 0;
      std::vector<char> data(payload, 'x');
      c.CopyPayload(data.data(), data.size());
      grpc::ByteBuffer buffer;
      ASSERT_TRUE(c.Serialize(&buffer).ok());
      EXPECT_EQ(static_cast<int64_t>(buffer.Length()),
                ChunkWireBytes(3, 129, kind, 7178, static_cast<int64_t>(payload)))
          << "kind " << kind << ", payload " << payload;
    }
  }
}

TEST(PsExplainerTest, OneShardClosedForm) {
  PsExplainOptions o;
  o.model = kModel;
  o.workers = 4;
  o.shards = 1;
  absl::StatusOr<PsExplanation> e = ExplainPs(o);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->num_params, kParams);
  ASSERT_EQ(e->shards.size(), 1u);
  const PsShardPart& p = e->shards[0];
  EXPECT_EQ(p.floats, kParams);
  // Chunks of 262144 floats aligned on the slice's end: [0, 7178), [7178, 269322).
  EXPECT_EQ(p.chunks, 2);
  EXPECT_EQ(p.payload_in, 4 * 4 * kParams);
  // Framing per worker: chunk 0 (offset 0, 28712 bytes) 5 + 4 + 3 = 12 bytes, chunk 1
  // (offset 7178, 2^20 bytes) 5 + 3 + 2 + 3 = 13; each push adds the session's 9.
  EXPECT_EQ(p.wire_in, 4 * (4 * kParams + 25 + 2 * 9));
  EXPECT_EQ(p.wire_out, 4 * (4 * kParams + 25));
  EXPECT_EQ(e->master_in, p.wire_in);
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(e->worker_out[w], 4 * kParams + 25 + 2 * 9);
    EXPECT_EQ(e->worker_in[w], 4 * kParams + 25);
  }
}

TEST(PsExplainerTest, ShardsSplitTheMasterLoad) {
  for (int n : {1, 2, 4, 7}) {
    for (int s : {1, 2, 3, 4, 7}) {
      PsExplainOptions o;
      o.model = kModel;
      o.workers = n;
      o.shards = s;
      o.chunk_bytes = 8 << 10;
      absl::StatusOr<PsExplanation> e = ExplainPs(o, 5);
      ASSERT_TRUE(e.ok()) << e.status();
      int64_t floats = 0, payload = 0, in = 0, out = 0, workers_out = 0, workers_in = 0;
      int64_t smallest = kParams, largest = 0;
      for (const PsShardPart& p : e->shards) {
        EXPECT_EQ(p.offset, floats);
        floats += p.floats;
        smallest = std::min(smallest, p.floats);
        largest = std::max(largest, p.floats);
        EXPECT_EQ(p.payload_in, 4 * n * p.floats);
        EXPECT_EQ(p.chunks, (p.floats + 2047) / 2048);
        // Each chunk adds 5 tags, at most 1 + 1 + 1 + 3 + 2 bytes of varints and, pushed,
        // the session's 9.
        EXPECT_GT(p.wire_in, p.payload_in);
        EXPECT_LE(p.wire_in - p.payload_in, n * p.chunks * (5 + 8 + 9));
        payload += p.payload_in;
        in += p.wire_in;
        out += p.wire_out;
      }
      for (int w = 0; w < n; ++w) {
        workers_out += e->worker_out[w];
        workers_in += e->worker_in[w];
      }
      EXPECT_EQ(floats, kParams);
      EXPECT_LE(largest - smallest, 1);
      EXPECT_EQ(payload, 4 * n * kParams);  // N x the model in, whatever S.
      EXPECT_EQ(in, e->master_in);
      EXPECT_EQ(out, e->master_out);
      EXPECT_EQ(workers_out, in);  // What the workers push the shards receive.
      EXPECT_EQ(workers_in, out);
    }
  }
}

TEST(PsExplainerTest, BadInputs) {
  PsExplainOptions o;
  o.model = kModel;
  o.workers = 0;
  EXPECT_EQ(ExplainPs(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.workers = 2;
  o.shards = 0;
  EXPECT_EQ(ExplainPs(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.model = "mlp:784-1";
  o.shards = 786;  // More shards than the model's 785 floats.
  EXPECT_EQ(ExplainPs(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PsExplainerTest, TextNamesTheBottleneck) {
  PsExplainOptions o;
  o.model = kModel;
  o.workers = 4;
  o.shards = 1;
  absl::StatusOr<PsExplanation> one = ExplainPs(o);
  ASSERT_TRUE(one.ok());
  const std::string text = FormatPsExplanation(*one);
  EXPECT_NE(text.find("4 workers, 1 shard: the master moves 8.62 MB per step (in + out); "
                      "with 4 shards each moves 2.15 MB"),
            std::string::npos)
      << text;
  o.shards = 4;
  absl::StatusOr<PsExplanation> four = ExplainPs(o);
  ASSERT_TRUE(four.ok());
  EXPECT_NE(FormatPsExplanation(*four).find("4 workers, 4 shards: each shard moves 2.15 MB"),
            std::string::npos)
      << FormatPsExplanation(*four);
  EXPECT_EQ(PsFrames(*four).size(), 5u);
}

TEST(PsExplainerTest, ComparisonWithinTolerance) {
  PsExplainOptions o;
  o.model = kModel;
  o.workers = 2;
  o.shards = 2;
  std::vector<PsMeasuredStep> measured;
  for (int64_t t = 0; t < 2; ++t) {
    absl::StatusOr<PsExplanation> e = ExplainPs(o, t);
    ASSERT_TRUE(e.ok());
    for (const PsShardPart& p : e->shards) measured.push_back({p.shard, t, p.wire_in, p.wire_out});
  }
  std::string report;
  EXPECT_TRUE(ComparePsBytes(o, 2, measured, 0.01, &report).ok()) << report;
  EXPECT_NE(report.find("4 of 4 records exact to the byte"), std::string::npos) << report;

  std::vector<PsMeasuredStep> off = measured;
  off[3].bytes_sent = off[3].bytes_sent * 102 / 100;
  report.clear();
  const absl::Status s = ComparePsBytes(o, 2, off, 0.01, &report);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("shard 1 step 1: measured out"), std::string::npos) << s;

  std::vector<PsMeasuredStep> missing(measured.begin(), measured.begin() + 3);
  report.clear();
  EXPECT_FALSE(ComparePsBytes(o, 2, missing, 0.01, &report).ok());
}

}  // namespace
}  // namespace ringside
