#include "experiments/netem/network_emulator.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "experiments/netem/bandwidth.h"
#include "experiments/netem/run_tag.h"
#include "absl/time/clock.h"

extern char** environ;

namespace ringside {
namespace {

// Every ip/tc call is bounded by this (they normally take milliseconds).
constexpr absl::Duration kIpTimeout = absl::Seconds(10);
constexpr int kMaxNodes = 250;
constexpr const char* kNetnsDir = "/run/netns";
// The profile key of every node's loopback ("lo.bw="): reserved, not a role.
constexpr const char* kLoopbackKey = "lo";
constexpr const char* kPrivilegeMessage =
    "network emulation needs root (CAP_NET_ADMIN) to create namespaces; run as root or "
    "drop --network";

// Counts the networks (and probes) this process made, so names stay unique per run.
std::atomic<int> g_network_seq{0};

std::string JoinArgv(const std::vector<std::string>& argv) { return absl::StrJoin(argv, " "); }

std::string FirstLine(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  const size_t nl = text.find('\n');
  return std::string(nl == absl::string_view::npos ? text : text.substr(0, nl));
}

// Runs an ip/tc command; any failure (including a non-zero exit) is an error that
// names the command and carries the first line of its stderr.
absl::StatusOr<CommandOutput> Run(const std::vector<std::string>& argv) {
  absl::StatusOr<CommandOutput> out = RunCommand(argv, kIpTimeout);
  if (!out.ok()) {
    return absl::Status(out.status().code(),
                        absl::StrCat("`", JoinArgv(argv), "`: ", out.status().message()));
  }
  if (out->exit_code != 0) {
    std::string why = FirstLine(out->stderr_text);
    if (why.empty()) {
      why = out->term_signal != 0 ? absl::StrCat("killed by signal ", out->term_signal)
                                  : absl::StrCat("exit status ", out->exit_code);
    }
    return absl::InternalError(absl::StrCat("`", JoinArgv(argv), "` failed: ", why));
  }
  return out;
}

absl::Status RunOk(const std::vector<std::string>& argv) { return Run(argv).status(); }

bool IsPermissionError(absl::string_view text) {
  return absl::StrContains(text, "Operation not permitted") ||
         absl::StrContains(text, "Permission denied");
}

bool NamespaceExists(const std::string& name) {
  struct stat st;
  return stat(absl::StrCat(kNetnsDir, "/", name).c_str(), &st) == 0;
}

// Kills what still runs inside namespace `name` (not this process), then deletes it.
// A namespace that is already gone is fine.
absl::Status DeleteNamespace(const std::string& name) {
  if (!NamespaceExists(name)) return absl::OkStatus();
  absl::StatusOr<CommandOutput> pids = RunCommand({"ip", "netns", "pids", name}, kIpTimeout);
  if (pids.ok() && pids->exit_code == 0) {
    for (absl::string_view token :
         absl::StrSplit(pids->stdout_text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(token, &pid) && pid > 1 && pid != getpid()) kill(pid, SIGKILL);
    }
  }
  absl::Status status = RunOk({"ip", "netns", "delete", name});
  if (!status.ok() && !NamespaceExists(name)) return absl::OkStatus();  // Raced: gone.
  return status;
}

// CAP_NET_ADMIN and CAP_SYS_ADMIN (`ip netns add` mounts /run/netns/<name>) in the
// effective set. Read from /proc, since root in a container may lack them.
bool HasCapabilities() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "CapEff:")) continue;
    uint64_t caps = 0;
    const std::string hex(absl::StripAsciiWhitespace(line.substr(7)));
    if (sscanf(hex.c_str(), "%" SCNx64, &caps) != 1) break;
    constexpr uint64_t kNetAdmin = uint64_t{1} << 12;
    constexpr uint64_t kSysAdmin = uint64_t{1} << 21;
    return (caps & kNetAdmin) && (caps & kSysAdmin);
  }
  return geteuid() == 0;  // No /proc: let `ip netns add` decide.
}

// ---------------------------------------------------------------------------------
// Profile parsing.

bool IsRoleName(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_')) return false;
  }
  return true;
}

