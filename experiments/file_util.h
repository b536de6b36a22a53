// Small helpers the experiment commands share: whole-file reads, atomic writes, and
// the median they report everything by.
#ifndef RINGSIDE_EXPERIMENTS_FILE_UTIL_H_
#define RINGSIDE_EXPERIMENTS_FILE_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringside {

// The file's bytes. NotFound "cannot read PATH: reason".
absl::StatusOr<std::string> ReadFile(const std::string& path);
// Writes PATH.tmp and renames it over PATH, so readers never see half a file.
absl::Status WriteFileAtomically(const std::string& path, const std::string& data);
// The upper median (0 for none).
double Median(std::vector<double> values);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_FILE_UTIL_H_
