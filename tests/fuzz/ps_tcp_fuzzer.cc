// Fuzz entry point for the parameter server's data plane on TCP (ps_server/tcp_wire.h),
// the shard's end: one connection to a TcpDataServer fed arbitrary bytes, as a rogue or
// broken worker would send them.
//
// Input: byte 0 = flags, then the bytes to send. Flag bit 0: the job has a token
// (kToken). Bit 1: the first sizeof(PsHello) bytes are made a valid hello for worker 0
// (magic, version, worker id, token length and the session the shard drew), followed by
// the token, so the fuzzer spends its time on the requests past the handshake.
//
// Per input: a fresh shard (1 of 1, one worker, BSP, 16-byte chunks over 11 floats, a
// short timeout) with worker 0 registered, and its TcpDataServer on 127.0.0.1 (a port
// the kernel picks); the input is sent, the sending side closed, and the shard's answer
// read to its end. The shard must end the connection within kAnswerBound, and its
// answer must be frames of the protocol: only the tags a shard sends, each kPsParams
// frame a chunk reference and exactly its chunk's floats on the shard's grid, a kPsError
// frame no longer than its bound, and nothing after an error but for a refused pull's.
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/frame_io.h"
#include "common/run_config.h"
#include "common/socket_io.h"
#include "ps_server/ps.pb.h"
#include "ps_server/shard.h"
#include "ps_server/sharding.h"
#include "ps_server/tcp_data_server.h"
#include "ps_server/tcp_wire.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using ringside::fuzz::Require;

constexpr char kModel[] = "mlp:8-4";
constexpr int64_t kNumParams = 11;
constexpr int64_t kChunkBytes = 16;
constexpr char kToken[] = "fuzz-token";
// A shard gives up on a silent or stuck worker after its timeout; the answer, however
// hostile the input, ends well within this.
constexpr absl::Duration kShardTimeout = absl::Milliseconds(200);
constexpr absl::Duration kAnswerBound = absl::Seconds(5);

// `compress`: the push-pulls' wire format ("" float32, "fp16", "bf16").
ringside::RunConfig JobConfig(const std::string& compress) {
  ringside::RunConfig c;
  c.set_model(kModel);
  c.set_lr(0.02f);
  c.set_compress(compress);
  return c;
}

// The shard with worker 0 registered; its session in *session.
std::unique_ptr<ringside::Shard> NewShard(const std::string& compress, uint64_t* session) {
  ringside::PsShardOptions o;
  o.num_workers = 1;
  o.sync = ringside::SyncPolicy{ringside::SyncMode::kBsp, 0};
  o.chunk_bytes = kChunkBytes;
  o.hyper.lr = 0.5f;
  o.config = JobConfig(compress);
  o.model = kModel;
  o.timeout = kShardTimeout;
  absl::StatusOr<std::unique_ptr<ringside::Shard>> shard = ringside::Shard::Create(o);
  Require(shard.ok(), "the shard is created");
  ringside::ps::RegisterRequest r;
  r.set_worker_id(0);
  r.set_num_workers(1);
  *r.mutable_config() = JobConfig(compress);
  r.set_model(kModel);
  r.set_num_params(kNumParams);
  ringside::ps::RegisterResponse response;
  Require((*shard)->Register(r, &response).ok(), "worker 0 registers");
  *session = response.session();
  return *std::move(shard);
}