// Splits "12.5mbit" into "12.5" and "mbit". False if there is no number.
bool SplitNumber(absl::string_view v, absl::string_view* number, absl::string_view* unit) {
  size_t i = 0;
  while (i < v.size() && (absl::ascii_isdigit(v[i]) || v[i] == '.')) ++i;
  if (i == 0) return false;
  *number = v.substr(0, i);
  *unit = v.substr(i);
  return true;
}

// A link rate in netem's range, in bits per second ("unlimited": 0). The grammar is
// bandwidth.h's.
absl::Status ParseRate(absl::string_view v, double* bits_per_sec) {
  if (absl::EqualsIgnoreCase(v, "unlimited")) {
    *bits_per_sec = 0;
    return absl::OkStatus();
  }
  absl::StatusOr<double> bytes_per_sec = ParseBandwidth(v);
  if (!bytes_per_sec.ok()) return bytes_per_sec.status();
  const double bits = std::round(*bytes_per_sec * 8);
  if (bits < 1e3) return absl::InvalidArgumentError("rate below 1kbit");
  if (bits > 1e13) return absl::InvalidArgumentError("rate above 10000gbit");
  *bits_per_sec = bits;
  return absl::OkStatus();
}

absl::Status ParseDelay(absl::string_view v, absl::Duration* delay) {
  absl::string_view number, unit;
  if (!SplitNumber(v, &number, &unit) || unit.empty()) {
    return absl::InvalidArgumentError("expected <number>us|ms|s");
  }
  if (unit != "us" && unit != "ms" && unit != "s") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown time unit \"", unit, "\" (use us, ms or s)"));
  }
  absl::Duration d;
  if (!absl::ParseDuration(v, &d)) return absl::InvalidArgumentError("not a duration");
  if (d % absl::Microseconds(1) != absl::ZeroDuration()) {
    return absl::InvalidArgumentError("not a whole number of microseconds");
  }
  if (d > absl::Seconds(10)) return absl::InvalidArgumentError("delay above 10s");
  *delay = d;
  return absl::OkStatus();
}

std::string FormatDelay(absl::Duration d) {
  return d == absl::ZeroDuration() ? "0ms" : absl::FormatDuration(d);
}

std::string FormatRateOrUnlimited(double bits) { return bits > 0 ? FormatBitRate(bits) : "unlimited"; }

// ---------------------------------------------------------------------------------
// Subnet choice and tc.

struct Prefix {
  uint32_t addr = 0;
  int len = 32;
};

bool ParsePrefix(absl::string_view token, Prefix* p) {
  std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(token, '/');
  std::vector<absl::string_view> octets = absl::StrSplit(parts.first, '.');
  if (octets.size() != 4) return false;
  uint32_t addr = 0;
  for (absl::string_view o : octets) {
    int v = 0;
    if (o.empty() || !absl::SimpleAtoi(o, &v) || v < 0 || v > 255) return false;
    addr = (addr << 8) | static_cast<uint32_t>(v);
  }
  int len = 32;
  if (!parts.second.empty() && (!absl::SimpleAtoi(parts.second, &len) || len < 0 || len > 32)) {
    return false;
  }
  p->addr = addr;
  p->len = len;
  return true;
}

bool Overlaps(const Prefix& a, const Prefix& b) {
  const int len = std::min(a.len, b.len);
  const uint32_t mask = len == 0 ? 0 : ~uint32_t{0} << (32 - len);
  return (a.addr & mask) == (b.addr & mask);
}

// Every IPv4 prefix or address the host's routes and addresses mention (default
// routes excluded). Best effort: an empty list if ip fails.
std::vector<Prefix> HostPrefixes() {
  std::vector<Prefix> prefixes;
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"ip", "-4", "-o", "route", "show", "table", "all"},
        std::vector<std::string>{"ip", "-4", "-o", "addr", "show"}}) {
    absl::StatusOr<CommandOutput> out = RunCommand(argv, kIpTimeout);
    if (!out.ok() || out->exit_code != 0) continue;
    for (absl::string_view token :
         absl::StrSplit(out->stdout_text, absl::ByAnyChar(" \t\n\\"), absl::SkipEmpty())) {
      Prefix p;
      if (ParsePrefix(token, &p) && p.len > 0) prefixes.push_back(p);
    }
  }
  return prefixes;
}

