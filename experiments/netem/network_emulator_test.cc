#include "experiments/netem/unprivileged.h"
#include "experiments/netem/network_emulator.h"

#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr absl::Duration kCommandTimeout = absl::Seconds(15);
constexpr const char* kPython = "/usr/bin/python3";

// ---------------------------------------------------------------------------------
// Parsing.

NetworkProfile MustParse(const std::string& text) {
  absl::StatusOr<NetworkProfile> p = ParseNetworkProfile(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  return p.ok() ? *p : NetworkProfile();
}

TEST(ParseNetworkProfileTest, EmptyAndNoneMeanNoEmulation) {
  for (const char* text : {"", "none", "  none ", " "}) {
    EXPECT_FALSE(MustParse(text).enabled) << "\"" << text << "\"";
  }
  EXPECT_EQ(ProfileToString(NetworkProfile()), "none");
}

TEST(ParseNetworkProfileTest, RatesAndDelays) {
  NetworkProfile p = MustParse("bw=1gbit,delay=0.5ms");
  EXPECT_TRUE(p.enabled);
  EXPECT_EQ(p.link.bits_per_sec, 1e9);
  EXPECT_EQ(p.link.delay, absl::Microseconds(500));
  EXPECT_TRUE(p.role_overrides.empty());

  struct Rate {
    const char* text;
    double bits;
  };
  for (const Rate& r :
       {Rate{"bw=100mbit", 1e8}, Rate{"bw=2500kbit", 2.5e6}, Rate{"bw=1000000", 1e6},
        Rate{"bw=1000bit", 1e3}, Rate{"bw=1.5Gbit", 1.5e9}, Rate{"bw=0.5mbit", 5e5},
        Rate{"bw=unlimited", 0}, Rate{" bw = 10gbit ", 1e10}}) {
    NetworkProfile q = MustParse(r.text);
    EXPECT_TRUE(q.enabled) << r.text;
    EXPECT_EQ(q.link.bits_per_sec, r.bits) << r.text;
    EXPECT_EQ(q.link.delay, absl::ZeroDuration()) << r.text;
  }
  struct Delay {
    const char* text;
    absl::Duration delay;
  };
  for (const Delay& d :
       {Delay{"delay=250us", absl::Microseconds(250)}, Delay{"delay=20ms", absl::Milliseconds(20)},
        Delay{"delay=1s", absl::Seconds(1)}, Delay{"delay=1.5ms", absl::Microseconds(1500)},
        Delay{"delay=0ms", absl::ZeroDuration()}}) {
    NetworkProfile q = MustParse(d.text);
    EXPECT_TRUE(q.enabled) << d.text;
    EXPECT_EQ(q.link.bits_per_sec, 0) << d.text;
    EXPECT_EQ(q.link.delay, d.delay) << d.text;
  }
}

TEST(ParseNetworkProfileTest, RoleOverridesStartFromTheDefaultLinkInAnyOrder) {
  for (const char* text :
       {"bw=1gbit,delay=0.5ms,master.bw=10gbit", "master.bw=10gbit,bw=1gbit,delay=0.5ms"}) {
    NetworkProfile p = MustParse(text);
    ASSERT_EQ(p.role_overrides.size(), 1u) << text;
    const LinkSpec master = p.role_overrides.at("master");
    EXPECT_EQ(master.bits_per_sec, 1e10) << text;
    EXPECT_EQ(master.delay, absl::Microseconds(500)) << text;
    EXPECT_EQ(LinkForRole(p, "master"), master);
    EXPECT_EQ(LinkForRole(p, "worker"), p.link);
    EXPECT_EQ(ProfileToString(p), "bw=1gbit,delay=500us,master.bw=10gbit");
  }
  NetworkProfile p = MustParse("bw=1gbit,server_2.delay=2ms,server_2.bw=unlimited,w.bw=1gbit");
  EXPECT_EQ(p.link.delay, absl::ZeroDuration());
  EXPECT_EQ(LinkForRole(p, "server_2"), (LinkSpec{0, absl::Milliseconds(2)}));
  EXPECT_EQ(LinkForRole(p, "w"), p.link);  // Same as the default, still listed.
  EXPECT_EQ(p.role_overrides.count("w"), 1u);

  // Only overrides: the default link is unshaped.
  NetworkProfile q = MustParse("slow.bw=100mbit");
  EXPECT_TRUE(q.enabled);
  EXPECT_EQ(q.link, LinkSpec());
  EXPECT_EQ(LinkForRole(q, "slow").bits_per_sec, 1e8);
}

TEST(ParseNetworkProfileTest, LoopbackIsReservedAndStartsUnshaped) {
  NetworkProfile p = MustParse("lo.bw=2gbit,bw=300mbit,delay=1ms");
  EXPECT_EQ(p.loopback, (LinkSpec{2e9, absl::ZeroDuration()}));  // Not the links' delay.
  EXPECT_TRUE(p.role_overrides.empty());                         // Not a role.
  EXPECT_EQ(p.link.bits_per_sec, 300e6);
  EXPECT_EQ(ProfileToString(p), "bw=300mbit,delay=1ms,lo.bw=2gbit");
  EXPECT_EQ(MustParse("bw=1gbit").loopback, LinkSpec());
  EXPECT_EQ(MustParse("lo.delay=20us").loopback, (LinkSpec{0, absl::Microseconds(20)}));
  // Create does not take "lo" for a role no node has.
  EXPECT_TRUE(absl::StrContains(ParseNetworkProfile("lo.rate=1gbit").status().message(), "lo.bw"));
}

TEST(ParseNetworkProfileTest, ToStringRoundTrips) {
  for (const char* text :
       {"bw=1gbit,delay=0.5ms", "bw=1gbit,delay=0.5ms,master.bw=10gbit", "delay=1.5ms",
        "bw=2500kbit", "bw=1234567", "bw=unlimited", "slow.bw=100mbit",
        "bw=1gbit,delay=2ms,master.delay=0ms,master.bw=unlimited,w.bw=1gbit",
        "bw=10gbit,x.delay=1s", "bw=342mbit,lo.bw=2gbit", "lo.delay=5us,master.bw=1gbit"}) {
    const NetworkProfile p = MustParse(text);
    const std::string s = ProfileToString(p);
    const NetworkProfile q = MustParse(s);
    EXPECT_EQ(q.enabled, p.enabled) << text << " -> " << s;
    EXPECT_EQ(q.link, p.link) << text << " -> " << s;
    EXPECT_EQ(q.role_overrides, p.role_overrides) << text << " -> " << s;
    EXPECT_EQ(q.loopback, p.loopback) << text << " -> " << s;
  }
}

TEST(ParseNetworkProfileTest, RejectsBadProfilesWithOneLine) {
  for (const char* text : {"bw",
                           "bw=",
                           "=1gbit",
                           "bw=fast",
                           "bw=1gbps",
                           "bw=1mbps",
                           "bw=10",
                           "bw=-1gbit",
                           "bw=1e15",
                           "bw=1..5gbit",
                           "delay=5",
                           "delay=5m",
                           "delay=5h",
                           "delay=0.5us",
                           "delay=11s",
                           "delay=-1ms",
                           "loss=1%",
                           "bw=1gbit,,delay=1ms",
                           "bw=1gbit,",
                           "bw=1gbit,bw=2gbit",
                           "Master.bw=1gbit",
                           ".bw=1gbit",
                           "master.rate=1gbit",
                           "master.worker.bw=1gbit",
                           "none,bw=1gbit",
                           "bw=1gbit delay=1ms",
                           "off"}) {
    absl::StatusOr<NetworkProfile> p = ParseNetworkProfile(text);
    ASSERT_FALSE(p.ok()) << "accepted \"" << text << "\"";
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_TRUE(absl::StartsWith(p.status().message(), "network profile \"")) << p.status();
    EXPECT_FALSE(absl::StrContains(p.status().message(), "\n")) << p.status();
  }
  EXPECT_TRUE(absl::StrContains(ParseNetworkProfile("bw=1gbps").status().message(),
                                "unknown unit \"gbps\""));
  EXPECT_TRUE(
      absl::StrContains(ParseNetworkProfile("lat=1ms").status().message(), "unknown key \"lat\""));
}

// ---------------------------------------------------------------------------------
// Create's argument checks need no privileges.

TEST(EmulatedNetworkTest, RejectsBadArgumentsBeforeTouchingAnything) {
  const NetworkProfile on = MustParse("bw=1gbit,master.bw=10gbit");
  EXPECT_EQ(EmulatedNetwork::Create(NetworkProfile(), {"a"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EmulatedNetwork::Create(on, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EmulatedNetwork::Create(on, std::vector<std::string>(251, "master")).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status s = EmulatedNetwork::Create(on, {"worker", "worker"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "role \"master\"")) << s;
}

// Without root: the clear error. As root: the same, from a child that gave root up.
TEST(EmulatedNetworkTest, WithoutRootTheErrorSaysSo) {
  auto check = []() -> std::string {
    const absl::Status priv = CheckNetworkPrivileges();
    const absl::Status create = EmulatedNetwork::Create(MustParse("bw=1gbit"), {"a", "b"}).status();
    return absl::StrCat(static_cast<int>(priv.code()), "|", priv.message(), "\n",
                        static_cast<int>(create.code()), "|", create.message());
  };
  absl::StatusOr<std::string> unprivileged = RunAsNobody(check);
  ASSERT_TRUE(unprivileged.ok()) << unprivileged.status();
  const std::string report = *unprivileged;
  const std::string expected = absl::StrCat(
      static_cast<int>(absl::StatusCode::kPermissionDenied),
      "|network emulation needs root (CAP_NET_ADMIN) to create namespaces; run as root or "
      "drop --network");
  std::vector<std::string> lines = absl::StrSplit(report, '\n');
  ASSERT_EQ(lines.size(), 2u) << report;
  EXPECT_EQ(lines[0], expected);
  EXPECT_EQ(lines[1], expected);
}

// ---------------------------------------------------------------------------------
// Real namespaces (root only).

std::set<std::string> ListNamespaces() {
  absl::StatusOr<CommandOutput> out = RunCommand({"ip", "netns", "list"}, kCommandTimeout);
  EXPECT_TRUE(out.ok() && out->exit_code == 0);
  std::set<std::string> names;
  if (!out.ok()) return names;
  for (absl::string_view line : absl::StrSplit(out->stdout_text, '\n', absl::SkipEmpty())) {
    names.insert(std::string(line.substr(0, line.find(' '))));
  }
  return names;
}

// Interfaces of the host's namespace that look like ours.
std::vector<std::string> HostLinksOfOurs(const std::string& tag) {
  absl::StatusOr<CommandOutput> out = RunCommand({"ip", "-o", "link", "show"}, kCommandTimeout);
  EXPECT_TRUE(out.ok() && out->exit_code == 0);
  std::vector<std::string> ours;
  if (!out.ok()) return ours;
  for (absl::string_view line : absl::StrSplit(out->stdout_text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(": ", 2));
    if (f.size() < 2) continue;
    const std::string name(f[1].substr(0, f[1].find('@')));
    if (absl::StartsWith(name, "rsn") || absl::StartsWith(name, "rsp") ||
        absl::StartsWith(name, "rsbr") || absl::StartsWith(name, tag)) {
      ours.push_back(name);
    }
  }
  return ours;
}

std::vector<std::string> InNode(const EmulatedNetwork& net, int node,
                                std::vector<std::string> argv) {
  std::vector<std::string> full = net.CommandPrefix(node);
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

std::string FindPing() {
  for (const char* p : {"/usr/bin/ping", "/bin/ping", "/usr/sbin/ping", "/sbin/ping"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// TCP connects to a closed port of `addr` from inside `node`: the RST proves the path
// works and the fastest of three (after one that warms ARP) is one round trip.
constexpr const char* kRttProbe = R"(
import socket, sys, time
addr = sys.argv[1]
def probe():
    s = socket.socket()
    s.settimeout(3)
    t = time.monotonic()
    try:
        s.connect((addr, 9))
    except ConnectionRefusedError:
        pass
    finally:
        s.close()
    return time.monotonic() - t
probe()
print(min(probe() for _ in range(3)))
)";

absl::StatusOr<double> RoundTripSeconds(const EmulatedNetwork& net, int from, int to) {
  absl::StatusOr<CommandOutput> out =
      RunCommand(InNode(net, from, {kPython, "-c", kRttProbe, net.address(to)}), kCommandTimeout);
  if (!out.ok()) return out.status();
  double rtt = 0;
  if (out->exit_code != 0 ||
      !absl::SimpleAtod(absl::StripAsciiWhitespace(out->stdout_text), &rtt)) {
    return absl::InternalError(absl::StrCat("rtt probe failed: ", out->stderr_text));
  }
  return rtt;
}

constexpr const char* kSink = R"(
import socket, sys
addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(1)
s.settimeout(10)
c, _ = s.accept()
c.settimeout(10)
got = 0
while got < n:
    b = c.recv(1 << 20)
    if not b:
        break
    got += len(b)
c.sendall(b"k")
c.close()
sys.exit(0 if got == n else 1)
)";

constexpr const char* kSource = R"(
import socket, sys, time
addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
deadline = time.monotonic() + 5
while True:
    try:
        c = socket.create_connection((addr, port), timeout=2)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.01)
c.settimeout(10)
data = b"x" * n
t = time.monotonic()
c.sendall(data)
if c.recv(1) != b"k":
    sys.exit(2)
print(time.monotonic() - t)
)";

// Seconds to send `bytes` over TCP from node `from` to node `to` (until the receiver
// acknowledged all of it).
absl::StatusOr<double> TransferSeconds(const EmulatedNetwork& net, int from, int to,
                                       int64_t bytes) {
  static int next_port = 5201;  // Inside fresh private namespaces: nothing else listens.
  const std::string port = absl::StrCat(next_port++);
  const std::string n = absl::StrCat(bytes);
  absl::StatusOr<CommandOutput> sink = absl::InternalError("not run");
  std::thread server([&] {
    sink = RunCommand(InNode(net, to, {kPython, "-c", kSink, net.address(to), port, n}),
                      kCommandTimeout);
  });
  absl::StatusOr<CommandOutput> source = RunCommand(
      InNode(net, from, {kPython, "-c", kSource, net.address(to), port, n}), kCommandTimeout);
  server.join();
  if (!source.ok()) return source.status();
  if (!sink.ok()) return sink.status();
  double seconds = 0;
  if (source->exit_code != 0 || sink->exit_code != 0 ||
      !absl::SimpleAtod(absl::StripAsciiWhitespace(source->stdout_text), &seconds)) {
    return absl::InternalError(absl::StrCat("transfer failed: source: ", source->stderr_text,
                                            " sink: ", sink->stderr_text));
  }
  return seconds;
}

class NamespaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    const absl::Status s = CheckNetworkPrivileges();
    if (!s.ok()) GTEST_SKIP() << "network namespaces unavailable here: " << s;
    if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is missing";
    ASSERT_TRUE(RemoveStaleNetworks().ok());
    before_ = ListNamespaces();
  }

  // Everything the test made is gone from the host's view.
  void ExpectAllGone(const std::string& tag) {
    EXPECT_EQ(ListNamespaces(), before_);
    EXPECT_TRUE(HostLinksOfOurs(tag).empty()) << absl::StrJoin(HostLinksOfOurs(tag), " ");
  }

  std::set<std::string> before_;
};

TEST_F(NamespaceTest, CreatesReachableNodesAndTearsDownCompletely) {
  absl::StatusOr<std::unique_ptr<EmulatedNetwork>> created =
      EmulatedNetwork::Create(MustParse("bw=1gbit"), {"master", "worker", "worker"});
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<EmulatedNetwork> net = std::move(*created);
  const std::string tag = net->tag();
  ASSERT_EQ(net->num_nodes(), 3);
  ASSERT_EQ(net->namespaces().size(), 3u);
  EXPECT_TRUE(absl::StartsWith(tag, absl::StrFormat("rs%x_", getpid()))) << tag;

  // `ip netns list` gained exactly the node and switch namespaces.
  std::set<std::string> expected = before_;
  for (const std::string& ns : net->namespaces()) {
    EXPECT_TRUE(absl::StartsWith(ns, tag)) << ns;
    expected.insert(ns);
  }
  expected.insert(net->switch_namespace());
  EXPECT_EQ(ListNamespaces(), expected);
  EXPECT_TRUE(HostLinksOfOurs(tag).empty()) << "the host's namespace was touched";

  // Addresses: distinct, in the subnet, on the node's veth.
  const std::string net_prefix = net->subnet().substr(0, net->subnet().rfind('.') + 1);
  std::set<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::StartsWith(net->address(i), net_prefix)) << net->address(i);
    addresses.insert(net->address(i));
    absl::StatusOr<CommandOutput> addr =
        RunCommand({"ip", "-n", net->namespaces()[i], "-4", "-o", "addr", "show"}, kCommandTimeout);
    ASSERT_TRUE(addr.ok() && addr->exit_code == 0);
    EXPECT_TRUE(absl::StrContains(addr->stdout_text,
                                  absl::StrCat("rsn", i, "    inet ", net->address(i), "/24")))
        << addr->stdout_text;
  }
  EXPECT_EQ(addresses.size(), 3u);

  // Both ends shaped: node side (upload) and switch side (download).
  for (const auto& [ns, dev] : {std::pair<std::string, std::string>{net->namespaces()[1], "rsn1"},
                                {net->switch_namespace(), "rsp1"}}) {
    absl::StatusOr<CommandOutput> q =
        RunCommand({"tc", "-n", ns, "qdisc", "show", "dev", dev}, kCommandTimeout);
    ASSERT_TRUE(q.ok() && q->exit_code == 0);
    EXPECT_TRUE(absl::StrContains(q->stdout_text, "tbf"))
        << ns << " " << dev << ": " << q->stdout_text;
    EXPECT_TRUE(absl::StrContains(q->stdout_text, "rate 1Gbit")) << q->stdout_text;
  }

  // Node 0 reaches node 1 (ping if there is one; a TCP probe always).
  const std::string ping = FindPing();
  if (!ping.empty()) {
    absl::StatusOr<CommandOutput> p =
        RunCommand(InNode(*net, 0, {ping, "-c", "1", "-W", "2", net->address(1)}), kCommandTimeout);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->exit_code, 0) << p->stdout_text << p->stderr_text;
  } else {
    std::cout << "no ping binary here: reachability checked with a TCP probe only\n";
  }
  absl::StatusOr<double> rtt = RoundTripSeconds(*net, 0, 1);
  ASSERT_TRUE(rtt.ok()) << rtt.status();
  std::cout << "node0 -> node1 rtt (no delay configured): " << *rtt * 1e3 << " ms\n";
  EXPECT_LT(*rtt, 0.05);
  absl::StatusOr<double> rtt2 = RoundTripSeconds(*net, 2, 0);
  ASSERT_TRUE(rtt2.ok()) << rtt2.status();

  // Something already gone is fine; teardown is idempotent.
  absl::StatusOr<CommandOutput> del =
      RunCommand({"ip", "netns", "delete", net->namespaces()[2]}, kCommandTimeout);
  ASSERT_TRUE(del.ok() && del->exit_code == 0);
  EXPECT_TRUE(net->Teardown().ok());
  EXPECT_TRUE(net->Teardown().ok());
  ExpectAllGone(tag);
  net.reset();
  ExpectAllGone(tag);
}

