#include "experiments/sys/files.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ringside {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp, ": ", strerror(errno)));
    }
    out << data;
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RandomHex(int bytes) {
  std::ifstream in("/dev/urandom", std::ios::binary);
  std::string raw(bytes, '\0');
  if (!in || !in.read(raw.data(), bytes)) {
    return absl::UnavailableError(absl::StrCat("cannot read /dev/urandom: ", strerror(errno)));
  }
  return absl::BytesToHexString(raw);
}

absl::StatusOr<ScopedTempDir> ScopedTempDir::Create(const std::string& prefix) {
  const char* tmp = getenv("TMPDIR");
  const std::string root = tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
  std::string path = absl::StrCat(root, "/", prefix, "-XXXXXX");
  if (mkdtemp(path.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create a temporary directory under ", root, ": ", strerror(errno)));
  }
  return ScopedTempDir(std::move(path));
}

ScopedTempDir::~ScopedTempDir() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace ringside
