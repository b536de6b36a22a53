// The parameter server's data plane on TCP (`--ps_transport=tcp`): the wire format both
// ends speak. gRPC keeps the control plane (Register, Barrier, Stats, Shutdown, Abort);
// the tensors (gradients in, parameters out, the initial push, the pulls) travel as
// frames of common/frame_io.h over one persistent connection per worker and shard.
//
// Protocol:
//   0. Register (gRPC) returns the shard's data port (RegisterResponse.data_port) and
//      the worker's session.
//   1. The worker connects to the data port and sends a PsHello, then the job's token
//      (hello.token_bytes bytes; none for an unauthenticated job). The shard checks the
//      magic and version, the token (constant time) and that (worker_id, session) is
//      the registered holder's (Shard::CheckSession), and answers one frame: kOk, or
//      kError and closes.
//   2. Then the worker sends requests, one at a time, each a frame whose payload starts
//      with a ChunkRef:
//        kPushPull chunk frames (GRADIENTS of `step`, any chunk order, each once) and
//          then kEndPush {step, chunk = chunks pushed}: the shard answers each chunk's
//          updated parameters as kParams frames {step + 1, chunk, PARAMS} as soon as the
//          sync mode releases them, then kDone;
//        kPush chunk frames (worker 0's PARAMS / OPTIMIZER_STATE) and then kEndPush:
//          the shard answers kDone;
//        kPull {step, chunk = -1, kind}: the shard answers every chunk as a kParams
//          frame in chunk order, then kDone.
//      Any failure is one kPsError frame {int32 absl status code, message} after
//      which the shard closes the connection; but a refused pull (nothing follows its
//      error frame) keeps it open for the next request. While a request waits on other workers
//      the shard sends kPsHeartbeat every KeepaliveFor(timeout).interval, so a worker
//      finds a stopped or hung shard (whose kernel still acknowledges TCP) after
//      interval + ack_timeout of silence, as gRPC's keepalive pings do.
//   A chunk frame's payload is the ChunkRef and then exactly the chunk's floats: its
//   byte count is checked against the shard's chunk grid before a float is read.
#ifndef RINGSIDE_PS_SERVER_TCP_WIRE_H_
#define RINGSIDE_PS_SERVER_TCP_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/frame_io.h"
#include "common/wire_format.h"
#include "ps_server/sharding.h"

namespace ringside {

inline constexpr uint32_t kPsHelloMagic = 0x53505352;  // "RSPS"
inline constexpr uint32_t kPsWireVersion = 1;

// Protocol step 1, worker to shard; the token follows.
struct PsHello {
  uint32_t magic;
  uint32_t version;
  int32_t worker_id;
  uint32_t token_bytes;
  uint64_t session;
};
static_assert(sizeof(PsHello) == 24, "the hello is 24 bytes");

// Frame tags (FrameHeader.tag) of the data plane.
enum PsOp : uint64_t {
  kPsOk = 1,        // Shard: the hello is accepted. No payload.
  kPsError = 2,     // Shard: int32 status code, then the message. Then it closes.
  kPsPushPull = 3,  // Worker: one gradient chunk of a push-pull.
  kPsPush = 4,      // Worker: one chunk of an initial push.
  kPsEndPush = 5,   // Worker: the pushes of a request are all out (ChunkRef.chunk: count).
  kPsPull = 6,      // Worker: a pull request (ChunkRef only).
  kPsParams = 7,    // Shard: one served chunk.
  kPsDone = 8,      // Shard: the request is complete. No payload.
  kPsHeartbeat = 9, // Shard: still here, waiting on other workers (no payload); sent
                    // every keepalive interval (rpc_keepalive.h) while a request waits.
};

// The start of every request and chunk frame's payload.
struct ChunkRef {
  int64_t step;
  int32_t chunk;  // Index on the shard's grid; kPsEndPush: chunks pushed; kPsPull: -1.
  int32_t kind;   // ps::TensorKind.
};
static_assert(sizeof(ChunkRef) == 16, "the chunk reference is 16 bytes");

// Longest error message and token either end accepts.
// Each data connection's kernel send buffer holds about this many chunks
// (CapSendBuffer), at both ends. A worker pushes to every shard at once and a shard
// answers every worker at once, over one link each; a shard answers a chunk only once
// every worker pushed it. With the kernel's auto-tuned buffers (megabytes) one
// connection's slice queues ahead of the others' and the worker's pacing
// (PsStrategy::WaitTurn) cannot keep the pushes abreast; the bytes standing in the
// queues also delay the last replies. Measured on emulated 38 Mbit/s links, 4 workers,
// 4 summation servers, a 3.5 MB model (docs/benchmarks.md): the pushes of one step
// reached a server up to 0.5 s apart and the step took 1.8x M / B; with the pacing and
// one chunk of buffer, 16-KiB chunks, 50 ms apart and 1.26x M / B.
inline constexpr int kPsSendBufferChunks = 1;

inline constexpr size_t kMaxPsErrorBytes = 4096;
inline constexpr size_t kMaxPsTokenBytes = 4096;

// The payload bytes of a chunk frame for chunk `k` of a slice of `size` floats on a grid
// of `chunk_floats`, its values in `format`; -1 when `k` is not on the grid.
int64_t ChunkFrameBytes(int64_t size, int64_t chunk_floats, int64_t k,
                        WireFormat format = WireFormat::kFp32);

// Sends one frame: header {op, sizeof(ChunkRef) + floats * 4}, `ref`, then `floats`
// floats at `data` (none for a request). Blocks until written or `deadline`.
absl::Status SendChunkFrame(int fd, PsOp op, const ChunkRef& ref, const float* data,
                            int64_t floats, absl::Time deadline);
// The same with the values in `format` (--compress): for fp16 / bf16 they are encoded
// into `scratch` (resized as needed; the caller's, reused) and the frame carries 2 bytes
// a value. kFp32: SendChunkFrame's frame.
absl::Status SendChunkFrame(int fd, PsOp op, const ChunkRef& ref, const float* data,
                            int64_t floats, WireFormat format, std::vector<uint16_t>* scratch,
                            absl::Time deadline);
// Reads a chunk frame's `floats` values in `format` into `out` (after its ChunkRef; the
// caller checked the frame's bytes against ChunkFrameBytes), decoding fp16 / bf16 through
// `scratch`. Blocks until read or `deadline`.
absl::Status ReadChunkValues(int fd, float* out, int64_t floats, WireFormat format,
                             std::vector<uint16_t>* scratch, absl::Time deadline);
// Sends a frame without payload (kPsOk, kPsDone).
absl::Status SendEmptyFrame(int fd, PsOp op, absl::Time deadline);
// Sends kPsError carrying `status` (its code and at most kMaxPsErrorBytes of message).
absl::Status SendErrorFrame(int fd, const absl::Status& status, absl::Time deadline);

// Reads one frame header before `deadline`. For kPsError, reads its payload too and
// returns the status it carries (never OK); an error frame longer than kMaxPsErrorBytes
// + 4 is DataLoss.
absl::StatusOr<FrameHeader> ReadFrameHeader(int fd, absl::Time deadline,
                                            const std::string& peer);

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_TCP_WIRE_H_