TEST_F(NamespaceTest, DestructorKillsLeftoverProcessesAndRemovesEverything) {
  absl::StatusOr<std::unique_ptr<EmulatedNetwork>> created =
      EmulatedNetwork::Create(MustParse("bw=100mbit"), {"worker", "worker"});
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<EmulatedNetwork> net = std::move(*created);
  const std::string tag = net->tag();
  // A process left running inside node 1 would keep its namespace (and veth) alive.
  std::thread sleeper([&] { (void)RunCommand(InNode(*net, 1, {"sleep", "30"}), kCommandTimeout); });
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<CommandOutput> pids =
        RunCommand({"ip", "netns", "pids", net->namespaces()[1]}, kCommandTimeout);
    if (pids.ok() && !absl::StripAsciiWhitespace(pids->stdout_text).empty()) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Time start = absl::Now();
  net.reset();
  sleeper.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "the sleeper was not killed";
  ExpectAllGone(tag);
}

TEST_F(NamespaceTest, ShapesEachNodesLinkInBothDirections) {
  // Node 1 has a 100 Mbit/s link; nodes 0 and 2 are unshaped.
  absl::StatusOr<std::unique_ptr<EmulatedNetwork>> created =
      EmulatedNetwork::Create(MustParse("slow.bw=100mbit"), {"fast", "slow", "fast"});
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<EmulatedNetwork> net = std::move(*created);
  const std::string tag = net->tag();
  constexpr int64_t kBytes = 5'000'000;
  const double ideal = kBytes * 8 / 100e6;  // 0.4 s at 100 Mbit/s.

  absl::StatusOr<double> download = TransferSeconds(*net, 0, 1, kBytes);  // switch -> node 1
  absl::StatusOr<double> upload = TransferSeconds(*net, 1, 0, kBytes);    // node 1 -> switch
  absl::StatusOr<double> free = TransferSeconds(*net, 0, 2, kBytes);      // unshaped
  ASSERT_TRUE(download.ok()) << download.status();
  ASSERT_TRUE(upload.ok()) << upload.status();
  ASSERT_TRUE(free.ok()) << free.status();
  std::cout << "5 MB at 100 Mbit/s (ideal " << ideal << " s): download " << *download
            << " s, upload " << *upload << " s; unshaped " << *free << " s\n";
  EXPECT_GE(*download, 0.7 * ideal);
  EXPECT_GE(*upload, 0.7 * ideal);
  EXPECT_LE(*download, 3 * ideal);
  EXPECT_LE(*upload, 3 * ideal);
  EXPECT_LT(*free, 0.5 * ideal);
  net.reset();
  ExpectAllGone(tag);
}

