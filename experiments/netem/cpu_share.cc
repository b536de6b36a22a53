#include "experiments/netem/cpu_share.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "common/status_macros.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "experiments/netem/run_tag.h"
#include "experiments/sys/files.h"

namespace ringside {
namespace {

constexpr int kMaxNodes = 250;
constexpr int64_t kMinQuotaUs = 1000;  // The kernel's minimum quota (and period).
constexpr absl::Duration kTeardownTimeout = absl::Seconds(5);
constexpr const char* kPrivilegeMessage =
    "CPU shares per node need root (write access to the cgroup cpu hierarchy); run as root "
    "or drop --node_cpus";

// Counts the shares (and probes) this process made, so names stay unique per run.
std::atomic<int> g_share_seq{0};

std::string MakeTag() {
  return absl::StrFormat("rs%x_%d", static_cast<unsigned>(getpid()), g_share_seq.fetch_add(1));
}

// A mounted cgroup hierarchy that can carry CPU quotas.
struct CpuHierarchy {
  EmulatedCpuShares::CgroupVersion version = EmulatedCpuShares::CgroupVersion::kV1;
  std::string root;        // Mount point.
  bool cpu_usable = false;  // v1: always (the cpu controller is bound); v2: "cpu" in controllers.
};

// The v1 hierarchy with the cpu controller and the v2 mount, whichever exist, read from
// /proc/self/mounts (mount points may differ from /sys/fs/cgroup/...).
std::vector<CpuHierarchy> FindHierarchies() {
  std::vector<CpuHierarchy> found;
  absl::StatusOr<std::string> mounts = ReadFile("/proc/self/mounts");
  if (!mounts.ok()) return found;
  for (absl::string_view line : absl::StrSplit(*mounts, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() < 4) continue;
    CpuHierarchy h;
    h.root = std::string(f[1]);
    if (f[2] == "cgroup2") {
      h.version = EmulatedCpuShares::CgroupVersion::kV2;
      absl::StatusOr<std::string> controllers = ReadFile(h.root + "/cgroup.controllers");
      if (controllers.ok()) {
        for (absl::string_view c : absl::StrSplit(*controllers, absl::ByAnyChar(" \n"),
                                                  absl::SkipEmpty())) {
          if (c == "cpu") h.cpu_usable = true;
        }
      }
      found.push_back(h);
    } else if (f[2] == "cgroup") {
      bool cpu = false;
      for (absl::string_view opt : absl::StrSplit(f[3], ',')) cpu = cpu || opt == "cpu";
      if (!cpu) continue;
      h.version = EmulatedCpuShares::CgroupVersion::kV1;
      h.cpu_usable = true;
      found.push_back(h);
    }
  }
  return found;
}

// The hierarchy new shares go to: v2 where its cpu controller is available, else v1.
absl::StatusOr<CpuHierarchy> ChooseHierarchy() {
  const std::vector<CpuHierarchy> all = FindHierarchies();
  for (const CpuHierarchy& h : all) {
    if (h.version == EmulatedCpuShares::CgroupVersion::kV2 && h.cpu_usable) return h;
  }
  for (const CpuHierarchy& h : all) {
    if (h.version == EmulatedCpuShares::CgroupVersion::kV1) return h;
  }
  return absl::FailedPreconditionError(
      "CPU shares per node need a cgroup cpu controller (cgroup v2 with \"cpu\" in "
      "cgroup.controllers, or a v1 hierarchy with the cpu controller); none is mounted");
}

// Writes `value` to a cgroup control file (no temporary file: cgroupfs takes writes in
// place, and the kernel's verdict comes from write()).
absl::Status WriteControl(const std::string& path, const std::string& value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = absl::StrCat("cannot open ", path, ": ", strerror(err));
    if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(msg);
    return absl::InternalError(msg);
  }
  const ssize_t n = write(fd, value.data(), value.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return absl::InternalError(absl::StrCat("cannot write \"", value, "\" to ", path, ": ",
                                            n < 0 ? strerror(err) : "short write"));
  }
  return absl::OkStatus();
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::vector<pid_t> ProcsIn(const std::string& cgroup) {
  std::vector<pid_t> pids;
  absl::StatusOr<std::string> text = ReadFile(cgroup + "/cgroup.procs");
  if (!text.ok()) return pids;
  for (absl::string_view token : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(token, &pid) && pid > 1) pids.push_back(pid);
  }
  return pids;
}

// Kills what runs inside `cgroup` (not this process) until it is empty, then removes
// the directory. A cgroup that is already gone is fine. Gives up after kTeardownTimeout.
absl::Status RemoveCgroup(const std::string& cgroup) {
  if (!Exists(cgroup)) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + kTeardownTimeout;
  // v2 (kernel 5.14+) kills the whole subtree in one write, forks included.
  if (Exists(cgroup + "/cgroup.kill")) (void)WriteControl(cgroup + "/cgroup.kill", "1");
  while (true) {
    for (pid_t pid : ProcsIn(cgroup)) {
      if (pid != getpid()) kill(pid, SIGKILL);
    }
    if (rmdir(cgroup.c_str()) == 0 || errno == ENOENT) return absl::OkStatus();
    const int err = errno;
    // EBUSY: processes are still inside (killed ones leave once they have exited).
    if (err != EBUSY || absl::Now() > deadline) {
      std::string why = strerror(err);
      if (err == EBUSY) {
        why = absl::StrCat("processes still inside after ", absl::FormatDuration(kTeardownTimeout));
      }
      return absl::InternalError(absl::StrCat("cannot remove cgroup ", cgroup, ": ", why));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

std::string FormatCpus(double cpus) { return absl::StrFormat("%g", cpus); }

// Each node's quota per `period` in whole microseconds, index = node. InvalidArgument
// naming the share for one that is not positive and finite, or whose quota is below
// the kernel's minimum (kMinQuotaUs).
absl::StatusOr<std::vector<int64_t>> QuotasFor(const std::vector<double>& node_cpus,
                                               absl::Duration period) {
  const int64_t period_us = absl::ToInt64Microseconds(period);
  std::vector<int64_t> quotas_us;
  for (double cpus : node_cpus) {
    if (!(cpus > 0) || !std::isfinite(cpus)) {
      return absl::InvalidArgumentError(
          absl::StrCat("CPU share per node must be a positive number, got ", cpus));
    }
    const int64_t quota_us = std::llround(cpus * static_cast<double>(period_us));
    if (quota_us < kMinQuotaUs) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CPU share ", FormatCpus(cpus), " x period ", absl::FormatDuration(period),
          " is a quota below the kernel's minimum of 1ms; use a larger share or period (",
          absl::FormatDuration(CpuSharePeriodFor(cpus)), ")"));
    }
    quotas_us.push_back(quota_us);
  }
  return quotas_us;
}

}  // namespace

