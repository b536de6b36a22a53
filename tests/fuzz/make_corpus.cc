// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) with the
// project's own writers, so the seeds follow a format change when they are remade:
//   bazel run //tests/fuzz:make_corpus -- "$PWD/tests/fuzz/corpus"
// The spec seeds are copies of experiments/matrix/specs/*.textproto (not written
// here). Exit status 0, or 1 naming what could not be written.
#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/byte_buffer.h"
#include "common/wire_format.h"
#include "ps_server/sharding.h"
#include "ps_server/tcp_wire.h"
#include "ps_server/wire_chunk.h"

namespace {

grpc::internal::GrpcLibraryInitializer g_grpc_initializer;

bool Write(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  const bool ok = f != nullptr && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (f != nullptr && std::fclose(f) != 0) return false;
  if (!ok) std::fprintf(stderr, "make_corpus: cannot write %s\n", path.c_str());
  return ok;
}

void BigEndian32(uint32_t v, std::string* out) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

std::string Images(uint32_t count, uint32_t rows, uint32_t cols) {
  std::string out;
  BigEndian32(0x803, &out);
  BigEndian32(count, &out);
  BigEndian32(rows, &out);
  BigEndian32(cols, &out);
  for (uint32_t i = 0; i < count * rows * cols; ++i) out.push_back(static_cast<char>(i * 37));
  return out;
}

std::string Labels(uint32_t count, int classes) {
  std::string out;
  BigEndian32(0x801, &out);
  BigEndian32(count, &out);
  for (uint32_t i = 0; i < count; ++i) out.push_back(static_cast<char>(i % classes));
  return out;
}

std::string Gzip(const std::string& bytes) {
  std::string out(compressBound(bytes.size()) + 32, '\0');
  z_stream z = {};
  deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // gzip
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Four IDX files joined as idx_fuzzer.cc reads them.
std::string IdxSet(const std::vector<std::string>& files) {
  std::string out;
  for (size_t i = 0; i < files.size(); ++i) absl::StrAppend(&out, i > 0 ? "|IDX|" : "", files[i]);
  return out;
}

std::string SerializedChunk(int32_t worker, int64_t step, ringside::ps::TensorKind kind,
                            int64_t offset, const std::vector<float>& payload, uint8_t cuts) {
  ringside::WireChunk chunk;
  chunk.worker_id = worker;
  chunk.step = step;
  chunk.kind = kind;
  chunk.offset = offset;
  chunk.CopyPayload(payload.data(), payload.size() * sizeof(float));
  grpc::ByteBuffer buffer;
  chunk.Serialize(&buffer);
  std::vector<grpc::Slice> slices;
  buffer.Dump(&slices);
  std::string out(1, static_cast<char>(cuts & 7));
  for (uint8_t i = 0; i < (cuts & 7); ++i) out.push_back(static_cast<char>(40 * (i + 1)));
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

}  // namespace

// The TCP data plane (ps_tcp_fuzzer.cc's input): one frame, its ChunkRef and `values`
// values of 0.25 in `format` (float32, or --compress's 2-byte codes).
std::string TcpFrame(uint64_t op, int64_t step, int32_t chunk, int32_t kind, int64_t values,
                     ringside::WireFormat format = ringside::WireFormat::kFp32) {
  const ringside::ChunkRef ref = {step, chunk, kind};
  const ringside::FrameHeader header = {op, sizeof(ref) + values * ringside::WireBytesPerValue(format)};
  std::string out(reinterpret_cast<const char*>(&header), sizeof(header));
  out.append(reinterpret_cast<const char*>(&ref), sizeof(ref));
  const std::vector<float> data(values, 0.25f);
  if (format == ringside::WireFormat::kFp32) {
    out.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  } else {
    std::vector<uint16_t> codes(values);
    ringside::EncodeWire(format, data.data(), values, codes.data());
    out.append(reinterpret_cast<const char*>(codes.data()), codes.size() * sizeof(uint16_t));
  }
  return out;
}

// Every chunk of a `kind` push (op kPsPush or kPsPushPull) of `step` on the fuzzer's
// grid (11 floats in chunks of 4), values in `format`, then kPsEndPush.
std::string TcpPush(uint64_t op, int64_t step, int32_t kind,
                    ringside::WireFormat format = ringside::WireFormat::kFp32) {
  constexpr int64_t kSize = 11, kChunkFloats = 4;
  std::string out;
  const int64_t n = ringside::NumChunks(kSize, kChunkFloats);
  for (int64_t k = n - 1; k >= 0; --k) {
    out += TcpFrame(op, step, static_cast<int32_t>(k), kind, ringside::ChunkOf(kSize, kChunkFloats, k).size, format);
  }
  return out + TcpFrame(ringside::kPsEndPush, step, static_cast<int32_t>(n), kind, 0);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus CORPUS_DIR\n");
    return 1;
  }
  const std::string root = argv[1];
  for (const char* sub : {"", "/idx", "/checkpoint", "/wire_chunk", "/ps_tcp"}) {
    mkdir((root + sub).c_str(), 0755);
  }
  bool ok = true;

  // IDX: a tiny valid set, its gzipped twin, a one-class set and a mismatched one.
  const std::vector<std::string> plain = {Images(6, 2, 3), Labels(6, 3), Images(4, 2, 3),
                                          Labels(4, 3)};
  ok &= Write(root + "/idx/valid", IdxSet(plain));
  ok &= Write(root + "/idx/valid_gz", IdxSet({Gzip(plain[0]), Gzip(plain[1]), Gzip(plain[2]),
                                              Gzip(plain[3])}));
  ok &= Write(root + "/idx/one_class", IdxSet({Images(2, 1, 1), Labels(2, 1), Images(1, 1, 1),
                                               Labels(1, 1)}));
  ok &= Write(root + "/idx/count_mismatch", IdxSet({Images(3, 2, 2), Labels(2, 2),
                                                    Images(1, 2, 2), Labels(1, 2)}));

  // Checkpoints as the trainer writes them.
  ringside::CheckpointHeader header;
  header.set_model("mlp:8");
  header.set_step(7);
  header.set_epoch(1);
  header.set_batch_in_epoch(3);
  const std::string ckpt = root + "/checkpoint/";
  ok &= ringside::WriteCheckpoint(ckpt + "small", header, {1.0f, -2.0f, 3.5f}, {0.25f, 0.5f, 0.0f}).ok();
  ok &= ringside::WriteCheckpoint(ckpt + "no_optimizer_state", header, {1.0f}, {}).ok();
  ok &= ringside::WriteCheckpoint(ckpt + "empty", ringside::CheckpointHeader(), {}, {}).ok();

  // Chunks as workers send them, whole and cut into slices.
  const std::vector<float> four = {1, 2, 3, 4};
  ok &= Write(root + "/wire_chunk/gradients", SerializedChunk(1, 5, ringside::ps::GRADIENTS, 8, four, 0));
  ok &= Write(root + "/wire_chunk/params_cut", SerializedChunk(0, 0, ringside::ps::PARAMS, 0, four, 3));
  ok &= Write(root + "/wire_chunk/empty_payload", SerializedChunk(2, 1, ringside::ps::OPTIMIZER_STATE, 4, {}, 1));
  ok &= Write(root + "/wire_chunk/negative", SerializedChunk(-1, -1, ringside::ps::GRADIENTS, -4, {0.5f}, 2));

  // The TCP data plane: flag byte (bit 0 token, bit 1 valid hello; ps_tcp_fuzzer.cc),
  // a placeholder hello the fuzzer fills in, then a worker's requests: worker 0's
  // initial push, a pull, a push-pull of step 0 and a pull of step 1.
  const std::string hello(sizeof(ringside::PsHello), '\0');
  const std::string job = TcpPush(ringside::kPsPush, 0, ringside::ps::PARAMS) +
                          TcpFrame(ringside::kPsPull, 0, -1, ringside::ps::PARAMS, 0) +
                          TcpPush(ringside::kPsPushPull, 0, ringside::ps::GRADIENTS) +
                          TcpFrame(ringside::kPsPull, 1, -1, ringside::ps::PARAMS, 0);
  ok &= Write(root + "/ps_tcp/job", std::string("\x02") + hello + job);
  ok &= Write(root + "/ps_tcp/job_with_token", std::string("\x03") + hello + job);
  // The same job with --compress=fp16 (flag bits 2-3 = 1) and bf16 (= 2): the push-pull's
  // gradients in 2-byte codes; the initial push and the pulls stay float32.
  for (const auto& [name, flag, format] :
       {std::tuple<const char*, char, ringside::WireFormat>{"job_fp16", '\x06', ringside::WireFormat::kFp16},
        {"job_bf16", '\x0a', ringside::WireFormat::kBf16}}) {
    ok &= Write(root + "/ps_tcp/" + name,
                std::string(1, flag) + hello + TcpPush(ringside::kPsPush, 0, ringside::ps::PARAMS) +
                    TcpFrame(ringside::kPsPull, 0, -1, ringside::ps::PARAMS, 0) +
                    TcpPush(ringside::kPsPushPull, 0, ringside::ps::GRADIENTS, format) +
                    TcpFrame(ringside::kPsPull, 1, -1, ringside::ps::PARAMS, 0));
  }
  ok &= Write(root + "/ps_tcp/hello_only", std::string("\x02") + hello);
  ok &= Write(root + "/ps_tcp/not_ringside", std::string(1, '\0') + "GET / HTTP/1.1\r\n\r\n");
  ok &= Write(root + "/ps_tcp/short_chunk",
              std::string("\x02") + hello + TcpFrame(ringside::kPsPush, 0, 1, ringside::ps::PARAMS, 3));
  if (!ok) return 1;
  std::printf("make_corpus: seeds written under %s\n", root.c_str());
  return 0;
}
