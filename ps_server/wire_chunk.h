// The hot path's Chunk (ps.proto) without payload copies. Serialising a ps::Chunk
// copies its payload twice (into the message's string, then into gRPC's buffer) and
// parsing copies it again; at loopback speeds those copies cost as much as the
// transfer. WireChunk writes the same bytes on the wire (a valid ps.Chunk encoding),
// but its payload is a gRPC slice borrowed from the caller's memory on the way out,
// and the received slices themselves on the way in, so the payload is copied once, by
// the receiver, straight to where it belongs.
//
// gRPC picks this codec through the grpc::SerializationTraits specialisation below;
// PushPull's client and server use it (see ps_service.cc and shard_client.cc).
#ifndef RINGSIDE_PS_SERVER_WIRE_CHUNK_H_
#define RINGSIDE_PS_SERVER_WIRE_CHUNK_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/impl/serialization_traits.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"
#include "ps_server/ps.pb.h"

namespace ringside {

class WireChunk {
 public:
  int32_t worker_id = 0;
  int64_t step = 0;
  ps::TensorKind kind = ps::GRADIENTS;
  int64_t offset = 0;  // Floats, relative to the shard's slice.
  uint64_t session = 0;  // ps.proto's Chunk.session (0: absent on the wire).

  // Sending. Borrows `bytes` bytes at `data`: they must stay unchanged until the call
  // this chunk is written on has finished (the receiver has then read them).
  void BorrowPayload(const void* data, size_t bytes);
  // Sending. Copies the payload into a buffer gRPC owns (for memory that may change
  // before the call ends).
  void CopyPayload(const void* data, size_t bytes);

  // Receiving: payload size, and its bytes copied to `dst` (payload_size() bytes).
  size_t payload_size() const { return payload_size_; }
  void CopyPayloadTo(void* dst) const;

  // Receiving, in pieces: reads the payload front to back across the received slices,
  // so a consumer can take it in cache-sized blocks instead of copying it whole first
  // (Shard::Accept does). The chunk must outlive the reader and stay unchanged.
  class PayloadReader {
   public:
    explicit PayloadReader(const WireChunk& chunk);
    // Copies the next min(max_bytes, bytes_left()) payload bytes to `dst`; returns
    // how many (0 once the payload is consumed).
    size_t Read(void* dst, size_t max_bytes);
    size_t bytes_left() const { return left_; }

   private:
    const std::vector<grpc::Slice>& slices_;
    size_t slice_;
    size_t offset_;
    size_t left_;
  };

  // The serialised size of a chunk with these fields and `payload_bytes` of payload:
  // every field is written, zeros too, but a zero session (proto3 leaves it out).
  // `ringside explain ps` predicts the PS's bytes with it.
  static int64_t EncodedBytes(int32_t worker_id, int64_t step, ps::TensorKind kind, int64_t offset,
                              uint64_t session, size_t payload_bytes);

  // Serialised size (what the statistics count as wire bytes): as received, or as it
  // will be sent.
  int64_t wire_bytes() const {
    return received_bytes_ >= 0 ? received_bytes_
                                : static_cast<int64_t>(header_size() + payload_size_);
  }

  // Codec, used by the SerializationTraits below. Parse refuses (INTERNAL) a message
  // that is not a valid Chunk encoding; it checks neither the header nor the payload's
  // length against a shard (Shard::CheckChunk does, before anything is accepted).
  grpc::Status Serialize(grpc::ByteBuffer* out) const;
  grpc::Status Parse(grpc::ByteBuffer* in);

 private:
  size_t header_size() const;

  // Outgoing payload: one slice (borrowed or owned).
  grpc::Slice out_payload_;
  // Incoming payload: the received slices and where in them it starts.
  std::vector<grpc::Slice> in_slices_;
  size_t in_first_slice_ = 0;
  size_t in_first_offset_ = 0;
  size_t payload_size_ = 0;
  int64_t received_bytes_ = -1;  // Size of the parsed message (0 for an empty one); -1 when not parsed.
};

}  // namespace ringside

namespace grpc {

template <>
class SerializationTraits<ringside::WireChunk, void> {
 public:
  static Status Serialize(const ringside::WireChunk& msg, ByteBuffer* bb, bool* own_buffer) {
    *own_buffer = true;
    return msg.Serialize(bb);
  }
  static Status Deserialize(ByteBuffer* buffer, ringside::WireChunk* msg) {
    return msg->Parse(buffer);
  }
};

}  // namespace grpc

#endif  // RINGSIDE_PS_SERVER_WIRE_CHUNK_H_