// A 10.x.y.0/24 in 10.128.0.0/9 that no host route or address overlaps, starting from
// a point that depends on the run so that concurrent runs differ.
Prefix ChooseSubnet(uint32_t seed) {
  const std::vector<Prefix> host = HostPrefixes();
  constexpr uint32_t kCount = 1 << 15;  // /24s in 10.128.0.0/9.
  for (uint32_t k = 0; k < kCount; ++k) {
    const uint32_t idx = (seed + k) % kCount;
    Prefix candidate{(10u << 24) | ((128u + (idx >> 8)) << 16) | ((idx & 0xff) << 8), 24};
    bool clash = false;
    for (const Prefix& h : host) clash = clash || Overlaps(candidate, h);
    if (!clash) return candidate;
  }
  // Every /24 is in use on the host: the namespaces are isolated anyway.
  return Prefix{(10u << 24) | (200u << 16) | ((seed & 0xff) << 8), 24};
}

std::string FormatAddress(uint32_t a) {
  return absl::StrFormat("%d.%d.%d.%d", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

// Installs the egress qdiscs for `link` on `dev` in namespace `ns`:
//   rate only:  root tbf
//   delay only: root netem
//   both:       root tbf (1:) with netem (10:) as its child
absl::Status ShapeEgress(const std::string& ns, const std::string& dev, const LinkSpec& link) {
  const bool rate = link.bits_per_sec > 0;
  const bool delay = link.delay > absl::ZeroDuration();
  if (!rate && !delay) return absl::OkStatus();  // veth keeps its default (noqueue).
  const std::vector<std::string> base = {"tc", "-n", ns, "qdisc", "add", "dev", dev};

  std::vector<std::string> netem = base;
  if (rate) {
    // Burst: 1 ms worth of bytes, at least 128 KiB: two 64 KiB GSO packets. tbf
    // segments a GSO packet larger than its burst into MTU-sized ones, and the
    // receiver then wakes per 1500 bytes instead of per 64 KiB; on a node with a CPU
    // share (--node_cpus) that per-packet work came out of the share and slowed
    // DDP's backward by a third at 150 Mbit/s with a 32 KiB burst (docs/network.md).
    // The price: at low rates a burst of up to 128 KiB leaves at once (7 ms' worth at
    // 150 Mbit/s); rates over a window of 50 ms or more are exact. Queue: 50 ms at the
    // link rate.
    const double bytes_per_sec = link.bits_per_sec / 8;
    const int64_t burst = std::max<int64_t>(128 << 10, static_cast<int64_t>(bytes_per_sec / 1000));
    std::vector<std::string> tbf = base;
    tbf.insert(tbf.end(), {"root", "handle", "1:", "tbf", "rate",
                           absl::StrFormat("%.0fbit", link.bits_per_sec), "burst",
                           absl::StrCat(burst), "latency", "50ms"});
    absl::Status s = RunOk(tbf);
    if (!s.ok()) {
      if (absl::StrContains(s.message(), "qdisc kind is unknown")) {
        return absl::FailedPreconditionError(absl::StrCat(
            "rate shaping needs the tbf qdisc (CONFIG_NET_SCH_TBF), which this kernel lacks: ",
            s.message()));
      }
      return s;
    }
    netem.insert(netem.end(), {"parent", "1:1", "handle", "10:"});
  } else {
    netem.insert(netem.end(), {"root", "handle", "10:"});
  }
  if (!delay) return absl::OkStatus();

  // netem holds every packet for `delay`: its packet limit must cover what the link
  // carries meanwhile (plus tbf's 50 ms queue), or it would drop.
  int64_t limit = 100000;
  if (rate) {
    const double seconds = absl::ToDoubleSeconds(link.delay) + 0.05;
    limit =
        std::max<int64_t>(1000, static_cast<int64_t>(link.bits_per_sec / 8 * seconds / 1500) * 2);
  }
  netem.insert(netem.end(),
               {"netem", "delay", absl::StrCat(absl::ToInt64Microseconds(link.delay), "us"),
                "limit", absl::StrCat(limit)});
  absl::Status s = RunOk(netem);
  if (!s.ok() && absl::StrContains(s.message(), "qdisc kind is unknown")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "delay emulation needs the netem qdisc (CONFIG_NET_SCH_NETEM, module sch_netem), "
        "which this kernel lacks; drop delay= or use a kernel with netem: ",
        s.message()));
  }
  return s;
}

