#include "experiments/netem/cpu_share.h"

#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "experiments/netem/unprivileged.h"
#include "experiments/sys/files.h"
#include "experiments/sys/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// ---------------------------------------------------------------------------------
// Parsing and resolution (no privileges needed).

TEST(ParseNodeCpusTest, OffAutoAndNumbers) {
  for (const char* off : {"", "none", "  none "}) {
    absl::StatusOr<NodeCpuSpec> s = ParseNodeCpus(off);
    ASSERT_TRUE(s.ok()) << off << ": " << s.status();
    EXPECT_FALSE(s->enabled) << off;
    EXPECT_EQ(NodeCpusToString(*s), "none");
  }
  absl::StatusOr<NodeCpuSpec> a = ParseNodeCpus("auto");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->enabled);
  EXPECT_TRUE(a->automatic);
  EXPECT_EQ(NodeCpusToString(*a), "auto");
  for (const auto& [text, cpus] : std::vector<std::pair<std::string, double>>{
           {"0.5", 0.5}, {"1", 1.0}, {"1.5", 1.5}, {"0.25", 0.25}, {"8", 8.0}}) {
    absl::StatusOr<NodeCpuSpec> s = ParseNodeCpus(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status();
    EXPECT_TRUE(s->enabled);
    EXPECT_FALSE(s->automatic);
    EXPECT_DOUBLE_EQ(s->cpus, cpus) << text;
    absl::StatusOr<NodeCpuSpec> back = ParseNodeCpus(NodeCpusToString(*s));
    ASSERT_TRUE(back.ok());
    EXPECT_DOUBLE_EQ(back->cpus, cpus) << NodeCpusToString(*s);
  }
}

TEST(ParseNodeCpusTest, RefusesBadValuesInOneLine) {
  for (const char* bad : {"0", "0.0", "-1", "-0.5", "abc", "1cpu", "inf", "nan", "auto2", "1,5"}) {
    absl::StatusOr<NodeCpuSpec> s = ParseNodeCpus(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.status().message(), absl::StrCat("\"", bad, "\"")))
        << s.status();
    EXPECT_FALSE(absl::StrContains(s.status().message(), "\n")) << s.status();
  }
}

TEST(ResolveNodeCpusTest, AutoFixedAndTooMuch) {
  NodeCpuSpec automatic{true, true, 0};
  EXPECT_DOUBLE_EQ(*ResolveNodeCpus(automatic, 4, 2), 0.5);
  EXPECT_DOUBLE_EQ(*ResolveNodeCpus(automatic, 1, 2), 2.0);
  EXPECT_DOUBLE_EQ(*ResolveNodeCpus(automatic, 3, 2), 2.0 / 3);

  NodeCpuSpec half{true, false, 0.5};
  EXPECT_DOUBLE_EQ(*ResolveNodeCpus(half, 4, 2), 0.5);  // Exactly the machine.
  EXPECT_DOUBLE_EQ(*ResolveNodeCpus(NodeCpuSpec{true, false, 0.1}, 20, 2), 0.1);  // Rounding.
  EXPECT_DOUBLE_EQ(*ResolveNodeCpus(NodeCpuSpec(), 4, 2), 0.0);  // Off.

  absl::StatusOr<double> too_much = ResolveNodeCpus(NodeCpuSpec{true, false, 1.5}, 2, 2);
  ASSERT_FALSE(too_much.ok());
  EXPECT_EQ(too_much.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(too_much.status().message());
  EXPECT_TRUE(absl::StrContains(msg, "1.5")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "2 nodes")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "machine has 2")) << msg;
  EXPECT_FALSE(absl::StrContains(msg, "\n")) << msg;

  EXPECT_FALSE(ResolveNodeCpus(half, 0, 2).ok());
  EXPECT_FALSE(ResolveNodeCpus(half, 2, 0).ok());
  EXPECT_GE(MachineCpus(), 1);
}

