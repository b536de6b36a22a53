// Emulated cluster network (`--network=bw=1gbit,delay=0.5ms`): every node of a run
// gets its own Linux network namespace, joined to a software switch (a bridge in a
// namespace of its own) by a veth pair whose two ends are shaped with tc, so each node
// has its own capped link in both directions. Nothing is created in, or changed on, the
// host's own network namespace. Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN).
// docs/network.md describes the topology, the tc setup and the cleanup guarantees.
#ifndef RINGSIDE_EXPERIMENTS_NETEM_NETWORK_EMULATOR_H_
#define RINGSIDE_EXPERIMENTS_NETEM_NETWORK_EMULATOR_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "experiments/sys/subprocess.h"

namespace ringside {

// The share of a shaped link's rate that carries TCP payload. tc counts every segment
// whole: the Ethernet header (14 bytes), IP (20) and TCP with timestamps (32), GSO
// packets counted segment by segment; on the veths' 1500-byte MTU a full segment carries
// 1448 bytes of payload in 1514. (The cost model's link for a measured cell is the
// shaped rate times this; the reverse direction's pure ACKs are not counted.)
inline constexpr double kShapedTcpPayloadShare = 1448.0 / 1514.0;

// One node's link to the switch. Both limits apply in each direction separately:
// node -> switch (upload) and switch -> node (download).
struct LinkSpec {
  double bits_per_sec = 0;  // Rate cap; 0: unshaped.
  // One-way latency the link adds in each direction. Between two nodes A -> B a packet
  // crosses A's link then B's link: one-way d_A + d_B, round trip 2 (d_A + d_B).
  absl::Duration delay = absl::ZeroDuration();

  bool operator==(const LinkSpec& o) const {
    return bits_per_sec == o.bits_per_sec && delay == o.delay;
  }
  bool operator!=(const LinkSpec& o) const { return !(*this == o); }
};

struct NetworkProfile {
  bool enabled = false;  // False: no emulation (processes use the host's loopback).
  LinkSpec link;         // Every node's link unless its role has an override.
  // Fully resolved links of roles that differ, e.g. {"master", {10e9, 0.5ms}}.
  std::map<std::string, LinkSpec> role_overrides;
  // Every node's loopback (`lo.bw=`, `lo.delay=`): the path between processes of one
  // node (a node's processes reach each other at its address over its `lo`). One
  // egress queue for all of them, both directions. Unshaped unless given; it never
  // inherits `bw` or `delay`.
  LinkSpec loopback;
};

// Parses a profile: comma-separated key=value items.
//   bw=<rate>         rate cap in bandwidth.h's grammar (1gbit, 100mbit, 125MB/s;
//                     bare number = bits/s, as tc), 1kbit to 10000gbit, or "unlimited"
//   delay=<time>      one-way link latency: <number>us|ms|s (whole microseconds)
//   <role>.bw=...     override for nodes of that role ([a-z0-9_]+); fields an override
//   <role>.delay=...  leaves out come from the plain keys, whatever the order
//   lo.bw=<rate>      every node's loopback (NetworkProfile::loopback); "lo" is
//   lo.delay=<time>   reserved, not a role, and starts unshaped
// "" and "none" mean no emulation (enabled == false). Anything else that is not valid
// is InvalidArgument with a one-line message naming the item.
// Example: "bw=1gbit,delay=0.5ms,master.bw=10gbit", "bw=342mbit,lo.bw=2gbit".
absl::StatusOr<NetworkProfile> ParseNetworkProfile(absl::string_view text);

// Canonical text of a profile for reports, e.g. "bw=1gbit,delay=500us,master.bw=10gbit";
// "none" when not enabled. ParseNetworkProfile(ProfileToString(p)) gives p back.
std::string ProfileToString(const NetworkProfile& profile);

// The link a node of `role` gets under `profile`.
LinkSpec LinkForRole(const NetworkProfile& profile, const std::string& role);

// OK if this process may create network namespaces. PermissionDenied ("network
// emulation needs root (CAP_NET_ADMIN) to create namespaces; run as root or drop
// --network") if it lacks the capabilities or `ip netns add` is refused for permission
// reasons; FailedPrecondition if iproute2 is missing or namespaces cannot be made for
// another reason. Blocks for a few milliseconds (creates and deletes a probe namespace).
absl::Status CheckNetworkPrivileges();

// Deletes the namespaces left by runs whose creating process no longer exists (e.g. a
// run killed with SIGKILL), killing any process still inside them. Names embed the
// creator's pid: a namespace of a live process is never touched (if the pid was reused,
// its namespaces stay until that process ends). Returns the names it deleted. OK if
// there is nothing to do or namespaces are not supported; an error only if a stale
// namespace could not be deleted. Needs root when there is something to delete.
absl::StatusOr<std::vector<std::string>> RemoveStaleNetworks();

// A running emulated network. Names: a run tag "rs<pid hex>_<n>" (n counts the
// networks this process made), namespaces "<tag>_n<i>" for node i and "<tag>_sw" for
// the switch. In node i's namespace: lo and "rsn<i>" with address(i)/24; in the switch
// namespace: bridge "rsbr" with ports "rsp<i>". A profile's loopback is shaped on each
// node's lo. Thread-safe.
class EmulatedNetwork {
 public:
  // Builds the network for one node per entry of `node_roles` (e.g. {"master",
  // "worker", "worker"}; at most 250 nodes). Blocks while it runs ip/tc (about 10
  // commands per node, each bounded by a timeout). InvalidArgument for a disabled
  // profile, no nodes, or an override naming a role no node has; the errors of
  // CheckNetworkPrivileges; FailedPrecondition if the kernel lacks a needed qdisc (netem
  // for a delay, tbf for a rate); Internal with the failing command and its stderr
  // otherwise. On any error everything already created is removed again.
  static absl::StatusOr<std::unique_ptr<EmulatedNetwork>> Create(
      const NetworkProfile& profile, const std::vector<std::string>& node_roles);

