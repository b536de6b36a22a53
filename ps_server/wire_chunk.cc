#include "ps_server/wire_chunk.h"

#include <algorithm>
#include <cstring>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace ringside {
namespace {

using google::protobuf::io::CodedOutputStream;
using google::protobuf::internal::WireFormatLite;

// ps.proto's Chunk field numbers.
constexpr int kWorkerId = 1;
constexpr int kStep = 2;
constexpr int kKind = 3;
constexpr int kOffset = 4;
constexpr int kData = 5;
constexpr int kSession = 6;

constexpr uint32_t Tag(int field, WireFormatLite::WireType type) {
  return static_cast<uint32_t>(field << 3) | static_cast<uint32_t>(type);
}

// Reads bytes across a sequence of slices.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) { SkipEmpty(); }
  bool done() const { return slice_ >= slices_.size(); }
  size_t slice() const { return slice_; }
  size_t offset() const { return offset_; }

  bool ReadByte(uint8_t* b) {
    if (done()) return false;
    *b = slices_[slice_].begin()[offset_];
    Advance(1);
    return true;
  }
  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!ReadByte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // A little-endian fixed64.
  bool ReadFixed64(uint64_t* v) {
    *v = 0;
    for (int i = 0; i < 8; ++i) {
      uint8_t b;
      if (!ReadByte(&b)) return false;
      *v |= static_cast<uint64_t>(b) << (8 * i);
    }
    return true;
  }
  bool Skip(size_t n) {
    while (n > 0) {
      if (done()) return false;
      const size_t step = std::min(n, slices_[slice_].size() - offset_);
      Advance(step);
      n -= step;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    if (offset_ == slices_[slice_].size()) {
      ++slice_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (slice_ < slices_.size() && slices_[slice_].size() == 0) ++slice_;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;
};

}  // namespace

void WireChunk::BorrowPayload(const void* data, size_t bytes) {
  out_payload_ = grpc::Slice(data, bytes, grpc::Slice::STATIC_SLICE);
  payload_size_ = bytes;
  received_bytes_ = -1;
}

void WireChunk::CopyPayload(const void* data, size_t bytes) {
  out_payload_ = grpc::Slice(data, bytes);
  payload_size_ = bytes;
  received_bytes_ = -1;
}

void WireChunk::CopyPayloadTo(void* dst) const {
  PayloadReader(*this).Read(dst, payload_size_);
}

WireChunk::PayloadReader::PayloadReader(const WireChunk& chunk)
    : slices_(chunk.in_slices_),
      slice_(chunk.in_first_slice_),
      offset_(chunk.in_first_offset_),
      left_(chunk.payload_size_) {}

size_t WireChunk::PayloadReader::Read(void* dst, size_t max_bytes) {
  char* out = static_cast<char*>(dst);
  size_t want = std::min(max_bytes, left_);
  const size_t total = want;
  while (want > 0 && slice_ < slices_.size()) {
    const size_t n = std::min(want, slices_[slice_].size() - offset_);
    std::memcpy(out, slices_[slice_].begin() + offset_, n);
    out += n;
    want -= n;
    offset_ += n;
    if (offset_ == slices_[slice_].size()) {
      ++slice_;
      offset_ = 0;
    }
  }
  // Parse checked that the slices hold the whole payload.
  const size_t copied = total - want;
  left_ -= copied;
  return copied;
}

int64_t WireChunk::EncodedBytes(int32_t worker_id, int64_t step, ps::TensorKind kind, int64_t offset,
                                uint64_t session, size_t payload_bytes) {
  // One byte per tag (fields 1-6), Serialize's varints, the fixed64 session if any.
  const size_t header = 1 + CodedOutputStream::VarintSize32SignExtended(worker_id) +
                        1 + CodedOutputStream::VarintSize64(static_cast<uint64_t>(step)) +
                        1 + CodedOutputStream::VarintSize32SignExtended(kind) +
                        1 + CodedOutputStream::VarintSize64(static_cast<uint64_t>(offset)) +
                        1 + CodedOutputStream::VarintSize64(payload_bytes) + (session != 0 ? 1 + 8 : 0);
  return static_cast<int64_t>(header + payload_bytes);
}

size_t WireChunk::header_size() const {
  return static_cast<size_t>(EncodedBytes(worker_id, step, kind, offset, session, payload_size_)) -
         payload_size_;
}

grpc::Status WireChunk::Serialize(grpc::ByteBuffer* out) const {
  // Header: fields 1-4 and field 5's tag and length; then the payload slice as is.
  uint8_t header[80];  // At most 6 tags and 5 varints of 10 bytes and a fixed64: 69.
  uint8_t* p = header;
  p = CodedOutputStream::WriteTagToArray(Tag(kWorkerId, WireFormatLite::WIRETYPE_VARINT), p);
  p = CodedOutputStream::WriteVarint64ToArray(static_cast<uint64_t>(static_cast<int64_t>(worker_id)), p);
  p = CodedOutputStream::WriteTagToArray(Tag(kStep, WireFormatLite::WIRETYPE_VARINT), p);
  p = CodedOutputStream::WriteVarint64ToArray(static_cast<uint64_t>(step), p);
  p = CodedOutputStream::WriteTagToArray(Tag(kKind, WireFormatLite::WIRETYPE_VARINT), p);
  p = CodedOutputStream::WriteVarint64ToArray(static_cast<uint64_t>(static_cast<int64_t>(kind)), p);
  p = CodedOutputStream::WriteTagToArray(Tag(kOffset, WireFormatLite::WIRETYPE_VARINT), p);
  p = CodedOutputStream::WriteVarint64ToArray(static_cast<uint64_t>(offset), p);
  if (session != 0) {  // proto3: a zero is not on the wire.
    p = CodedOutputStream::WriteTagToArray(Tag(kSession, WireFormatLite::WIRETYPE_FIXED64), p);
    p = CodedOutputStream::WriteLittleEndian64ToArray(session, p);
  }
  p = CodedOutputStream::WriteTagToArray(Tag(kData, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), p);
  p = CodedOutputStream::WriteVarint64ToArray(payload_size_, p);
  grpc::Slice slices[2] = {grpc::Slice(header, static_cast<size_t>(p - header)), out_payload_};
  grpc::ByteBuffer buffer(slices, payload_size_ > 0 ? 2 : 1);
  out->Swap(&buffer);
  return grpc::Status::OK;
}

grpc::Status WireChunk::Parse(grpc::ByteBuffer* in) {
  worker_id = 0;
  step = 0;
  kind = ps::GRADIENTS;
  offset = 0;
  session = 0;
  payload_size_ = 0;
  in_first_slice_ = 0;
  in_first_offset_ = 0;
  in_slices_.clear();
  received_bytes_ = static_cast<int64_t>(in->Length());
  grpc::Status dumped = in->Dump(&in_slices_);
  in->Clear();
  if (!dumped.ok()) return dumped;
  const grpc::Status bad(grpc::StatusCode::INTERNAL, "malformed Chunk message");
  // Fields in any order, unknown ones skipped, as a protobuf parser would.
  SliceCursor cursor(in_slices_);
  while (!cursor.done()) {
    uint64_t tag, v;
    if (!cursor.ReadVarint(&tag)) return bad;
    const int field = static_cast<int>(tag >> 3);
    switch (static_cast<WireFormatLite::WireType>(tag & 7)) {
      case WireFormatLite::WIRETYPE_VARINT:
        if (!cursor.ReadVarint(&v)) return bad;
        if (field == kWorkerId) worker_id = static_cast<int32_t>(v);
        if (field == kStep) step = static_cast<int64_t>(v);
        if (field == kKind) kind = static_cast<ps::TensorKind>(static_cast<int32_t>(v));
        if (field == kOffset) offset = static_cast<int64_t>(v);
        break;
      case WireFormatLite::WIRETYPE_FIXED64:
        if (!cursor.ReadFixed64(&v)) return bad;
        if (field == kSession) session = v;
        break;
      case WireFormatLite::WIRETYPE_FIXED32:
        if (!cursor.Skip(4)) return bad;
        break;
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED:
        if (!cursor.ReadVarint(&v)) return bad;
        if (field == kData) {
          payload_size_ = static_cast<size_t>(v);
          in_first_slice_ = cursor.slice();
          in_first_offset_ = cursor.offset();
        }
        if (!cursor.Skip(static_cast<size_t>(v))) return bad;
        break;
      default:
        return bad;
    }
  }
  return grpc::Status::OK;
}

}  // namespace ringside