TEST_F(NamespaceTest, ShapesEachNodesLoopback) {
  // Two processes of one node talk over its lo (docs/cluster.md, devices per node):
  // lo.bw caps them; the link between nodes keeps its own rate.
  absl::StatusOr<std::unique_ptr<EmulatedNetwork>> created =
      EmulatedNetwork::Create(MustParse("bw=1gbit,lo.bw=100mbit"), {"worker", "worker"});
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<EmulatedNetwork> net = std::move(*created);
  const std::string tag = net->tag();
  for (const std::string& ns : net->namespaces()) {
    absl::StatusOr<CommandOutput> q = RunCommand({"tc", "-n", ns, "qdisc", "show", "dev", "lo"}, kCommandTimeout);
    ASSERT_TRUE(q.ok() && q->exit_code == 0);
    EXPECT_TRUE(absl::StrContains(q->stdout_text, "tbf")) << ns << ": " << q->stdout_text;
    EXPECT_TRUE(absl::StrContains(q->stdout_text, "rate 100Mbit")) << q->stdout_text;
  }
  constexpr int64_t kBytes = 5'000'000;
  const double ideal = kBytes * 8 / 100e6;  // 0.4 s at 100 Mbit/s.
  absl::StatusOr<double> inside = TransferSeconds(*net, 1, 1, kBytes);   // node 1's lo
  absl::StatusOr<double> across = TransferSeconds(*net, 0, 1, kBytes);   // 1 Gbit/s links
  ASSERT_TRUE(inside.ok()) << inside.status();
  ASSERT_TRUE(across.ok()) << across.status();
  std::cout << "5 MB inside a node with lo.bw=100mbit (ideal " << ideal << " s): " << *inside
            << " s; across 1 Gbit/s links: " << *across << " s\n";
  EXPECT_GE(*inside, 0.7 * ideal);
  EXPECT_LE(*inside, 3 * ideal);
  EXPECT_LT(*across, 0.5 * ideal);
  net.reset();
  ExpectAllGone(tag);
}

