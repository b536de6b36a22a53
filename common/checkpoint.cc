#include "common/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace ringside {
namespace {

constexpr char kMagic[8] = {'R', 'I', 'N', 'G', 'C', 'K', 'P', 'T'};
// 2: the optimizer state is the carried momentum term (common/sgd.h); version 1 held
// PyTorch's momentum_buffer, which version 2 would misread, so it is refused.
constexpr uint32_t kVersion = 2;
// A header is a few hundred bytes; anything larger means a foreign or corrupt file.
constexpr uint32_t kMaxHeaderBytes = 1 << 20;

struct FileCloser {
  void operator()(FILE* f) const { if (f != nullptr) fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

uint32_t Crc(absl::Span<const float> a, absl::Span<const float> b) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib's crc32 takes uInt lengths: feed large blobs in pieces.
  auto feed = [&crc](absl::Span<const float> s) {
    const Bytef* p = reinterpret_cast<const Bytef*>(s.data());
    size_t left = s.size() * sizeof(float);
    while (left > 0) {
      const uInt n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
      crc = crc32(crc, p, n);
      p += n;
      left -= n;
    }
  };
  feed(a);
  feed(b);
  return static_cast<uint32_t>(crc);
}

absl::Status WriteAll(FILE* f, const void* data, size_t bytes, const std::string& path) {
  if (bytes > 0 && fwrite(data, 1, bytes, f) != bytes) {
    return absl::InternalError(
        absl::StrCat("cannot write checkpoint ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ReadAll(FILE* f, void* data, size_t bytes, const std::string& path,
                     absl::string_view what) {
  if (bytes > 0 && fread(data, 1, bytes, f) != bytes) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is truncated (reading ", what, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& path, CheckpointHeader header,
                             absl::Span<const float> params,
                             absl::Span<const float> optimizer_state) {
  header.set_num_params(static_cast<int64_t>(params.size()));
  header.set_num_optimizer_state(static_cast<int64_t>(optimizer_state.size()));
  header.set_crc32(Crc(params, optimizer_state));
  std::string header_bytes;
  if (!header.SerializeToString(&header_bytes)) {
    return absl::InternalError("cannot serialise checkpoint header");
  }
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    File f(fopen(tmp.c_str(), "wb"));
    if (f == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create checkpoint ", tmp, ": ", strerror(errno)));
    }
    const uint32_t version = kVersion;
    const uint32_t header_size = static_cast<uint32_t>(header_bytes.size());
    absl::Status s = WriteAll(f.get(), kMagic, sizeof(kMagic), tmp);
    if (s.ok()) s = WriteAll(f.get(), &version, sizeof(version), tmp);
    if (s.ok()) s = WriteAll(f.get(), &header_size, sizeof(header_size), tmp);
    if (s.ok()) s = WriteAll(f.get(), header_bytes.data(), header_bytes.size(), tmp);
    if (s.ok()) s = WriteAll(f.get(), params.data(), params.size() * sizeof(float), tmp);
    if (s.ok()) {
      s = WriteAll(f.get(), optimizer_state.data(), optimizer_state.size() * sizeof(float), tmp);
    }
    if (s.ok() && (fflush(f.get()) != 0 || fsync(fileno(f.get())) != 0)) {
      s = absl::InternalError(absl::StrCat("cannot flush checkpoint ", tmp, ": ", strerror(errno)));
    }
    if (!s.ok()) {
      f.reset();
      unlink(tmp.c_str());
      return s;
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename checkpoint into ", path, ": ", strerror(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  File f(fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("no checkpoint at ", path));
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open checkpoint ", path, ": ", strerror(err)));
  }
  char magic[sizeof(kMagic)];
  uint32_t version = 0;
  uint32_t header_size = 0;
  if (fread(magic, 1, sizeof(magic), f.get()) != sizeof(magic) ||
      memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path, " is not a ringside checkpoint"));
  }
  if (absl::Status s = ReadAll(f.get(), &version, sizeof(version), path, "version"); !s.ok()) return s;
  if (version != kVersion) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " has format version ", version, ", expected ", kVersion));
  }
  if (absl::Status s = ReadAll(f.get(), &header_size, sizeof(header_size), path, "header size"); !s.ok()) return s;
  if (header_size > kMaxHeaderBytes) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " has a corrupt header"));
  }
  std::string header_bytes(header_size, '\0');
  if (absl::Status s = ReadAll(f.get(), header_bytes.data(), header_size, path, "header"); !s.ok()) return s;
  Checkpoint ckpt;
  if (!ckpt.header.ParseFromString(header_bytes) || ckpt.header.num_params() < 0 ||
      ckpt.header.num_optimizer_state() < 0) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " has a corrupt header"));
  }
  // Check the sizes against the file before allocating.
  const long data_start = ftell(f.get());
  if (fseek(f.get(), 0, SEEK_END) != 0) {
    return absl::DataLossError(absl::StrCat("cannot seek in checkpoint ", path));
  }
  const long file_size = ftell(f.get());
  const unsigned __int128 expected =
      (static_cast<unsigned __int128>(ckpt.header.num_params()) +
       static_cast<unsigned __int128>(ckpt.header.num_optimizer_state())) * sizeof(float);
  if (expected != static_cast<unsigned __int128>(file_size - data_start)) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", path, " is truncated or padded: ", file_size - data_start,
        " data bytes, header says ", static_cast<uint64_t>(expected)));
  }
  fseek(f.get(), data_start, SEEK_SET);
  ckpt.params.resize(ckpt.header.num_params());
  ckpt.optimizer_state.resize(ckpt.header.num_optimizer_state());
  if (absl::Status s = ReadAll(f.get(), ckpt.params.data(), ckpt.params.size() * sizeof(float), path, "parameters"); !s.ok()) return s;
  if (absl::Status s = ReadAll(f.get(), ckpt.optimizer_state.data(), ckpt.optimizer_state.size() * sizeof(float), path, "optimizer state"); !s.ok()) return s;
  if (Crc(ckpt.params, ckpt.optimizer_state) != ckpt.header.crc32()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " fails its checksum"));
  }
  return ckpt;
}

}  // namespace ringside
