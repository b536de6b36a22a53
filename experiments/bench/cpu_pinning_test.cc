#include "experiments/bench/cpu_pinning.h"

#include <sched.h>

#include <thread>

#include "gtest/gtest.h"

namespace ringside {
namespace {

TEST(CpuPinningTest, ParsesDistinctAllowedCpus) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  absl::StatusOr<std::vector<int>> one = ParseCpuList(std::to_string(allowed[0]), 1, "--x");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, std::vector<int>{allowed[0]});
  if (allowed.size() < 2) GTEST_SKIP() << "one CPU only";
  absl::StatusOr<std::vector<int>> two = ParseCpuList(
      std::to_string(allowed[1]) + "," + std::to_string(allowed[0]), 2, "--x");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, (std::vector<int>{allowed[1], allowed[0]}));
}

TEST(CpuPinningTest, RejectsBadLists) {
  const std::string c0 = std::to_string(AllowedCpus()[0]);
  for (const std::string& bad : {std::string(""), std::string("x"), std::string("-1"),
                                 c0 + "," + c0, std::string("100000"), c0 + ",", c0}) {
    absl::StatusOr<std::vector<int>> r = ParseCpuList(bad, 2, "--pin_cpus");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(r.status().message().find("--pin_cpus"), std::string::npos);
  }
}

TEST(CpuPinningTest, PinsThisThreadAndTheThreadsItStarts) {
  const std::vector<int> allowed = AllowedCpus();
  const int cpu = allowed.back();
  // On a thread of its own, so that the test process keeps its mask.
  std::thread t([cpu] {
    ASSERT_TRUE(PinCallingThread(cpu).ok());
    EXPECT_EQ(AllowedCpus(), std::vector<int>{cpu});
    std::vector<int> child_mask;
    std::thread child([&child_mask] { child_mask = AllowedCpus(); });
    child.join();
    EXPECT_EQ(child_mask, std::vector<int>{cpu});
    EXPECT_EQ(sched_getcpu(), cpu);
  });
  t.join();
  EXPECT_EQ(AllowedCpus(), allowed);
  EXPECT_EQ(PinCallingThread(100000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PinCallingThread(-1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuPinningTest, APinnedThreadMayMoveToAnotherAllowedCpu) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "one CPU only";
  std::thread t([&allowed] {
    ASSERT_TRUE(PinCallingThread(allowed[0]).ok());
    ASSERT_TRUE(PinCallingThread(allowed[1]).ok());
    EXPECT_EQ(AllowedCpus(), std::vector<int>{allowed[1]});
  });
  t.join();
}

}  // namespace
}  // namespace ringside