TEST_F(NamespaceTest, DelayAddsLatencyOnBothLinksInBothDirections) {
  absl::StatusOr<std::unique_ptr<EmulatedNetwork>> created =
      EmulatedNetwork::Create(MustParse("delay=20ms"), {"worker", "worker"});
  if (!created.ok() && created.status().code() == absl::StatusCode::kFailedPrecondition &&
      absl::StrContains(created.status().message(), "netem")) {
    ExpectAllGone("rs-none");  // The failed Create left nothing behind.
    GTEST_SKIP() << "kernel without netem, delay cannot be emulated here: " << created.status();
  }
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<EmulatedNetwork> net = std::move(*created);
  const std::string tag = net->tag();
  // 20 ms per link per direction: one-way 40 ms, round trip 80 ms.
  absl::StatusOr<double> rtt = RoundTripSeconds(*net, 0, 1);
  ASSERT_TRUE(rtt.ok()) << rtt.status();
  std::cout << "rtt with delay=20ms: " << *rtt * 1e3 << " ms\n";
  EXPECT_GE(*rtt, 0.072);
  EXPECT_LT(*rtt, 0.2);
  const std::string ping = FindPing();
  if (!ping.empty()) {
    absl::StatusOr<CommandOutput> p =
        RunCommand(InNode(*net, 0, {ping, "-c", "1", "-W", "2", net->address(1)}), kCommandTimeout);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->exit_code, 0) << p->stdout_text << p->stderr_text;
    const size_t at = p->stdout_text.find("time=");
    double ms = 0;
    ASSERT_NE(at, std::string::npos) << p->stdout_text;
    ASSERT_TRUE(absl::SimpleAtod(
        absl::string_view(p->stdout_text).substr(at + 5, p->stdout_text.find(' ', at) - at - 5),
        &ms));
    EXPECT_GE(ms, 40);
  }
  net.reset();
  ExpectAllGone(tag);

  // Rate and delay together: the rate still holds.
  created = EmulatedNetwork::Create(MustParse("bw=100mbit,delay=5ms"), {"worker", "worker"});
  ASSERT_TRUE(created.ok()) << created.status();
  net = std::move(*created);
  absl::StatusOr<double> t = TransferSeconds(*net, 0, 1, 5'000'000);
  ASSERT_TRUE(t.ok()) << t.status();
  std::cout << "5 MB at 100 Mbit/s with delay=5ms: " << *t << " s\n";
  EXPECT_GE(*t, 0.7 * 0.4);
  EXPECT_LE(*t, 3 * 0.4);
  const std::string tag2 = net->tag();
  net.reset();
  ExpectAllGone(tag2);
}