// ---------------------------------------------------------------------------------

absl::StatusOr<NodeCpuSpec> ParseNodeCpus(absl::string_view text) {
  NodeCpuSpec spec;
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (trimmed.empty() || trimmed == "none") return spec;
  spec.enabled = true;
  if (trimmed == "auto") {
    spec.automatic = true;
    return spec;
  }
  double cpus = 0;
  if (!absl::SimpleAtod(trimmed, &cpus) || !std::isfinite(cpus)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node_cpus \"", text,
                     "\": expected \"auto\", \"none\" or a number of CPUs (e.g. 0.5, 1, 1.5)"));
  }
  if (cpus <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node_cpus \"", text, "\": a node needs more than 0 CPUs"));
  }
  spec.cpus = cpus;
  return spec;
}

std::string NodeCpusToString(const NodeCpuSpec& spec) {
  if (!spec.enabled) return "none";
  if (spec.automatic) return "auto";
  return FormatCpus(spec.cpus);
}

absl::Duration CpuSharePeriodFor(double cpus) {
  if (!(cpus > 0)) return kDefaultCpuSharePeriod;
  // Whole microseconds, rounded up, as the kernel takes them.
  const absl::Duration needed =
      absl::Microseconds(std::ceil(static_cast<double>(kMinQuotaUs) / cpus));
  return std::min(absl::Seconds(1), std::max(kDefaultCpuSharePeriod, needed));
}

int MachineCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

absl::StatusOr<SlowNodeSpec> ParseSlowNode(absl::string_view text) {
  SlowNodeSpec spec;
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t.empty() || t == "none") return spec;
  const std::vector<absl::string_view> parts = absl::StrSplit(t, ':');
  int rank = -1;
  double factor = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &rank) || rank < 0 ||
      !absl::SimpleAtod(parts[1], &factor) || !std::isfinite(factor)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--slow_node \"", text, "\": expected R:F, a rank (PS: worker) R >= 0 and a fraction "
        "0 < F <= 1 of the other nodes' CPU share, e.g. 1:0.5"));
  }
  if (!(factor > 0) || factor > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--slow_node \"", text, "\": the fraction F must be in (0, 1], got ", parts[1]));
  }
  spec.enabled = true;
  spec.rank = rank;
  spec.factor = factor;
  return spec;
}