  // Tears down (see Teardown); a failure is reported on stderr, never fatal.
  ~EmulatedNetwork();

  EmulatedNetwork(const EmulatedNetwork&) = delete;
  EmulatedNetwork& operator=(const EmulatedNetwork&) = delete;

  int num_nodes() const { return static_cast<int>(addresses_.size()); }
  // Node i's IPv4 address (dotted quad) in the private subnet, e.g. "10.187.3.1".
  const std::string& address(int node) const;
  // The argv prefix that runs a command inside node i: {"ip", "netns", "exec", <ns>}.
  // The command then runs as root in that namespace; it must exit (or be stopped by its
  // owner) before Teardown, which kills whatever is still inside.
  std::vector<std::string> CommandPrefix(int node) const;
  // Node namespaces, index = node.
  const std::vector<std::string>& namespaces() const { return node_namespaces_; }
  const std::string& switch_namespace() const { return switch_namespace_; }
  const std::string& tag() const { return tag_; }        // "rs<pid hex>_<n>"
  const std::string& subnet() const { return subnet_; }  // e.g. "10.187.3.0/24"
  const NetworkProfile& profile() const { return profile_; }
  const std::vector<std::string>& roles() const { return roles_; }

  // Kills any process still inside the namespaces, then deletes the node namespaces and
  // the switch namespace (their veths, bridge and qdiscs go with them). Idempotent;
  // something already gone is not an error. Blocks for the ip commands (bounded). Safe
  // to call from ordinary code after a SIGINT/SIGTERM was caught; not from a signal
  // handler. Returns the first failure, after trying every namespace.
  absl::Status Teardown();

 private:
  EmulatedNetwork() = default;

  // Create's building step, on a fresh object whose names and addresses are set: the
  // switch namespace with its bridge "rsbr", then per node its namespace, veth pair,
  // address, bridge port and the shaping of its lo and of both veth ends (profile_).
  // Stops at the first failure (FailedPrecondition for a missing qdisc, else the
  // failing command's error) and leaves what it made to Teardown. Blocks while the ip/tc commands run.
  absl::Status Build();
  // Records `name` in created_, then runs `ip netns add` for it (so that a half-done
  // add is cleaned too). Internal with the command's stderr on failure.
  absl::Status AddNamespace(const std::string& name);

  NetworkProfile profile_;
  std::vector<std::string> roles_;
  std::string tag_;
  std::string subnet_;
  std::vector<std::string> addresses_;
  std::vector<std::string> node_namespaces_;
  std::string switch_namespace_;

  absl::Mutex mu_;
  // Namespaces that may exist: each is added before its `ip netns add` runs.
  std::vector<std::string> created_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_NETEM_NETWORK_EMULATOR_H_