// Reads what a forked child writes until it closes the pipe (bounded).
std::string ReadAll(int fd, absl::Duration timeout) {
  std::string text;
  char buf[4096];
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, n);
  }
  close(fd);
  return text;
}

// Waits for `pid` up to `timeout`, then SIGKILLs it. Returns the wait status.
int WaitOrKill(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (absl::Now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    absl::SleepFor(absl::Milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

std::atomic<int> g_interrupted{0};
void OnInterrupt(int) { g_interrupted.store(1); }

// The owner's pattern for Ctrl-C: its handler only sets a flag, its main code then
// destroys the network. A process still running inside a node is killed by teardown.
TEST_F(NamespaceTest, OwnerThatCatchesSigintTearsDownEverything) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    struct sigaction sa = {};
    sa.sa_handler = OnInterrupt;
    sigaction(SIGINT, &sa, nullptr);
    absl::StatusOr<std::unique_ptr<EmulatedNetwork>> net =
        EmulatedNetwork::Create(MustParse("bw=1gbit,master.bw=10gbit"), {"master", "worker"});
    if (!net.ok()) _exit(1);
    std::thread worker([&] {
      (void)RunCommand(InNode(**net, 1, {"sleep", "60"}), absl::Seconds(60));
    });
    const std::string tag = (*net)->tag();
    if (write(fds[1], tag.data(), tag.size()) < 0) _exit(3);
    close(fds[1]);
    while (!g_interrupted.load()) absl::SleepFor(absl::Milliseconds(5));
    net->reset();  // Teardown from ordinary code, after the signal.
    worker.join();
    _exit(0);
  }
  close(fds[1]);
  const std::string tag = ReadAll(fds[0], absl::Seconds(30));
  ASSERT_FALSE(tag.empty()) << "the child could not create its network";
  // Wait until the worker runs inside node 1, then interrupt.
  const std::string node1 = absl::StrCat(tag, "_n1");
  for (int i = 0; i < 300; ++i) {
    absl::StatusOr<CommandOutput> pids =
        RunCommand({"ip", "netns", "pids", node1}, kCommandTimeout);
    if (pids.ok() && !absl::StripAsciiWhitespace(pids->stdout_text).empty()) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(ListNamespaces().count(node1), 1u);
  kill(child, SIGINT);
  const int status = WaitOrKill(child, absl::Seconds(20));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ExpectAllGone(tag);
}

// A run killed with SIGKILL cannot clean up: its namespaces stay until the next run's
// RemoveStaleNetworks().
TEST_F(NamespaceTest, StaleNetworksOfAKilledRunAreRemovedByTheNextRun) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    absl::StatusOr<std::unique_ptr<EmulatedNetwork>> net =
        EmulatedNetwork::Create(MustParse("bw=100mbit"), {"master", "worker", "worker"});
    std::string report;
    if (net.ok()) {
      std::vector<std::string> names = (*net)->namespaces();
      names.push_back((*net)->switch_namespace());
      report = absl::StrCat("OK ", (*net)->tag(), " ", absl::StrJoin(names, " "));
    } else {
      report = absl::StrCat("ERR ", net.status().ToString());
    }
    if (write(fds[1], report.data(), report.size()) < 0) _exit(3);
    close(fds[1]);
    if (!net.ok()) _exit(1);
    net->release();  // Never torn down: this process will be SIGKILLed.
    while (true) pause();
  }
  close(fds[1]);
  const std::string report = ReadAll(fds[0], absl::Seconds(30));
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(absl::StartsWith(report, "OK ")) << report;
  std::vector<std::string> fields = absl::StrSplit(report, ' ');
  const std::string tag = fields[1];
  const std::set<std::string> names(fields.begin() + 2, fields.end());
  ASSERT_EQ(names.size(), 4u);

  // Left behind by the killed child.
  std::set<std::string> after_kill = ListNamespaces();
  for (const std::string& ns : names) EXPECT_EQ(after_kill.count(ns), 1u) << ns;

  absl::StatusOr<std::vector<std::string>> removed = RemoveStaleNetworks();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(std::set<std::string>(removed->begin(), removed->end()), names);
  ExpectAllGone(tag);
  // Nothing more to do the second time.
  removed = RemoveStaleNetworks();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(removed->empty());
}

}  // namespace
}  // namespace ringside
