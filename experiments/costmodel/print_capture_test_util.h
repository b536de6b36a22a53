// Test helper: what a printing function wrote to its FILE*, as a string.
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_PRINT_CAPTURE_TEST_UTIL_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_PRINT_CAPTURE_TEST_UTIL_H_

#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace ringside {

// Runs `run` on a temporary file and returns everything it wrote; its status goes to
// `status`.
inline std::string CapturePrinted(const std::function<absl::Status(FILE*)>& run, absl::Status* status) {
  FILE* f = std::tmpfile();
  *status = run(f);
  std::rewind(f);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_PRINT_CAPTURE_TEST_UTIL_H_
