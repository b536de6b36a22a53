#include "experiments/bench/cpu_pinning.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringside {

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view spec, int count,
                                              absl::string_view flag) {
  const std::vector<int> allowed = AllowedCpus();
  std::vector<int> cpus;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    int cpu = -1;
    if (!absl::SimpleAtoi(part, &cpu) || cpu < 0) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": '", part, "' is not a CPU number"));
    }
    if (!std::binary_search(allowed.begin(), allowed.end(), cpu)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": CPU ", cpu,
                                                     " is not available here (allowed: ",
                                                     absl::StrJoin(allowed, ","), ")"));
    }
    if (std::find(cpus.begin(), cpus.end(), cpu) != cpus.end()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": CPU ", cpu, " given twice"));
    }
    cpus.push_back(cpu);
  }
  if (static_cast<int>(cpus.size()) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": expected ", count, " CPUs, got '", spec, "'"));
  }
  return cpus;
}

absl::Status PinCallingThread(int cpu) {
  // Not checked against AllowedCpus(): a process started by a pinned parent inherits
  // the parent's core and may move to another that its cgroup allows.
  if (cpu < 0 || cpu >= CPU_SETSIZE) {
    return absl::InvalidArgumentError(absl::StrCat("CPU ", cpu, " is not available here"));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    if (errno == EINVAL) {
      return absl::InvalidArgumentError(absl::StrCat("CPU ", cpu, " is not available here"));
    }
    return absl::InternalError(absl::StrCat("cannot pin to CPU ", cpu, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace ringside
