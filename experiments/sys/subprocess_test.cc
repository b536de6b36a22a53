#include "experiments/sys/subprocess.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "experiments/sys/files.h"
#include "experiments/sys/signal_catcher.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(20);

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

TEST(RunCommandTest, CapturesOutputAndExitStatus) {
  absl::StatusOr<CommandOutput> out =
      RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"}, kTimeout);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->exit_code, 3);
  EXPECT_EQ(out->stdout_text, "out\n");
  EXPECT_EQ(out->stderr_text, "err\n");

  out = RunCommand({"true"}, kTimeout);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->exit_code, 0);

  out = RunCommand({"sh", "-c", "kill -9 $$"}, kTimeout);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->exit_code, -1);
  EXPECT_EQ(out->term_signal, SIGKILL);
}

TEST(RunCommandTest, MissingProgramIsNotFound) {
  EXPECT_EQ(RunCommand({"ringside-no-such-program"}, kTimeout).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(RunCommand({"/nonexistent/prog"}, kTimeout).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RunCommandTest, TimeoutKillsTheCommandAndWhatItStarted) {
  const absl::Time start = absl::Now();
  // The shell's child `sleep` holds the pipes open too: the whole group must go.
  absl::StatusOr<CommandOutput> out =
      RunCommand({"sh", "-c", "sleep 30 & sleep 30"}, absl::Milliseconds(300));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(SubprocessTest, EnvironmentIsInheritedEditedAndOverridden) {
  setenv("RINGSIDE_SUBPROCESS_TEST_KEEP", "kept", 1);
  setenv("RINGSIDE_SUBPROCESS_TEST_DROP", "dropped", 1);
  SpawnOptions o;
  o.argv = {"sh", "-c",
            "echo \"$RINGSIDE_SUBPROCESS_TEST_KEEP/${RINGSIDE_SUBPROCESS_TEST_DROP-unset}/"
            "$RINGSIDE_SUBPROCESS_TEST_NEW\""};
  o.env_unset = {"RINGSIDE_SUBPROCESS_TEST_DROP"};
  o.env_set = {"RINGSIDE_SUBPROCESS_TEST_NEW=first", "RINGSIDE_SUBPROCESS_TEST_NEW=second"};
  o.out = ChildStream::kFile;
  o.out_path = TempPath("env.txt");
  absl::StatusOr<std::unique_ptr<Subprocess>> child = Subprocess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  (*child)->Wait();
  EXPECT_TRUE((*child)->succeeded()) << (*child)->ExitDescription();
  EXPECT_EQ(ReadFile(o.out_path).value_or(""), "kept/unset/second\n");
}

TEST(SubprocessTest, RunsInTheGivenDirectoryWithoutMovingThisProcess) {
  char before[4096];
  ASSERT_NE(getcwd(before, sizeof(before)), nullptr);
  SpawnOptions o;
  o.argv = {"sh", "-c", "pwd > here.txt"};
  o.cwd = TempPath("");
  absl::StatusOr<std::unique_ptr<Subprocess>> child = Subprocess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  (*child)->Wait();
  EXPECT_TRUE((*child)->succeeded()) << (*child)->ExitDescription();
  EXPECT_TRUE(ReadFile(TempPath("here.txt")).ok());
  char after[4096];
  ASSERT_NE(getcwd(after, sizeof(after)), nullptr);
  EXPECT_STREQ(before, after);
}

TEST(SubprocessTest, StderrFollowsStdoutIntoOnePipe) {
  SpawnOptions o;
  o.argv = {"sh", "-c", "echo a; echo b >&2; exit 4"};
  o.out = ChildStream::kPipe;
  o.err = ChildStream::kStdout;
  absl::StatusOr<std::unique_ptr<Subprocess>> child = Subprocess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  std::string text;
  char buf[256];
  for (ssize_t n; (n = read((*child)->out_fd(), buf, sizeof(buf))) > 0;) text.append(buf, n);
  (*child)->Wait();
  EXPECT_EQ(text, "a\nb\n");
  EXPECT_FALSE((*child)->succeeded());
  EXPECT_EQ((*child)->ExitDescription(), "exited with status 4");
  EXPECT_EQ((*child)->err_fd(), -1);
}

TEST(SubprocessTest, UnwritableOutputFileIsPermissionDenied) {
  SpawnOptions o;
  o.argv = {"true"};
  o.out = ChildStream::kFile;
  o.out_path = "/nonexistent-dir/log.txt";
  EXPECT_EQ(Subprocess::Spawn(o).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST(SubprocessTest, WaitUntilTimesOutAndSignalReachesTheGroup) {
  SpawnOptions o;
  o.argv = {"sh", "-c", "sleep 30 & wait"};
  o.own_process_group = true;
  absl::StatusOr<std::unique_ptr<Subprocess>> child = Subprocess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((*child)->WaitUntil(absl::Now() + absl::Milliseconds(100)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE((*child)->exited());
  (*child)->Signal(SIGTERM);
  ASSERT_TRUE((*child)->WaitUntil(absl::Now() + kTimeout).ok());
  EXPECT_EQ((*child)->ExitDescription(), "killed by signal 15 (Terminated)");
}

TEST(SubprocessTest, DestroyingARunningChildKillsAndReapsIt) {
  SpawnOptions o;
  o.argv = {"sleep", "30"};
  absl::StatusOr<std::unique_ptr<Subprocess>> child = Subprocess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  const pid_t pid = (*child)->pid();
  child->reset();
  // Reaped: the pid is no longer ours to signal or wait for.
  EXPECT_NE(kill(pid, 0), 0);
}

TEST(ScopedSignalCatcherTest, RecordsSignalsAndNests) {
  struct sigaction before {};
  sigaction(SIGTERM, nullptr, &before);
  {
    ScopedSignalCatcher outer;
    EXPECT_EQ(outer.caught(), 0);
    raise(SIGTERM);
    EXPECT_EQ(outer.caught(), SIGTERM);
    {
      ScopedSignalCatcher inner;
      // The outer scope's signal stays visible inside.
      EXPECT_EQ(inner.caught(), SIGTERM);
      EXPECT_EQ(inner.Take(), SIGTERM);
      raise(SIGINT);
      EXPECT_EQ(inner.caught(), SIGINT);
    }
    // Caught but not taken by the inner catcher: the outer one sees it.
    EXPECT_EQ(outer.Take(), SIGINT);
    EXPECT_EQ(outer.caught(), 0);
  }
  // The handlers from before are back.
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, before.sa_handler);
}

}  // namespace
}  // namespace ringside
