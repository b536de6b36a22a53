// Fuzz entry point for chunk reassembly on the PS hot path (ps_server/wire_chunk.h):
// a Chunk message received as gRPC slices cut at arbitrary places.
//
// Input: byte 0 = number of cuts K (mod 8), then K bytes placing the cuts (each a
// position in 1/256ths of the message), then the message. WireChunk::Parse must never
// read outside the slices; when it accepts, the payload read whole (CopyPayloadTo) and
// in blocks of every size (PayloadReader) must be the same bytes, and, where protobuf
// also parses the message as a ps::Chunk, the fields must be protobuf's. The header is
// then placed on the shard's chunk grid (ps_server/sharding.h) as the shard does: a
// chunk index found for the offset must name a chunk starting there, inside the slice.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "grpc/grpc.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "ps_server/ps.pb.h"
#include "ps_server/sharding.h"
#include "ps_server/wire_chunk.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using ringside::fuzz::Require;

// Sets gRPC's codegen interface, which ByteBuffer and Slice call through.
grpc::internal::GrpcLibraryInitializer g_grpc_initializer;

void CheckGrid(const ringside::WireChunk& chunk, size_t payload_floats) {
  // A slice as large as the payload suggests, on a grid of 1..64 floats.
  const int64_t size = static_cast<int64_t>(std::min<size_t>(payload_floats, 1 << 20)) + 1;
  const int64_t chunk_floats = (chunk.worker_id & 63) + 1;
  const int64_t k = ringside::ChunkIndexAt(size, chunk_floats, chunk.offset);
  if (k < 0) return;
  Require(k < ringside::NumChunks(size, chunk_floats), "chunk index in range");
  const ringside::Slice c = ringside::ChunkOf(size, chunk_floats, k);
  Require(c.offset == chunk.offset && c.size > 0 && c.offset + c.size <= size,
          "chunk on the grid, inside the slice");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const bool grpc_ready = (grpc_init(), true);  // Once, for the whole run.
  (void)grpc_ready;
  const size_t cuts = std::min<size_t>(data[0] & 7, size - 1);
  const uint8_t* message = data + 1 + cuts;
  const size_t length = size - 1 - cuts;
  std::vector<size_t> at = {0, length};
  for (size_t i = 0; i < cuts; ++i) at.push_back(length * data[1 + i] / 256);
  std::sort(at.begin(), at.end());
  // Empty slices included: gRPC may hand those over too.
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i + 1 < at.size(); ++i) {
    slices.emplace_back(message + at[i], at[i + 1] - at[i]);
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  ringside::WireChunk chunk;
  if (!chunk.Parse(&buffer).ok()) return 0;

  const size_t n = chunk.payload_size();
  Require(n <= length, "payload inside the message");
  Require(chunk.wire_bytes() == static_cast<int64_t>(length), "wire bytes as received");
  std::string whole(n, '\0');
  chunk.CopyPayloadTo(whole.data());
  const size_t block = 1 + (length % 61);
  ringside::WireChunk::PayloadReader reader(chunk);
  std::string pieces;
  std::vector<char> buf(block);
  while (size_t got = reader.Read(buf.data(), block)) pieces.append(buf.data(), got);
  Require(reader.bytes_left() == 0 && pieces == whole, "blocks give the whole payload");

  ringside::ps::Chunk proto;
  if (proto.ParseFromArray(message, static_cast<int>(length))) {
    Require(proto.worker_id() == chunk.worker_id && proto.step() == chunk.step &&
                proto.kind() == chunk.kind && proto.offset() == chunk.offset &&
                proto.data() == whole,
            "fields as protobuf parses them");
  }
  CheckGrid(chunk, n / sizeof(float));
  return 0;
}