// Reads the shard's answer to its end and checks it is frames of the protocol; served
// chunks in float32 (pulls) or in `wire` (push-pulls' replies).
void CheckAnswer(int fd, const ringside::Shard& shard, ringside::WireFormat wire, absl::Time deadline) {
  const ringside::Slice slice = shard.slice();
  bool errored = false;
  while (true) {
    ringside::FrameHeader header;
    absl::Status s = ringside::ReadAll(fd, &header, sizeof(header), deadline);
    Require(!absl::IsDeadlineExceeded(s), "the shard ends the connection in time");
    if (!s.ok()) return;  // Closed (or reset) at a frame boundary or inside a header.
    switch (header.tag) {
      case ringside::kPsOk:
      case ringside::kPsDone:
      case ringside::kPsHeartbeat:
        Require(header.bytes == 0, "ok, done and heartbeat frames carry nothing");
        Require(!errored || header.tag != ringside::kPsOk, "no hello answer after an error");
        break;
      case ringside::kPsError: {
        Require(header.bytes >= sizeof(int32_t) && header.bytes <= sizeof(int32_t) + ringside::kMaxPsErrorBytes,
                "an error frame holds a code and a bounded message");
        std::string payload(header.bytes, '\0');
        s = ringside::ReadAll(fd, payload.data(), payload.size(), deadline);
        Require(!absl::IsDeadlineExceeded(s), "the shard ends the connection in time");
        if (!s.ok()) return;
        int32_t code;
        std::memcpy(&code, payload.data(), sizeof(code));
        Require(code != 0, "an error frame carries an error");
        errored = true;
        break;
      }
      case ringside::kPsParams: {
        ringside::ChunkRef ref;
        Require(header.bytes >= sizeof(ref), "a served chunk starts with its reference");
        s = ringside::ReadAll(fd, &ref, sizeof(ref), deadline);
        Require(!absl::IsDeadlineExceeded(s), "the shard ends the connection in time");
        if (!s.ok()) return;
        const int64_t expected = ringside::ChunkFrameBytes(slice.size, shard.chunk_floats(), ref.chunk);
        const int64_t encoded = ringside::ChunkFrameBytes(slice.size, shard.chunk_floats(), ref.chunk, wire);
        Require(expected >= 0 && (header.bytes == static_cast<uint64_t>(expected) ||
                                  header.bytes == static_cast<uint64_t>(encoded)),
                "a served chunk is its grid chunk's values, float32 or in the job's format");
        std::string floats(header.bytes - sizeof(ref), '\0');
        s = ringside::ReadAll(fd, floats.data(), floats.size(), deadline);
        Require(!absl::IsDeadlineExceeded(s), "the shard ends the connection in time");
        if (!s.ok()) return;
        break;
      }
      default:
        Require(false, "the shard sends only its own tags");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool with_token = (data[0] & 1) != 0;
  const bool valid_hello = (data[0] & 2) != 0;
  // Bits 2-3: the job's --compress (the shard decodes pushes and encodes replies).
  static const char* const kFormats[] = {"", "fp16", "bf16", ""};
  const std::string compress = kFormats[(data[0] >> 2) & 3];
  const ringside::WireFormat wire = ringside::ParseCompression(compress).value();
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  uint64_t session = 0;
  std::unique_ptr<ringside::Shard> shard = NewShard(compress, &session);
  if (valid_hello) {
    ringside::PsHello hello = {ringside::kPsHelloMagic, ringside::kPsWireVersion, 0,
                               with_token ? static_cast<uint32_t>(sizeof(kToken) - 1) : 0, session};
    const std::string rest = bytes.size() > sizeof(hello) ? bytes.substr(sizeof(hello)) : "";
    bytes = absl::StrCat(std::string(reinterpret_cast<const char*>(&hello), sizeof(hello)),
                         with_token ? kToken : "", rest);
  }
  {
    absl::StatusOr<std::unique_ptr<ringside::TcpDataServer>> server =
        ringside::TcpDataServer::Start(shard.get(), "127.0.0.1", with_token ? kToken : "");
    Require(server.ok(), "the data server starts");
    const absl::Time deadline = absl::Now() + kAnswerBound;
    absl::StatusOr<ringside::ScopedFd> fd =
        ringside::ConnectTcp("127.0.0.1", absl::StrCat((*server)->port()), deadline);
    Require(fd.ok(), "the data port accepts");
    // The shard may close early (an error): what it did not read is its to drop.
    ringside::WriteAll(fd->get(), bytes.data(), bytes.size(), deadline).IgnoreError();
    shutdown(fd->get(), SHUT_WR);
    CheckAnswer(fd->get(), *shard, wire, deadline);
  }  // The server stops (joining its threads) before the shard goes.
  return 0;
}
