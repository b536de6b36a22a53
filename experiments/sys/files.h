// Whole-file reads and atomic whole-file writes, for the CLI's small outputs (specs,
// results, summaries, reports), and random bytes from the kernel. Large or streamed outputs (metrics, traces,
// checkpoints) have writers of their own in common/.
#ifndef RINGSIDE_EXPERIMENTS_SYS_FILES_H_
#define RINGSIDE_EXPERIMENTS_SYS_FILES_H_

#include <string>

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

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_SYS_FILES_H_
