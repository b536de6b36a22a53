#include "common/task_thread.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

TEST(TaskThreadTest, RunsTasksInOrderOnOneOtherThread) {
  TaskThread t;
  std::vector<int> seen;
  std::thread::id first;
  for (int i = 0; i < 100; ++i) {
    std::thread::id id;
    t.Run([&seen, &id, i] {
      seen.push_back(i);
      id = std::this_thread::get_id();
    });
    EXPECT_TRUE(t.busy());
    t.Wait();
    EXPECT_FALSE(t.busy());
    // Wait returned after the task: its effects are visible.
    ASSERT_EQ(seen.size(), static_cast<size_t>(i + 1));
    EXPECT_NE(id, std::this_thread::get_id());
    if (i == 0) first = id;
    EXPECT_EQ(id, first);  // The same thread every time: no thread per task.
  }
}

TEST(TaskThreadTest, RunReturnsBeforeTheTaskEnds) {
  TaskThread t;
  absl::Notification release;
  std::atomic<bool> finished{false};
  t.Run([&] {
    release.WaitForNotification();
    finished = true;
  });
  // Run did not block on the task.
  EXPECT_FALSE(finished.load());
  release.Notify();
  t.Wait();
  EXPECT_TRUE(finished.load());
}

TEST(TaskThreadTest, WaitWithoutATaskReturnsAtOnce) {
  TaskThread t;
  t.Wait();
  EXPECT_FALSE(t.busy());
}

TEST(TaskThreadTest, DestructorWaitsForAHandedOverTask) {
  std::atomic<bool> ran{false};
  {
    TaskThread t;
    t.Run([&] {
      absl::SleepFor(absl::Milliseconds(20));
      ran = true;
    });
  }
  EXPECT_TRUE(ran.load());
}

}  // namespace
}  // namespace ringside