TEST(CpuSharePeriodForTest, LengthensThePeriodForSmallShares) {
  EXPECT_EQ(CpuSharePeriodFor(0.5), kDefaultCpuSharePeriod);
  EXPECT_EQ(CpuSharePeriodFor(2), kDefaultCpuSharePeriod);
  EXPECT_EQ(CpuSharePeriodFor(0.1), absl::Milliseconds(10));
  EXPECT_NEAR(absl::ToDoubleMicroseconds(CpuSharePeriodFor(2.0 / 11)), 5500, 1);
  EXPECT_EQ(CpuSharePeriodFor(0.0001), absl::Seconds(1));
  for (double cpus : {0.1, 0.15, 2.0 / 9, 2.0 / 11, 0.3}) {
    const int64_t quota = std::llround(cpus * absl::ToInt64Microseconds(CpuSharePeriodFor(cpus)));
    EXPECT_GE(quota, 1000) << cpus;
  }
}

TEST(EmulatedCpuSharesTest, CreateRefusesBadArgumentsBeforeTouchingCgroups) {
  for (const auto& [cpus, nodes, period] :
       std::vector<std::tuple<double, int, absl::Duration>>{
           {0, 2, absl::Milliseconds(10)},
           {-1, 2, absl::Milliseconds(10)},
           {0.5, 0, absl::Milliseconds(10)},
           {0.5, 251, absl::Milliseconds(10)},
           {0.5, 2, absl::Microseconds(500)},
           {0.5, 2, absl::Seconds(2)},
           {0.05, 2, absl::Milliseconds(10)}}) {  // Quota 0.5 ms < 1 ms.
    absl::StatusOr<std::unique_ptr<EmulatedCpuShares>> s =
        EmulatedCpuShares::Create(cpus, nodes, period);
    ASSERT_FALSE(s.ok()) << cpus << " " << nodes << " " << period;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  }
}

// As root, the privilege error is checked in a forked child that became `nobody`.
TEST(EmulatedCpuSharesTest, WithoutRootThePrivilegeErrorIsClear) {
  auto check = []() {
    absl::Status s = CheckCpuSharePrivileges();
    return absl::StrCat(static_cast<int>(s.code()), "|", s.message());
  };
  absl::StatusOr<std::string> unprivileged = RunAsNobody(check);
  ASSERT_TRUE(unprivileged.ok()) << unprivileged.status();
  const std::string report = *unprivileged;
  if (absl::StartsWith(report, absl::StrCat(static_cast<int>(absl::StatusCode::kFailedPrecondition),
                                            "|"))) {
    GTEST_SKIP() << "no cgroup cpu controller is mounted: " << report;
  }
  EXPECT_TRUE(absl::StartsWith(
      report, absl::StrCat(static_cast<int>(absl::StatusCode::kPermissionDenied),
                           "|CPU shares per node need root")))
      << report;
  EXPECT_TRUE(absl::StrContains(report, "drop --node_cpus")) << report;
  EXPECT_FALSE(absl::StrContains(report, "\n")) << report;
}

// ---------------------------------------------------------------------------------
// Real cgroups (root).

// Skips the calling test with a visible reason unless cgroups can be made here.
#define SKIP_WITHOUT_CGROUPS()                                                    \
  do {                                                                            \
    const absl::Status privileges = CheckCpuSharePrivileges();                    \
    if (!privileges.ok()) {                                                       \
      GTEST_SKIP() << "needs root and a cgroup cpu controller: " << privileges;   \
    }                                                                             \
  } while (0)

bool DirExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::unique_ptr<Subprocess> SpawnIn(const std::vector<std::string>& prefix,
                                    const std::vector<std::string>& command) {
  SpawnOptions options;
  options.argv = prefix;
  options.argv.insert(options.argv.end(), command.begin(), command.end());
  options.stdin_null = true;
  options.own_process_group = true;
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Spawn(options);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

std::vector<pid_t> ProcsOf(const std::string& cgroup) {
  std::vector<pid_t> pids;
  absl::StatusOr<std::string> text = ReadFile(cgroup + "/cgroup.procs");
  if (!text.ok()) return pids;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid)) pids.push_back(pid);
  }
  return pids;
}

