#include "ps_server/tcp_wire.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/socket_io.h"
#include "common/status_macros.h"

namespace ringside {

int64_t ChunkFrameBytes(int64_t size, int64_t chunk_floats, int64_t k, WireFormat format) {
  if (k < 0 || k >= NumChunks(size, chunk_floats)) return -1;
  return static_cast<int64_t>(sizeof(ChunkRef)) +
         ChunkOf(size, chunk_floats, k).size * static_cast<int64_t>(WireBytesPerValue(format));
}

absl::Status SendChunkFrame(int fd, PsOp op, const ChunkRef& ref, const float* data,
                            int64_t floats, absl::Time deadline) {
  const size_t payload = floats * sizeof(float);
  FrameHeader header = {op, sizeof(ChunkRef) + payload};
  ChunkRef r = ref;
  iovec iov[3] = {{&header, sizeof(header)},
                  {&r, sizeof(r)},
                  {const_cast<float*>(data), payload}};
  return WriteAllVectored(fd, iov, payload > 0 ? 3 : 2, deadline);
}

absl::Status SendChunkFrame(int fd, PsOp op, const ChunkRef& ref, const float* data,
                            int64_t floats, WireFormat format, std::vector<uint16_t>* scratch,
                            absl::Time deadline) {
  if (format == WireFormat::kFp32 || floats == 0) return SendChunkFrame(fd, op, ref, data, floats, deadline);
  if (static_cast<int64_t>(scratch->size()) < floats) scratch->resize(floats);
  EncodeWire(format, data, floats, scratch->data());
  const size_t payload = floats * sizeof(uint16_t);
  FrameHeader header = {op, sizeof(ChunkRef) + payload};
  ChunkRef r = ref;
  iovec iov[3] = {{&header, sizeof(header)}, {&r, sizeof(r)}, {scratch->data(), payload}};
  return WriteAllVectored(fd, iov, 3, deadline);
}

absl::Status ReadChunkValues(int fd, float* out, int64_t floats, WireFormat format,
                             std::vector<uint16_t>* scratch, absl::Time deadline) {
  if (format == WireFormat::kFp32) return ReadAll(fd, out, floats * sizeof(float), deadline);
  if (static_cast<int64_t>(scratch->size()) < floats) scratch->resize(floats);
  RINGSIDE_RETURN_IF_ERROR(ReadAll(fd, scratch->data(), floats * sizeof(uint16_t), deadline));
  DecodeWire(format, scratch->data(), floats, out);
  return absl::OkStatus();
}

absl::Status SendEmptyFrame(int fd, PsOp op, absl::Time deadline) {
  FrameHeader header = {op, 0};
  iovec iov[1] = {{&header, sizeof(header)}};
  return WriteAllVectored(fd, iov, 1, deadline);
}

absl::Status SendErrorFrame(int fd, const absl::Status& status, absl::Time deadline) {
  const std::string message(
      status.message().substr(0, std::min(status.message().size(), kMaxPsErrorBytes)));
  int32_t code = static_cast<int32_t>(status.code());
  FrameHeader header = {kPsError, sizeof(code) + message.size()};
  iovec iov[3] = {{&header, sizeof(header)},
                  {&code, sizeof(code)},
                  {const_cast<char*>(message.data()), message.size()}};
  return WriteAllVectored(fd, iov, message.empty() ? 2 : 3, deadline);
}

absl::StatusOr<FrameHeader> ReadFrameHeader(int fd, absl::Time deadline,
                                            const std::string& peer) {
  FrameHeader header;
  RINGSIDE_RETURN_IF_ERROR(ReadAll(fd, &header, sizeof(header), deadline));
  if (header.tag != kPsError) return header;
  if (header.bytes < sizeof(int32_t) || header.bytes > sizeof(int32_t) + kMaxPsErrorBytes) {
    return absl::DataLossError(
        absl::StrCat(peer, " sent an error frame of ", header.bytes, " bytes"));
  }
  int32_t code = 0;
  std::string message(header.bytes - sizeof(code), '\0');
  RINGSIDE_RETURN_IF_ERROR(ReadAll(fd, &code, sizeof(code), deadline));
  RINGSIDE_RETURN_IF_ERROR(ReadAll(fd, message.data(), message.size(), deadline));
  if (code <= 0 || code > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    code = static_cast<int32_t>(absl::StatusCode::kUnknown);
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace ringside
