#include "common/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringside {
namespace {

constexpr char kMagic[8] = {'R', 'I', 'N', 'G', 'C', 'K', 'P', 'T'};
// 3: a trailing crc32 covers every byte before it (magic, version, header, blobs).
// 2 had the checksum in the header, over the blobs only (an edited step went
// unnoticed); 1 held PyTorch's momentum_buffer. Both are refused.
constexpr uint32_t kVersion = 3;
// magic | version | header bytes.
constexpr uint64_t kPrefixBytes = sizeof(kMagic) + 2 * sizeof(uint32_t);
constexpr uint64_t kTrailerBytes = sizeof(uint32_t);
// A header is a few hundred bytes; anything larger means a foreign or corrupt file.
constexpr uint32_t kMaxHeaderBytes = 1 << 20;
// checkpoint.<step>.bin: a kept older checkpoint.
constexpr char kKeptPrefix[] = "checkpoint.";
constexpr char kKeptSuffix[] = ".bin";

struct FileCloser {
  void operator()(FILE* f) const { if (f != nullptr) fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

// Running zlib crc32; zlib takes uInt lengths, so large spans go in pieces.
class Crc {
 public:
  void Add(const void* data, size_t bytes) {
    const Bytef* p = static_cast<const Bytef*>(data);
    while (bytes > 0) {
      const uInt n = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
      crc_ = crc32(crc_, p, n);
      p += n;
      bytes -= n;
    }
  }
  uint32_t value() const { return static_cast<uint32_t>(crc_); }

 private:
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

// Where Parse reads from: exactly `size` bytes in all. Read copies the next `bytes`
// into `data`; false when fewer are left (the file shrank under us).
class Source {
 public:
  virtual ~Source() = default;
  virtual bool Read(void* data, size_t bytes) = 0;
};

class BufferSource final : public Source {
 public:
  explicit BufferSource(absl::string_view bytes) : bytes_(bytes) {}
  bool Read(void* data, size_t bytes) override {
    if (bytes > bytes_.size() - pos_) return false;
    if (bytes > 0) std::memcpy(data, bytes_.data() + pos_, bytes);
    pos_ += bytes;
    return true;
  }

 private:
  const absl::string_view bytes_;
  size_t pos_ = 0;
};

class FileSource final : public Source {
 public:
  explicit FileSource(FILE* f) : f_(f) {}
  bool Read(void* data, size_t bytes) override {
    return bytes == 0 || fread(data, 1, bytes, f_) == bytes;
  }

 private:
  FILE* const f_;
};

absl::Status Corrupt(absl::string_view name, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("checkpoint ", name, " ", what));
}

// Parses a checkpoint of `size` bytes from `in`. Every length and count is checked
// against `size` before anything is allocated or read.
absl::StatusOr<Checkpoint> Parse(Source& in, uint64_t size, absl::string_view name) {
  Crc crc;
  auto read = [&](void* data, size_t bytes, absl::string_view what) -> absl::Status {
    if (!in.Read(data, bytes)) {
      return Corrupt(name, absl::StrCat("is truncated (reading its ", what, ")"));
    }
    crc.Add(data, bytes);
    return absl::OkStatus();
  };
  char magic[sizeof(kMagic)] = {};
  const size_t magic_bytes = static_cast<size_t>(std::min<uint64_t>(size, sizeof(kMagic)));
  if (absl::Status s = read(magic, magic_bytes, "magic"); !s.ok()) return s;
  if (std::memcmp(magic, kMagic, magic_bytes) != 0) {
    return absl::DataLossError(absl::StrCat(name, " is not a ringside checkpoint"));
  }
  if (size < kPrefixBytes + kTrailerBytes) {
    return Corrupt(name, absl::StrCat("is truncated: ", size, " bytes, a checkpoint has at least ",
                                      kPrefixBytes + kTrailerBytes));
  }
  uint32_t version = 0;
  uint32_t header_bytes = 0;
  if (absl::Status s = read(&version, sizeof(version), "version"); !s.ok()) return s;
  if (version != kVersion) {
    return Corrupt(name, absl::StrCat(
        "has format version ", version, ", this build reads version ", kVersion,
        version < kVersion ? " (older files are refused: their checksum did not cover the "
                             "header; start over without --resume)"
                           : ""));
  }
  if (absl::Status s = read(&header_bytes, sizeof(header_bytes), "header length"); !s.ok()) return s;
  if (header_bytes == 0 || header_bytes > kMaxHeaderBytes ||
      header_bytes > size - kPrefixBytes - kTrailerBytes) {
    return Corrupt(name, absl::StrCat("is truncated or damaged: a header of ", header_bytes,
                                      " bytes does not fit its ", size, " bytes"));
  }
  std::string header(header_bytes, '\0');
  if (absl::Status s = read(header.data(), header.size(), "header"); !s.ok()) return s;
  Checkpoint ckpt;
  CheckpointHeader& h = ckpt.header;
  if (!h.ParseFromString(header)) return Corrupt(name, "has a header that does not parse");
  const uint64_t data_bytes = size - kPrefixBytes - header_bytes - kTrailerBytes;
  const uint64_t max_floats = data_bytes / sizeof(float);
  if (h.num_params() < 0 || h.num_optimizer_state() < 0 ||
      static_cast<uint64_t>(h.num_params()) > max_floats ||
      static_cast<uint64_t>(h.num_optimizer_state()) > max_floats - h.num_params() ||
      (static_cast<uint64_t>(h.num_params()) + h.num_optimizer_state()) * sizeof(float) !=
          data_bytes) {
    return Corrupt(name, absl::StrCat("is truncated or padded: it holds ", data_bytes,
                                      " data bytes, its header says ", h.num_params(),
                                      " parameters and ", h.num_optimizer_state(),
                                      " optimizer floats"));
  }
  ckpt.params.resize(h.num_params());
  ckpt.optimizer_state.resize(h.num_optimizer_state());
  if (absl::Status s = read(ckpt.params.data(), ckpt.params.size() * sizeof(float), "parameters");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = read(ckpt.optimizer_state.data(),
                            ckpt.optimizer_state.size() * sizeof(float), "optimizer state");
      !s.ok()) {
    return s;
  }
  const uint32_t computed = crc.value();
  uint32_t stored = 0;
  if (!in.Read(&stored, sizeof(stored))) return Corrupt(name, "is truncated (reading its checksum)");
  if (stored != computed) {
    return Corrupt(name, absl::StrFormat("fails its checksum (stored %08x, computed %08x)",
                                         stored, computed));
  }
  // Behind the checksum: only a forged file gets here with these wrong.
  if (h.step() < 0 || h.epoch() < 0 || h.batch_in_epoch() < 0) {
    return Corrupt(name, absl::StrCat("has a negative position (step ", h.step(), ", epoch ",
                                      h.epoch(), ", batch ", h.batch_in_epoch(), ")"));
  }
  return ckpt;
}

absl::Status WriteAll(FILE* f, const void* data, size_t bytes, const std::string& path,
                      Crc* crc) {
  if (bytes > 0 && fwrite(data, 1, bytes, f) != bytes) {
    return absl::InternalError(
        absl::StrCat("cannot write checkpoint ", path, ": ", strerror(errno)));
  }
  crc->Add(data, bytes);
  return absl::OkStatus();
}

// Writes the whole file at `tmp` and flushes it to disk; removes it on failure.
absl::Status WriteSynced(const std::string& tmp, CheckpointHeader header,
                         absl::Span<const float> params,
                         absl::Span<const float> optimizer_state) {
  header.set_num_params(static_cast<int64_t>(params.size()));
  header.set_num_optimizer_state(static_cast<int64_t>(optimizer_state.size()));
  std::string header_bytes;
  if (!header.SerializeToString(&header_bytes) || header_bytes.empty() ||
      header_bytes.size() > kMaxHeaderBytes) {
    return absl::InternalError("cannot serialise checkpoint header");
  }
  File f(fopen(tmp.c_str(), "wb"));
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create checkpoint ", tmp, ": ", strerror(errno)));
  }
  Crc crc;
  const uint32_t version = kVersion;
  const uint32_t header_size = static_cast<uint32_t>(header_bytes.size());
  absl::Status s = WriteAll(f.get(), kMagic, sizeof(kMagic), tmp, &crc);
  if (s.ok()) s = WriteAll(f.get(), &version, sizeof(version), tmp, &crc);
  if (s.ok()) s = WriteAll(f.get(), &header_size, sizeof(header_size), tmp, &crc);
  if (s.ok()) s = WriteAll(f.get(), header_bytes.data(), header_bytes.size(), tmp, &crc);
  if (s.ok()) s = WriteAll(f.get(), params.data(), params.size() * sizeof(float), tmp, &crc);
  if (s.ok()) {
    s = WriteAll(f.get(), optimizer_state.data(), optimizer_state.size() * sizeof(float), tmp, &crc);
  }
  if (s.ok()) {
    const uint32_t trailer = crc.value();
    Crc ignored;
    s = WriteAll(f.get(), &trailer, sizeof(trailer), tmp, &ignored);
  }
  if (s.ok() && (fflush(f.get()) != 0 || fsync(fileno(f.get())) != 0)) {
    s = absl::InternalError(absl::StrCat("cannot flush checkpoint ", tmp, ": ", strerror(errno)));
  }
  if (s.ok() && fclose(f.release()) != 0) {
    s = absl::InternalError(absl::StrCat("cannot close checkpoint ", tmp, ": ", strerror(errno)));
  }
  if (!s.ok()) {
    f.reset();
    unlink(tmp.c_str());
  }
  return s;
}

std::string TempPathFor(const std::string& path) { return absl::StrCat(path, ".tmp.", getpid()); }

absl::Status RenameInto(const std::string& tmp, const std::string& path) {
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename checkpoint into ", path, ": ", strerror(err)));
  }
  return absl::OkStatus();
}

// The step of the checkpoint at `path` from its header alone (no checksum: used only
// to name the file kept when it is replaced; a resume verifies it). nullopt when it
// is missing or not a version-3 checkpoint.
std::optional<int64_t> PeekStep(const std::string& path) {
  File f(fopen(path.c_str(), "rb"));
  if (f == nullptr) return std::nullopt;
  char magic[sizeof(kMagic)];
  uint32_t version = 0, header_bytes = 0;
  if (fread(magic, 1, sizeof(magic), f.get()) != sizeof(magic) ||
      std::memcmp(magic, kMagic, sizeof(kMagic)) != 0 ||
      fread(&version, sizeof(version), 1, f.get()) != 1 || version != kVersion ||
      fread(&header_bytes, sizeof(header_bytes), 1, f.get()) != 1 || header_bytes == 0 ||
      header_bytes > kMaxHeaderBytes) {
    return std::nullopt;
  }
  std::string bytes(header_bytes, '\0');
  CheckpointHeader header;
  if (fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size() ||
      !header.ParseFromString(bytes) || header.step() < 0) {
    return std::nullopt;
  }
  return header.step();
}

// The steps of the kept checkpoints (checkpoint.<step>.bin) in `dir`, highest first.
std::vector<int64_t> KeptSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, kKeptPrefix) || !absl::EndsWith(name, kKeptSuffix)) continue;
    const absl::string_view digits = absl::string_view(name).substr(
        sizeof(kKeptPrefix) - 1, name.size() - (sizeof(kKeptPrefix) - 1) - (sizeof(kKeptSuffix) - 1));
    int64_t step = 0;
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(digits, &step)) {
      continue;
    }
    steps.push_back(step);
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& path, CheckpointHeader header,
                             absl::Span<const float> params,
                             absl::Span<const float> optimizer_state) {
  const std::string tmp = TempPathFor(path);
  if (absl::Status s = WriteSynced(tmp, std::move(header), params, optimizer_state); !s.ok()) {
    return s;
  }
  return RenameInto(tmp, path);
}

absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view bytes, absl::string_view name) {
  BufferSource in(bytes);
  return Parse(in, bytes.size(), name);
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path) {
  File f(fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("no checkpoint at ", path));
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open checkpoint ", path, ": ", strerror(err)));
  }
  struct stat st;
  if (fstat(fileno(f.get()), &st) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot stat checkpoint ", path, ": ", strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  FileSource in(f.get());
  return Parse(in, static_cast<uint64_t>(st.st_size), path);
}

std::string CheckpointPath(const std::string& dir) { return absl::StrCat(dir, "/", kCheckpointFile); }

std::string KeptCheckpointPath(const std::string& dir, int64_t step) {
  return absl::StrCat(dir, "/", kKeptPrefix, step, kKeptSuffix);
}

absl::Status WriteCheckpointKeeping(const std::string& dir, int keep, CheckpointHeader header,
                                    absl::Span<const float> params,
                                    absl::Span<const float> optimizer_state) {
  if (keep < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--keep_checkpoints must be >= 1, got ", keep));
  }
  const int64_t step = header.step();
  const std::string path = CheckpointPath(dir);
  const std::string tmp = TempPathFor(path);
  if (absl::Status s = WriteSynced(tmp, std::move(header), params, optimizer_state); !s.ok()) {
    return s;
  }
  // Keep the checkpoint being replaced under its step's name: a hard link, so that
  // checkpoint.bin stays in place until the rename below replaces it. (Where hard
  // links are not supported it is moved: for that moment checkpoint.bin is missing and
  // a resume takes the kept file, which is the newest then.)
  if (const std::optional<int64_t> old = keep > 1 ? PeekStep(path) : std::nullopt;
      old.has_value() && *old < step) {
    const std::string kept = KeptCheckpointPath(dir, *old);
    const std::string kept_tmp = TempPathFor(kept);
    unlink(kept_tmp.c_str());
    const bool linked = link(path.c_str(), kept_tmp.c_str()) == 0;
    if (linked ? rename(kept_tmp.c_str(), kept.c_str()) != 0
               : rename(path.c_str(), kept.c_str()) != 0) {
      const int err = errno;
      unlink(kept_tmp.c_str());
      unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("cannot keep checkpoint ", path, " as ", kept,
                                              ": ", strerror(err)));
    }
  }
  if (absl::Status s = RenameInto(tmp, path); !s.ok()) return s;
  // Older checkpoints beyond keep - 1, and any of this step or later (an abandoned
  // future: the run fell back to an earlier checkpoint and repeats those steps).
  int kept = 0;
  for (const int64_t s : KeptSteps(dir)) {
    if (s < step && kept < keep - 1) {
      ++kept;
      continue;
    }
    const std::string old = KeptCheckpointPath(dir, s);
    if (unlink(old.c_str()) != 0 && errno != ENOENT) {
      return absl::InternalError(
          absl::StrCat("cannot remove old checkpoint ", old, ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NewestCheckpoint> ReadNewestCheckpoint(const std::string& dir) {
  std::vector<std::pair<std::string, int64_t>> candidates = {{CheckpointPath(dir), -1}};
  for (const int64_t step : KeptSteps(dir)) {
    candidates.push_back({KeptCheckpointPath(dir, step), step});
  }
  std::vector<absl::Status> failures;
  for (const auto& [path, named_step] : candidates) {
    absl::StatusOr<Checkpoint> ckpt = ReadCheckpoint(path);
    if (absl::IsNotFound(ckpt.status())) continue;
    if (ckpt.ok() && named_step >= 0 && ckpt->header.step() != named_step) {
      ckpt = Corrupt(path, absl::StrCat("holds step ", ckpt->header.step(),
                                        ", not the step its name says"));
    }
    if (!ckpt.ok()) {
      failures.push_back(ckpt.status());
      continue;
    }
    NewestCheckpoint newest;
    if (!failures.empty()) {
      std::vector<std::string> lines;
      for (const absl::Status& f : failures) lines.emplace_back(f.message());
      newest.warning = absl::StrCat(absl::StrJoin(lines, "; "), "; resuming from ", path,
                                    " (step ", ckpt->header.step(), ") instead");
    }
    newest.checkpoint = *std::move(ckpt);
    newest.path = path;
    return newest;
  }
  if (failures.empty()) return absl::NotFoundError(absl::StrCat("no checkpoint in ", dir));
  if (failures.size() == 1) return failures[0];
  return absl::Status(failures[0].code(),
                      absl::StrCat(failures[0].message(), " (and ", failures.size() - 1,
                                   " older checkpoint(s) are unusable too)"));
}

}  // namespace ringside