absl::StatusOr<double> ResolveNodeCpus(const NodeCpuSpec& spec, int max_nodes, int machine_cpus) {
  if (max_nodes < 1 || machine_cpus < 1) {
    return absl::InvalidArgumentError(absl::StrCat("CPU share: need at least 1 node and 1 CPU, got ",
                                                   max_nodes, " nodes and ", machine_cpus,
                                                   " CPUs"));
  }
  if (!spec.enabled) return 0.0;
  if (spec.automatic) return static_cast<double>(machine_cpus) / max_nodes;
  // A small tolerance, so that e.g. 0.1 x 20 on 2 CPUs is not refused for rounding.
  if (spec.cpus * max_nodes > machine_cpus * (1 + 1e-9)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--node_cpus=", FormatCpus(spec.cpus), " x ", max_nodes, " nodes = ",
        FormatCpus(spec.cpus * max_nodes), " CPUs, but this machine has ", machine_cpus,
        " (use at most ", FormatCpus(static_cast<double>(machine_cpus) / max_nodes),
        " or --node_cpus=auto)"));
  }
  return spec.cpus;
}

absl::Status CheckCpuSharePrivileges() {
  absl::StatusOr<CpuHierarchy> h = ChooseHierarchy();
  if (!h.ok()) return h.status();
  const std::string probe = absl::StrCat(h->root, "/", MakeTag(), "_probe");
  if (mkdir(probe.c_str(), 0755) != 0) {
    const int err = errno;
    if (err == EACCES || err == EPERM || err == EROFS) {
      return absl::PermissionDeniedError(
          absl::StrCat(kPrivilegeMessage, " (mkdir ", probe, ": ", strerror(err), ")"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create a cgroup (mkdir ", probe, "): ", strerror(err)));
  }
  return RemoveCgroup(probe);
}

absl::StatusOr<std::vector<std::string>> RemoveStaleCpuShares() {
  std::vector<std::string> stale;
  for (const CpuHierarchy& h : FindHierarchies()) {
    DIR* dir = opendir(h.root.c_str());
    if (dir == nullptr) continue;
    while (struct dirent* entry = readdir(dir)) {
      if (CreatedByDeadProcess(entry->d_name)) stale.push_back(absl::StrCat(h.root, "/", entry->d_name));
    }
    closedir(dir);
  }
  return RemoveEach(std::move(stale), RemoveCgroup);
}

absl::StatusOr<std::unique_ptr<EmulatedCpuShares>> EmulatedCpuShares::Create(
    double cpus_per_node, int nodes, absl::Duration period) {
  if (nodes < 1 || nodes > kMaxNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("CPU shares need 1 to ", kMaxNodes, " nodes, got ", nodes));
  }
  return Create(std::vector<double>(nodes, cpus_per_node), period);
}

absl::StatusOr<std::unique_ptr<EmulatedCpuShares>> EmulatedCpuShares::Create(
    const std::vector<double>& node_cpus, absl::Duration period) {
  const int nodes = static_cast<int>(node_cpus.size());
  if (nodes < 1 || nodes > kMaxNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("CPU shares need 1 to ", kMaxNodes, " nodes, got ", nodes));
  }
  if (period < absl::Milliseconds(1) || period > absl::Seconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CPU share period must be 1ms to 1s, got ", absl::FormatDuration(period)));
  }
  absl::StatusOr<std::vector<int64_t>> quotas_us = QuotasFor(node_cpus, period);
  if (!quotas_us.ok()) return quotas_us.status();
  const double cpus_per_node = *std::max_element(node_cpus.begin(), node_cpus.end());
  absl::StatusOr<CpuHierarchy> h = ChooseHierarchy();
  if (!h.ok()) return h.status();
  absl::Status privileges = CheckCpuSharePrivileges();
  if (!privileges.ok()) return privileges;

  std::unique_ptr<EmulatedCpuShares> shares(new EmulatedCpuShares());
  shares->cpus_per_node_ = cpus_per_node;
  shares->node_cpus_ = node_cpus;
  shares->period_ = period;
  shares->version_ = h->version;
  shares->tag_ = MakeTag();
  for (int i = 0; i < nodes; ++i) {
    shares->paths_.push_back(absl::StrCat(h->root, "/", shares->tag_, "_n", i));
  }

  absl::Status status = shares->MakeCgroups(h->root, *quotas_us);
  if (!status.ok()) {
    absl::Status cleanup = shares->Teardown();
    if (!cleanup.ok()) {
      return absl::Status(status.code(), absl::StrCat(status.message(),
                                                      "; cleanup also failed: ", cleanup.message()));
    }
    return status;
  }
  return shares;
}

absl::Status EmulatedCpuShares::MakeCgroups(const std::string& root,
                                            const std::vector<int64_t>& quotas_us) {
  const int64_t period_us = absl::ToInt64Microseconds(period_);
  const bool v2 = version_ == CgroupVersion::kV2;
  if (v2) {
    absl::StatusOr<std::string> enabled = ReadFile(root + "/cgroup.subtree_control");
    bool has_cpu = false;
    if (enabled.ok()) {
      for (absl::string_view c :
           absl::StrSplit(*enabled, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
        has_cpu = has_cpu || c == "cpu";
      }
    }
    if (!has_cpu) {
      absl::Status s = WriteControl(root + "/cgroup.subtree_control", "+cpu");
      if (!s.ok()) return s;
    }
  }
  for (int i = 0; i < num_nodes(); ++i) {
    const std::string& path = paths_[i];
    const int64_t quota_us = quotas_us[i];
    {
      absl::MutexLock lock(&mu_);
      created_.push_back(path);  // Before the mkdir: a half-done one is cleaned too.
    }
    if (mkdir(path.c_str(), 0755) != 0) {
      return absl::InternalError(absl::StrCat("cannot create cgroup ", path, ": ", strerror(errno)));
    }
    absl::Status s;
    if (v2) {
      s = WriteControl(path + "/cpu.max", absl::StrCat(quota_us, " ", period_us));
    } else {
      // The period first: a quota is checked against the period already set.
      s = WriteControl(path + "/cpu.cfs_period_us", absl::StrCat(period_us));
      if (s.ok()) s = WriteControl(path + "/cpu.cfs_quota_us", absl::StrCat(quota_us));
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

EmulatedCpuShares::~EmulatedCpuShares() {
  absl::Status s = Teardown();
  if (!s.ok()) {
    fprintf(stderr, "ringside: tearing down CPU shares %s: %s\n", tag_.c_str(),
            std::string(s.message()).c_str());
  }
}

std::vector<std::string> EmulatedCpuShares::CommandPrefix(int node) const {
  return {"sh", "-c",
          absl::StrCat("echo $$ > '", paths_.at(node), "/cgroup.procs' && exec \"$@\""), "sh"};
}

absl::Duration EmulatedCpuShares::quota(int node) const {
  return absl::Microseconds(
      std::llround(node_cpus_.at(node) * static_cast<double>(absl::ToInt64Microseconds(period_))));
}

std::string EmulatedCpuShares::Describe() const {
  std::string others;
  for (int i = 0; i < num_nodes(); ++i) {
    if (node_cpus_[i] != cpus_per_node_) {
      absl::StrAppend(&others, ", node ", i, " ", FormatCpus(node_cpus_[i]),
                      node_cpus_[i] > 1 ? " CPUs" : " CPU");
    }
  }
  return absl::StrCat(FormatCpus(cpus_per_node_), cpus_per_node_ > 1 ? " CPUs" : " CPU",
                      " per node", others, " (cgroup ",
                      version_ == CgroupVersion::kV2 ? "v2 cpu.max" : "v1 cpu.cfs_quota_us", ", ",
                      absl::FormatDuration(period_), " period)");
}

absl::Status EmulatedCpuShares::JoinNode(int node) {
  absl::MutexLock lock(&mu_);
  // cgroup.procs moves the whole thread group (v1 and v2).
  RINGSIDE_RETURN_IF_ERROR(WriteControl(paths_.at(node) + "/cgroup.procs", absl::StrCat(getpid())));
  joined_ = true;
  return absl::OkStatus();
}

absl::Status EmulatedCpuShares::LeaveNode() {
  absl::MutexLock lock(&mu_);
  if (!joined_ || paths_.empty()) return absl::OkStatus();
  const std::string root = paths_[0].substr(0, paths_[0].rfind('/'));
  RINGSIDE_RETURN_IF_ERROR(WriteControl(root + "/cgroup.procs", absl::StrCat(getpid())));
  joined_ = false;
  return absl::OkStatus();
}

absl::Status EmulatedCpuShares::Teardown() {
  // Never kill this process: leave first (a failure leaves the cgroups in place).
  RINGSIDE_RETURN_IF_ERROR(LeaveNode());
  absl::MutexLock lock(&mu_);
  absl::Status first_error;
  std::vector<std::string> left;
  for (const std::string& path : created_) {
    absl::Status s = RemoveCgroup(path);
    if (!s.ok()) {
      left.push_back(path);
      if (first_error.ok()) first_error = s;
    }
  }
  created_ = std::move(left);  // A later call retries what failed.
  return first_error;
}

}  // namespace ringside
