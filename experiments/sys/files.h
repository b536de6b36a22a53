// Whole-file reads and atomic whole-file writes, for the CLI's small outputs (specs,
// results, summaries, reports), and random bytes from the kernel. Large or streamed outputs (metrics, traces,
// checkpoints) have writers of their own in common/. Temporary directories that clean
// up after themselves.
#ifndef RINGSIDE_EXPERIMENTS_SYS_FILES_H_
#define RINGSIDE_EXPERIMENTS_SYS_FILES_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringside {

// The file's bytes. NotFound "cannot read PATH: reason".
absl::StatusOr<std::string> ReadFile(const std::string& path);
// Writes PATH.tmp and renames it over PATH, so readers never see half a file.
// PermissionDenied when PATH.tmp cannot be created.
absl::Status WriteFileAtomically(const std::string& path, const std::string& data);

// `bytes` random bytes from /dev/urandom as lower-case hex (2 * bytes characters), e.g.
// a job's secret token. Unavailable "cannot read /dev/urandom: reason" on failure.
absl::StatusOr<std::string> RandomHex(int bytes);

// A fresh directory under $TMPDIR (else /tmp), named "<prefix>-XXXXXX", removed with
// everything in it when this is destroyed. Move-only; not thread-safe.
class ScopedTempDir {
 public:
  // Internal "cannot create a temporary directory under ROOT: reason" on failure.
  static absl::StatusOr<ScopedTempDir> Create(const std::string& prefix);
  ScopedTempDir(ScopedTempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScopedTempDir& operator=(ScopedTempDir&& other) = delete;
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  ~ScopedTempDir();

  const std::string& path() const { return path_; }

 private:
  explicit ScopedTempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_SYS_FILES_H_
