// CPU share per emulated node (`--node_cpus=0.5|auto`): every node of a run gets a cgroup
// of its own whose CPU bandwidth quota caps what all its processes together may use
// (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us` where the cpu controller is on v1, as
// on the development machines). N nodes of c CPUs each then fit on a machine with at
// least N x c CPUs without fighting each other. Needs root (write access to the cpu
// hierarchy). docs/network.md ("CPU share per node") describes the layout, the period
// measurement and the cleanup guarantees; network_emulator.h is the network-side twin.
#ifndef RINGSIDE_EXPERIMENTS_NETEM_CPU_SHARE_H_
#define RINGSIDE_EXPERIMENTS_NETEM_CPU_SHARE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringside {

// The quota period the launcher uses. Measured on the 2-core development VM (kernel 6.18,
// cgroup v1; docs/network.md has the table) with a process at 0.5 CPU that busy-loops in
// one thread while another wakes on a 1 ms timer or answers UDP pings: a group that used
// its quota stalls for up to (1 - share) x period, and the worst wake-up lateness was
// 50-56 ms at the kernel's default 100 ms, 16-19 ms at 20 ms, 8-12 ms at 10 ms, 6-9 ms at
// 5 ms and 4-12 ms at 2 ms (unthrottled: 2-4 ms, the loaded machine's own noise). 5 ms is
// where a shorter period stops helping: 2 ms was no better in the worst case, throttles
// twice as often and began to give a group less than its share. Its cost: the kernel's minimum quota is 1 ms, so a share
// below 0.2 CPU needs a longer period (CpuSharePeriodFor).
inline constexpr absl::Duration kDefaultCpuSharePeriod = absl::Milliseconds(5);

// kDefaultCpuSharePeriod, lengthened where needed so that the quota cpus x period
// reaches the kernel's minimum of 1 ms (e.g. 0.1 CPU: 10 ms), at most 1 s. For
// cpus > 0.
absl::Duration CpuSharePeriodFor(double cpus);

// --node_cpus: "" or "none" (no CPU share), "auto", or a positive number of CPUs
// ("0.5", "1", "1.5").
struct NodeCpuSpec {
  bool enabled = false;    // False: no CPU share (processes use the whole machine).
  bool automatic = false;  // "auto": the machine's CPUs divided by the nodes.
  double cpus = 0;         // The fixed share when enabled && !automatic.
};

// InvalidArgument with one line naming the text for zero, negative, infinite or
// non-numeric values.
absl::StatusOr<NodeCpuSpec> ParseNodeCpus(absl::string_view text);

// "none", "auto" or the number ("0.5"); ParseNodeCpus gives the spec back.
std::string NodeCpusToString(const NodeCpuSpec& spec);

// The CPUs this process may run on (its affinity mask; all online CPUs if unreadable).
// What `machine_cpus` below should be.
int MachineCpus();

// The CPUs per node for a run whose largest cell uses `max_nodes` nodes (dedicated
// server nodes included) on a machine with `machine_cpus`: "auto" gives machine_cpus /
// max_nodes; a fixed value is returned as is unless cpus x max_nodes > machine_cpus
// (InvalidArgument, one line naming both numbers). A disabled spec gives 0.
// InvalidArgument for max_nodes or machine_cpus below 1.
absl::StatusOr<double> ResolveNodeCpus(const NodeCpuSpec& spec, int max_nodes, int machine_cpus);

// --slow_node: "" or "none" (no slow node), or "R:F": the node holding DDP rank R (PS:
// worker R) gets F times the CPU share of the others, 0 < F <= 1.
struct SlowNodeSpec {
  bool enabled = false;
  int rank = 0;         // DDP rank or PS worker id.
  double factor = 1.0;  // In (0, 1].
};

// InvalidArgument with one line naming the text for anything else (a missing or
// negative R, F <= 0, F > 1, F not finite, extra text).
absl::StatusOr<SlowNodeSpec> ParseSlowNode(absl::string_view text);

// OK if this process can create CPU-share cgroups. FailedPrecondition if no cpu
// controller is mounted (neither cgroup v2 with "cpu" in its root's cgroup.controllers
// nor a v1 hierarchy with the cpu controller); PermissionDenied ("CPU shares per node
// need root ...; run as root or drop --node_cpus") if a probe cgroup cannot be made for
// lack of privileges. Blocks for a moment (creates and removes a probe cgroup).
absl::Status CheckCpuSharePrivileges();

// Removes the cgroups left by runs whose creating process no longer exists (e.g. a run
// killed with SIGKILL), killing any process still inside them. Names embed the
// creator's pid: a cgroup of a live process is never touched (if the pid was reused,
// its cgroups stay until that process ends). Looks at the roots of the v1 cpu hierarchy
// and of cgroup v2, whichever are mounted. Returns the paths it removed. OK if there is
// nothing to do; an error only if a stale cgroup could not be removed.
absl::StatusOr<std::vector<std::string>> RemoveStaleCpuShares();

// The CPU shares of one run. Names: a run tag "rs<pid hex>_<n>" (n counts the shares
// this process made), cgroups "<tag>_n<i>" for node i directly under the cpu
// hierarchy's root. Thread-safe.
class EmulatedCpuShares {
 public:
  enum class CgroupVersion { kV1, kV2 };

