#include "experiments/netem/run_tag.h"

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"

namespace ringside {
namespace {

// The creator's pid in "rs<pid hex>_<n>_<part>"; false for any other name.
bool ParseCreator(absl::string_view name, pid_t* pid) {
  if (!absl::ConsumePrefix(&name, "rs")) return false;
  const size_t us = name.find('_');
  if (us == 0 || us == absl::string_view::npos || us > 8) return false;
  uint64_t p = 0;
  for (char c : name.substr(0, us)) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return false;
    p = p * 16 + (absl::ascii_isdigit(c) ? c - '0' : c - 'a' + 10);
  }
  absl::string_view rest = name.substr(us + 1);
  const size_t us2 = rest.find('_');
  if (us2 == 0 || us2 == absl::string_view::npos || us2 + 1 == rest.size()) return false;
  for (char c : rest.substr(0, us2)) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  if (p == 0 || p > 0x7fffffff) return false;
  *pid = static_cast<pid_t>(p);
  return true;
}

}  // namespace

bool CreatedByDeadProcess(absl::string_view name) {
  pid_t pid = 0;
  if (!ParseCreator(name, &pid) || pid == getpid()) return false;
  return kill(pid, 0) != 0 && errno == ESRCH;
}

absl::StatusOr<std::vector<std::string>> RemoveEach(
    std::vector<std::string> names, absl::FunctionRef<absl::Status(const std::string&)> remove) {
  std::sort(names.begin(), names.end());
  std::vector<std::string> removed;
  absl::Status first_error;
  for (const std::string& name : names) {
    absl::Status s = remove(name);
    if (s.ok()) {
      removed.push_back(name);
    } else if (first_error.ok()) {
      first_error = s;
    }
  }
  if (!first_error.ok()) return first_error;
  return removed;
}

}  // namespace ringside