// Waits (bounded) until `cgroup` holds at least `n` processes.
bool WaitForProcs(const std::string& cgroup, size_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (ProcsOf(cgroup).size() < n) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

// utime + stime of a process in seconds; -1 if it is gone.
double CpuSeconds(pid_t pid) {
  absl::StatusOr<std::string> stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return -1;
  // Fields after the command name (which may hold spaces) start at state (field 3).
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> f = absl::StrSplit(stat->substr(close + 2), ' ');
  int64_t utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return -1;
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

double CgroupCpuSeconds(const std::string& cgroup) {
  double total = 0;
  for (pid_t pid : ProcsOf(cgroup)) {
    const double s = CpuSeconds(pid);
    if (s > 0) total += s;
  }
  return total;
}

TEST(EmulatedCpuSharesTest, QuotaHoldsTwoBusyLoopsToHalfACpu) {
  SKIP_WITHOUT_CGROUPS();
  absl::StatusOr<std::unique_ptr<EmulatedCpuShares>> shares =
      EmulatedCpuShares::Create(0.5, 2, kDefaultCpuSharePeriod);
  ASSERT_TRUE(shares.ok()) << shares.status();
  EmulatedCpuShares& s = **shares;
  EXPECT_EQ(s.num_nodes(), 2);
  EXPECT_DOUBLE_EQ(s.cpus_per_node(), 0.5);
  EXPECT_EQ(s.period(), kDefaultCpuSharePeriod);
  EXPECT_TRUE(absl::StartsWith(s.Describe(), "0.5 CPU per node (cgroup v")) << s.Describe();
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(DirExists(s.cgroup_path(i))) << s.cgroup_path(i);
    EXPECT_TRUE(absl::StrContains(s.cgroup_path(i), absl::StrCat(s.tag(), "_n", i)));
  }
  const int64_t period_us = absl::ToInt64Microseconds(kDefaultCpuSharePeriod);
  if (s.version() == EmulatedCpuShares::CgroupVersion::kV2) {
    EXPECT_EQ(*ReadFile(s.cgroup_path(0) + "/cpu.max"),
              absl::StrCat(period_us / 2, " ", period_us, "\n"));
  } else {
    EXPECT_EQ(*ReadFile(s.cgroup_path(0) + "/cpu.cfs_period_us"), absl::StrCat(period_us, "\n"));
    EXPECT_EQ(*ReadFile(s.cgroup_path(0) + "/cpu.cfs_quota_us"),
              absl::StrCat(period_us / 2, "\n"));
  }

  // Two busy loops (a forked child and the shell itself): together they could use two
  // CPUs; the quota holds the node to half of one.
  std::unique_ptr<Subprocess> busy =
      SpawnIn(s.CommandPrefix(0), {"sh", "-c", "while :; do :; done & while :; do :; done"});
  ASSERT_NE(busy, nullptr);
  ASSERT_TRUE(WaitForProcs(s.cgroup_path(0), 2)) << "busy loops did not appear in node 0";
  absl::SleepFor(absl::Milliseconds(100));
  const double cpu0 = CgroupCpuSeconds(s.cgroup_path(0));
  const absl::Time t0 = absl::Now();
  absl::SleepFor(absl::Seconds(1));
  const double cpu1 = CgroupCpuSeconds(s.cgroup_path(0));
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double share = (cpu1 - cpu0) / wall;
  std::cout << absl::StrFormat("node 0 (%s): two busy loops used %.3f CPU over %.2f s\n",
                               s.Describe(), share, wall);
  EXPECT_GE(share, 0.3);
  EXPECT_LE(share, 0.7);
  absl::StatusOr<std::string> stat = ReadFile(s.cgroup_path(0) + "/cpu.stat");
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_TRUE(absl::StrContains(*stat, "nr_throttled")) << *stat;
  EXPECT_FALSE(absl::StrContains(*stat, "nr_throttled 0\n")) << *stat;

  // The shell's pid is the command's (exec): /proc/<pid>/cgroup names node 1's cgroup.
  std::unique_ptr<Subprocess> sleeper = SpawnIn(s.CommandPrefix(1), {"sleep", "30"});
  ASSERT_NE(sleeper, nullptr);
  ASSERT_TRUE(WaitForProcs(s.cgroup_path(1), 1));
  EXPECT_EQ(ProcsOf(s.cgroup_path(1)), std::vector<pid_t>{sleeper->pid()});
  absl::StatusOr<std::string> membership = ReadFile(absl::StrCat("/proc/", sleeper->pid(), "/cgroup"));
  ASSERT_TRUE(membership.ok()) << membership.status();
  const std::string name = absl::StrCat("/", s.tag(), "_n1");
  bool found = false;
  for (absl::string_view line : absl::StrSplit(*membership, '\n', absl::SkipEmpty())) {
    found = found || absl::EndsWith(line, name);
  }
  EXPECT_TRUE(found) << *membership;

  // Teardown with processes still inside kills them and removes every directory.
  ASSERT_TRUE(s.Teardown().ok());
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(DirExists(s.cgroup_path(i))) << s.cgroup_path(i);
  for (Subprocess* p : {busy.get(), sleeper.get()}) {
    ASSERT_TRUE(p->WaitUntil(absl::Now() + absl::Seconds(5)).ok());
    EXPECT_TRUE(WIFSIGNALED(p->wait_status()) && WTERMSIG(p->wait_status()) == SIGKILL)
        << p->ExitDescription();
  }
  EXPECT_TRUE(s.Teardown().ok());  // Idempotent.
}

TEST(EmulatedCpuSharesTest, DestructorRemovesEverything) {
  SKIP_WITHOUT_CGROUPS();
  std::vector<std::string> paths;
  {
    absl::StatusOr<std::unique_ptr<EmulatedCpuShares>> shares =
        EmulatedCpuShares::Create(1, 3, absl::Milliseconds(10));
    ASSERT_TRUE(shares.ok()) << shares.status();
    EXPECT_TRUE(absl::StrContains((*shares)->Describe(), "1 CPU per node")) << (*shares)->Describe();
    EXPECT_TRUE(absl::StrContains((*shares)->Describe(), "10ms period")) << (*shares)->Describe();
    for (int i = 0; i < 3; ++i) paths.push_back((*shares)->cgroup_path(i));
    // A cgroup removed behind the shares' back is not an error.
    ASSERT_EQ(rmdir(paths[2].c_str()), 0);
  }
  for (const std::string& p : paths) EXPECT_FALSE(DirExists(p)) << p;
}

// A share per node (a slow node at a fraction of the others'): each cgroup's quota is
// its own share of the one period.
TEST(EmulatedCpuSharesTest, EachNodeGetsItsOwnShare) {
  SKIP_WITHOUT_CGROUPS();
  absl::StatusOr<std::unique_ptr<EmulatedCpuShares>> shares =
      EmulatedCpuShares::Create(std::vector<double>{0.5, 0.25}, absl::Milliseconds(8));
  ASSERT_TRUE(shares.ok()) << shares.status();
  const EmulatedCpuShares& s = **shares;
  EXPECT_DOUBLE_EQ(s.cpus(0), 0.5);
  EXPECT_DOUBLE_EQ(s.cpus(1), 0.25);
  EXPECT_EQ(s.quota(0), absl::Milliseconds(4));
  EXPECT_EQ(s.quota(1), absl::Milliseconds(2));
  EXPECT_TRUE(absl::StrContains(s.Describe(), "node 1 0.25 CPU")) << s.Describe();
  for (int i = 0; i < 2; ++i) {
    const std::string quota_us = absl::StrCat(absl::ToInt64Microseconds(s.quota(i)));
    if (s.version() == EmulatedCpuShares::CgroupVersion::kV2) {
      EXPECT_EQ(*ReadFile(s.cgroup_path(i) + "/cpu.max"), absl::StrCat(quota_us, " 8000\n"));
    } else {
      EXPECT_EQ(*ReadFile(s.cgroup_path(i) + "/cpu.cfs_quota_us"), absl::StrCat(quota_us, "\n"));
    }
  }
}

// This very process joins a node (calibrate --node_cpus measures its compute there) and
// leaves it; Teardown while joined moves it out first instead of killing it.
TEST(EmulatedCpuSharesTest, ThisProcessJoinsANodeAndLeavesIt) {
  SKIP_WITHOUT_CGROUPS();
  absl::StatusOr<std::unique_ptr<EmulatedCpuShares>> shares = EmulatedCpuShares::Create(0.5, 2);
  ASSERT_TRUE(shares.ok()) << shares.status();
  EmulatedCpuShares& s = **shares;
  auto in = [&](int node) {
    const std::vector<pid_t> pids = ProcsOf(s.cgroup_path(node));
    return std::find(pids.begin(), pids.end(), getpid()) != pids.end();
  };
  ASSERT_TRUE(s.JoinNode(1).ok());
  EXPECT_TRUE(in(1));
  EXPECT_FALSE(in(0));
  ASSERT_TRUE(s.LeaveNode().ok());
  EXPECT_FALSE(in(1));
  EXPECT_TRUE(s.LeaveNode().ok());  // Not joined: nothing to do.
  ASSERT_TRUE(s.JoinNode(0).ok());
  EXPECT_TRUE(s.Teardown().ok());   // Leaves, then removes: this test is still alive.
  EXPECT_FALSE(DirExists(s.cgroup_path(0)));
  EXPECT_FALSE(DirExists(s.cgroup_path(1)));
}

TEST(EmulatedCpuSharesTest, RemoveStaleCpuSharesTakesOnlyDeadCreators) {
  SKIP_WITHOUT_CGROUPS();
  // A throwaway share tells where cgroups go on this machine.
  std::string root;
  {
    absl::StatusOr<std::unique_ptr<EmulatedCpuShares>> probe = EmulatedCpuShares::Create(1, 1);
    ASSERT_TRUE(probe.ok()) << probe.status();
    const std::string& p = (*probe)->cgroup_path(0);
    root = p.substr(0, p.rfind('/'));
  }
  // A dead creator: a pid above any pid_max (at most 2^22) cannot exist.
  const std::string dead = absl::StrCat(root, "/rs7ffffff0_3_n0");
  // A live creator: a child of this test, alive for the whole test.
  std::unique_ptr<Subprocess> live_owner = SpawnIn({}, {"sleep", "30"});
  ASSERT_NE(live_owner, nullptr);
  const std::string live =
      absl::StrFormat("%s/rs%x_0_n0", root, static_cast<unsigned>(live_owner->pid()));
  ASSERT_EQ(mkdir(dead.c_str(), 0755), 0) << dead;
  ASSERT_EQ(mkdir(live.c_str(), 0755), 0) << live;
  // Something still runs inside the dead run's cgroup.
  std::unique_ptr<Subprocess> orphan = SpawnIn(
      {"sh", "-c", absl::StrCat("echo $$ > '", dead, "/cgroup.procs' && exec \"$@\""), "sh"},
      {"sleep", "30"});
  ASSERT_NE(orphan, nullptr);
  ASSERT_TRUE(WaitForProcs(dead, 1));

  absl::StatusOr<std::vector<std::string>> removed = RemoveStaleCpuShares();
  ASSERT_TRUE(removed.ok()) << removed.status();
  // Ours is taken, the live one is not; a real leftover of another run that died on
  // this machine (a killed job's) is taken too, rightly.
  EXPECT_THAT(*removed, ::testing::Contains(dead));
  EXPECT_THAT(*removed, ::testing::Not(::testing::Contains(live)));
  EXPECT_FALSE(DirExists(dead));
  EXPECT_TRUE(DirExists(live));
  ASSERT_TRUE(orphan->WaitUntil(absl::Now() + absl::Seconds(5)).ok());
  EXPECT_TRUE(WIFSIGNALED(orphan->wait_status())) << orphan->ExitDescription();
  EXPECT_EQ(rmdir(live.c_str()), 0) << live;
  // Nothing of ours left to do (other runs' leftovers may appear, never ours).
  removed = RemoveStaleCpuShares();
  ASSERT_TRUE(removed.ok()) << removed.status();
  for (const std::string& r : *removed) EXPECT_NE(r, dead);
}

}  // namespace
}  // namespace ringside