  // One cgroup per node whose quota is cpus_per_node x period per period (v2: cpu.max
  // "<quota_us> <period_us>" in a child of the v2 root, "+cpu" written to the root's
  // cgroup.subtree_control if it lacks it; v1: cpu.cfs_period_us and cpu.cfs_quota_us).
  // Uses v2 where its cpu controller is available, else v1. Blocks for a few file
  // writes. InvalidArgument for cpus_per_node not positive and finite, nodes outside 1
  // to 250, a period outside 1 ms to 1 s, or a quota below the kernel's 1 ms; the errors
  // of CheckCpuSharePrivileges; Internal naming the file otherwise. On any error every
  // cgroup already made is removed again.
  static absl::StatusOr<std::unique_ptr<EmulatedCpuShares>> Create(
      double cpus_per_node, int nodes, absl::Duration period = kDefaultCpuSharePeriod);

  // The same with a share of its own for each node (node i gets node_cpus[i] x period
  // per period; e.g. a slow node at a fraction of the others'), one period for all.
  // Every share must give a quota of at least 1 ms (CpuSharePeriodFor of the smallest).
  static absl::StatusOr<std::unique_ptr<EmulatedCpuShares>> Create(
      const std::vector<double>& node_cpus, absl::Duration period = kDefaultCpuSharePeriod);

  // Tears down (see Teardown); a failure is reported on stderr, never fatal.
  ~EmulatedCpuShares();

  EmulatedCpuShares(const EmulatedCpuShares&) = delete;
  EmulatedCpuShares& operator=(const EmulatedCpuShares&) = delete;

  // The argv prefix that runs a command inside node i's cgroup:
  //   {"sh", "-c", "echo $$ > '<cgroup>/cgroup.procs' && exec \"$@\"", "sh"}
  // The shell moves itself into the cgroup and execs the command, so the command keeps
  // the shell's pid and everything it starts inherits the cgroup. Put it BEFORE the
  // network's prefix ({cpu..., "ip", "netns", "exec", ns, command...}): `ip netns exec`
  // mounts a fresh /sys in which the cgroup hierarchies are not visible. What runs
  // inside must exit (or be stopped by its owner) before Teardown, which kills it.
  std::vector<std::string> CommandPrefix(int node) const;

  // Node i's cgroup directory, e.g. "/sys/fs/cgroup/cpu/rs1a2b_0_n1".
  const std::string& cgroup_path(int node) const { return paths_.at(node); }
  const std::string& tag() const { return tag_; }  // "rs<pid hex>_<n>"
  int num_nodes() const { return static_cast<int>(paths_.size()); }
  // The largest node's share (all nodes' when they are equal).
  double cpus_per_node() const { return cpus_per_node_; }
  // Node i's share in CPUs, and its quota per period.
  double cpus(int node) const { return node_cpus_.at(node); }
  absl::Duration quota(int node) const;
  absl::Duration period() const { return period_; }
  CgroupVersion version() const { return version_; }

  // For reports, e.g. "0.5 CPU per node (cgroup v1 cpu.cfs_quota_us, 5ms period)";
  // nodes whose share differs are named: "0.5 CPU per node, node 1 0.25 CPU (...)".
  std::string Describe() const;

  // Moves this whole process (every thread) into node `node`'s cgroup, so that its own
  // work runs on that node's share (`ringside calibrate --node_cpus` measures compute
  // that way), until LeaveNode or Teardown moves it back to the hierarchy's root, the
  // parent of every cgroup made here. Internal naming the file on failure.
  absl::Status JoinNode(int node);
  absl::Status LeaveNode();

  // Moves this process out if it joined a node (LeaveNode), then kills every process
  // still inside the cgroups (SIGKILL, repeated until none is
  // left, so children forked meanwhile go too), then removes the directories.
  // Idempotent; a cgroup already gone is not an error. Bounded: gives up on a cgroup
  // after 5 s (Internal naming it; a later call retries it). Safe from ordinary code
  // after a SIGINT/SIGTERM was caught; not from a signal handler. Returns the first
  // failure, after trying every cgroup.
  absl::Status Teardown();

 private:
  EmulatedCpuShares() = default;

  // Create's building step, on a fresh object whose fields (paths_, period_, version_)
  // are set: on v2 enables the cpu controller for the children of `root` (the
  // hierarchy's mount; "+cpu" written to its cgroup.subtree_control unless there), then
  // makes each node's cgroup paths_[i], recorded in created_ before its mkdir, with the
  // quota quotas_us[i] (microseconds) per period_. Stops at the first failure (Internal
  // naming the file, PermissionDenied where one cannot be opened) and leaves what it
  // made to Teardown. Blocks for a few file writes.
  absl::Status MakeCgroups(const std::string& root, const std::vector<int64_t>& quotas_us);

  double cpus_per_node_ = 0;
  std::vector<double> node_cpus_;
  absl::Duration period_;
  CgroupVersion version_ = CgroupVersion::kV1;
  std::string tag_;
  std::vector<std::string> paths_;

  absl::Mutex mu_;
  // Cgroups that may exist: each is added before its mkdir.
  std::vector<std::string> created_ ABSL_GUARDED_BY(mu_);
  bool joined_ ABSL_GUARDED_BY(mu_) = false;  // This process is in one of them.
};

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_NETEM_CPU_SHARE_H_