std::string MakeTag() {
  return absl::StrFormat("rs%x_%d", static_cast<unsigned>(getpid()), g_network_seq.fetch_add(1));
}

// Create's checks of its arguments, before anything is probed or made: an enabled
// profile, 1 to kMaxNodes nodes, and no override for a role that no node has.
// InvalidArgument naming what is wrong otherwise.
absl::Status CheckTopology(const NetworkProfile& profile,
                           const std::vector<std::string>& node_roles) {
  if (!profile.enabled) {
    return absl::InvalidArgumentError("network emulation is off in this profile (\"none\")");
  }
  if (node_roles.empty() || node_roles.size() > kMaxNodes) {
    return absl::InvalidArgumentError(absl::StrCat("network emulation needs 1 to ", kMaxNodes,
                                                   " nodes, got ", node_roles.size()));
  }
  const std::set<std::string> roles(node_roles.begin(), node_roles.end());
  for (const auto& [role, link] : profile.role_overrides) {
    if (!roles.count(role)) {
      return absl::InvalidArgumentError(
          absl::StrCat("network profile overrides role \"", role,
                       "\" but no node has it (roles: ", absl::StrJoin(roles, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------------

absl::StatusOr<NetworkProfile> ParseNetworkProfile(absl::string_view text) {
  const std::string quoted = absl::StrCat("network profile \"", text, "\": ");
  NetworkProfile profile;
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (trimmed.empty() || trimmed == "none") return profile;
  profile.enabled = true;

  struct Item {
    std::string role;  // Empty: the default link.
    std::string key;
    std::string value;
  };
  std::vector<Item> items;
  std::set<std::string> seen;
  for (absl::string_view raw : absl::StrSplit(trimmed, ',')) {
    const absl::string_view item = absl::StripAsciiWhitespace(raw);
    if (item.empty()) return absl::InvalidArgumentError(absl::StrCat(quoted, "empty item"));
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(quoted, "\"", item, "\" is not key=value (e.g. bw=1gbit)"));
    }
    const std::string full_key(absl::StripAsciiWhitespace(item.substr(0, eq)));
    Item parsed;
    parsed.value = std::string(absl::StripAsciiWhitespace(item.substr(eq + 1)));
    const size_t dot = full_key.find('.');
    if (dot == std::string::npos) {
      parsed.key = full_key;
    } else {
      parsed.role = full_key.substr(0, dot);
      parsed.key = full_key.substr(dot + 1);
      if (!IsRoleName(parsed.role)) {
        return absl::InvalidArgumentError(absl::StrCat(quoted, "bad role name \"", parsed.role,
                                                       "\" in \"", item, "\" (use [a-z0-9_]+)"));
      }
    }
    if (parsed.key != "bw" && parsed.key != "delay") {
      return absl::InvalidArgumentError(
          absl::StrCat(quoted, "unknown key \"", full_key,
                       "\" (expected bw, delay, <role>.bw, <role>.delay, lo.bw or lo.delay)"));
    }
    if (!seen.insert(full_key).second) {
      return absl::InvalidArgumentError(absl::StrCat(quoted, "\"", full_key, "\" given twice"));
    }
    items.push_back(std::move(parsed));
  }

  auto apply = [&](const Item& item, LinkSpec* link) -> absl::Status {
    absl::Status s = item.key == "bw" ? ParseRate(item.value, &link->bits_per_sec)
                                      : ParseDelay(item.value, &link->delay);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(quoted, "bad value in \"", item.role.empty() ? "" : item.role + ".",
                       item.key, "=", item.value, "\": ", s.message()));
    }
    return absl::OkStatus();
  };
  // Plain keys first, so that overrides start from the resolved default link.
  for (const Item& item : items) {
    if (item.role.empty()) {
      absl::Status s = apply(item, &profile.link);
      if (!s.ok()) return s;
    }
  }
  for (const Item& item : items) {
    if (item.role.empty()) continue;
    if (item.role == kLoopbackKey) {  // Not a role: starts unshaped.
      absl::Status s = apply(item, &profile.loopback);
      if (!s.ok()) return s;
      continue;
    }
    auto it = profile.role_overrides.emplace(item.role, profile.link).first;
    absl::Status s = apply(item, &it->second);
    if (!s.ok()) return s;
  }
  return profile;
}

std::string ProfileToString(const NetworkProfile& profile) {
  if (!profile.enabled) return "none";
  std::vector<std::string> items;
  const LinkSpec& base = profile.link;
  if (base.bits_per_sec > 0) items.push_back(absl::StrCat("bw=", FormatBitRate(base.bits_per_sec)));
  if (base.delay > absl::ZeroDuration()) {
    items.push_back(absl::StrCat("delay=", FormatDelay(base.delay)));
  }
  for (const auto& [role, link] : profile.role_overrides) {
    const bool bw_differs = link.bits_per_sec != base.bits_per_sec;
    if (bw_differs || link.delay == base.delay) {  // Always say something about the role.
      items.push_back(absl::StrCat(role, ".bw=", FormatRateOrUnlimited(link.bits_per_sec)));
    }
    if (link.delay != base.delay) {
      items.push_back(absl::StrCat(role, ".delay=", FormatDelay(link.delay)));
    }
  }
  if (profile.loopback.bits_per_sec > 0) {
    items.push_back(absl::StrCat(kLoopbackKey, ".bw=", FormatBitRate(profile.loopback.bits_per_sec)));
  }
  if (profile.loopback.delay > absl::ZeroDuration()) {
    items.push_back(absl::StrCat(kLoopbackKey, ".delay=", FormatDelay(profile.loopback.delay)));
  }
  // An enabled profile without limits still emulates (separate unshaped namespaces).
  if (items.empty()) return "bw=unlimited";
  return absl::StrJoin(items, ",");
}

LinkSpec LinkForRole(const NetworkProfile& profile, const std::string& role) {
  auto it = profile.role_overrides.find(role);
  return it == profile.role_overrides.end() ? profile.link : it->second;
}

absl::Status CheckNetworkPrivileges() {
  if (!HasCapabilities()) return absl::PermissionDeniedError(kPrivilegeMessage);
  for (const char* tool : {"ip", "tc"}) {
    absl::StatusOr<CommandOutput> v = RunCommand({tool, "-V"}, kIpTimeout);
    if (!v.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("network emulation needs iproute2's `", tool, "`: ", v.status().message()));
    }
  }
  const std::string probe = absl::StrCat(MakeTag(), "_probe");
  absl::StatusOr<CommandOutput> add = RunCommand({"ip", "netns", "add", probe}, kIpTimeout);
  if (!add.ok() || add->exit_code != 0) {
    (void)DeleteNamespace(probe);  // A half-made mount point, if any.
    const std::string why =
        add.ok() ? FirstLine(add->stderr_text) : std::string(add.status().message());
    if (IsPermissionError(why)) {
      return absl::PermissionDeniedError(
          absl::StrCat(kPrivilegeMessage, " (ip netns add: ", why, ")"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create a network namespace (`ip netns add`): ", why));
  }
  return DeleteNamespace(probe);
}

absl::StatusOr<std::vector<std::string>> RemoveStaleNetworks() {
  std::vector<std::string> stale;
  DIR* dir = opendir(kNetnsDir);
  if (dir == nullptr) return stale;  // No namespaces at all.
  while (struct dirent* entry = readdir(dir)) {
    if (CreatedByDeadProcess(entry->d_name)) stale.push_back(entry->d_name);
  }
  closedir(dir);
  // Sorted, node namespaces go before switch namespaces ("_n" before "_sw").
  return RemoveEach(std::move(stale), DeleteNamespace);
}

absl::StatusOr<std::unique_ptr<EmulatedNetwork>> EmulatedNetwork::Create(
    const NetworkProfile& profile, const std::vector<std::string>& node_roles) {
  absl::Status checked = CheckTopology(profile, node_roles);
  if (!checked.ok()) return checked;
  absl::Status privileges = CheckNetworkPrivileges();
  if (!privileges.ok()) return privileges;

  std::unique_ptr<EmulatedNetwork> net(new EmulatedNetwork());
  net->profile_ = profile;
  net->roles_ = node_roles;
  net->tag_ = MakeTag();
  const Prefix subnet = ChooseSubnet(static_cast<uint32_t>(getpid()) * 131u +
                                     static_cast<uint32_t>(g_network_seq.load()) * 7919u);
  net->subnet_ = absl::StrCat(FormatAddress(subnet.addr), "/24");
  net->switch_namespace_ = absl::StrCat(net->tag_, "_sw");
  for (size_t i = 0; i < node_roles.size(); ++i) {
    net->node_namespaces_.push_back(absl::StrCat(net->tag_, "_n", i));
    net->addresses_.push_back(FormatAddress(subnet.addr + static_cast<uint32_t>(i) + 1));
  }

  absl::Status status = net->Build();
  if (!status.ok()) {
    absl::Status cleanup = net->Teardown();
    if (!cleanup.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat(status.message(), "; cleanup also failed: ", cleanup.message()));
    }
    return status;
  }
  return net;
}

absl::Status EmulatedNetwork::AddNamespace(const std::string& name) {
  {
    absl::MutexLock lock(&mu_);
    created_.push_back(name);  // Before the add: a half-done add is cleaned too.
  }
  return RunOk({"ip", "netns", "add", name});
}

absl::Status EmulatedNetwork::Build() {
  const std::string& sw = switch_namespace_;
  absl::Status s = AddNamespace(sw);
  if (s.ok()) s = RunOk({"ip", "-n", sw, "link", "add", "rsbr", "type", "bridge"});
  if (s.ok()) s = RunOk({"ip", "-n", sw, "link", "set", "rsbr", "up"});
  for (size_t i = 0; s.ok() && i < roles_.size(); ++i) {
    const std::string& ns = node_namespaces_[i];
    const std::string node_dev = absl::StrCat("rsn", i);
    const std::string port_dev = absl::StrCat("rsp", i);
    const LinkSpec link = LinkForRole(profile_, roles_[i]);
    s = AddNamespace(ns);
    // Created directly across the two namespaces: never visible in the host's.
    if (s.ok()) {
      s = RunOk({"ip", "-n", ns, "link", "add", node_dev, "type", "veth", "peer", "name",
                 port_dev, "netns", sw});
    }
    if (s.ok()) s = RunOk({"ip", "-n", ns, "link", "set", "lo", "up"});
    // The node's processes to each other (one queue, both directions).
    if (s.ok()) s = ShapeEgress(ns, "lo", profile_.loopback);
    if (s.ok()) {
      s = RunOk({"ip", "-n", ns, "addr", "add", absl::StrCat(addresses_[i], "/24"), "dev",
                 node_dev});
    }
    if (s.ok()) s = RunOk({"ip", "-n", ns, "link", "set", node_dev, "up"});
    if (s.ok()) s = RunOk({"ip", "-n", sw, "link", "set", port_dev, "master", "rsbr"});
    if (s.ok()) s = RunOk({"ip", "-n", sw, "link", "set", port_dev, "up"});
    if (s.ok()) s = ShapeEgress(ns, node_dev, link);  // Upload: node -> switch.
    if (s.ok()) s = ShapeEgress(sw, port_dev, link);  // Download: switch -> node.
  }
  return s;
}

EmulatedNetwork::~EmulatedNetwork() {
  absl::Status s = Teardown();
  if (!s.ok()) {
    fprintf(stderr, "ringside: tearing down emulated network %s: %s\n", tag_.c_str(),
            std::string(s.message()).c_str());
  }
}

const std::string& EmulatedNetwork::address(int node) const { return addresses_.at(node); }

std::vector<std::string> EmulatedNetwork::CommandPrefix(int node) const {
  return {"ip", "netns", "exec", node_namespaces_.at(node)};
}

absl::Status EmulatedNetwork::Teardown() {
  absl::MutexLock lock(&mu_);
  // Node namespaces first (each takes its veth pair, and so a bridge port, with it).
  std::vector<std::string> order;
  for (const std::string& name : created_) {
    if (name != switch_namespace_) order.push_back(name);
  }
  if (std::find(created_.begin(), created_.end(), switch_namespace_) != created_.end()) {
    order.push_back(switch_namespace_);
  }
  absl::Status first_error;
  std::vector<std::string> left;
  for (const std::string& name : order) {
    absl::Status s = DeleteNamespace(name);
    if (!s.ok()) {
      left.push_back(name);
      if (first_error.ok()) first_error = s;
    }
  }
  created_ = std::move(left);  // A later call retries what failed.
  return first_error;
}

}  // namespace ringside
