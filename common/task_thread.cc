#include "common/task_thread.h"

#include <utility>

#include "absl/base/internal/raw_logging.h"

namespace ringside {

TaskThread::TaskThread() : thread_([this] { Loop(); }) {}

TaskThread::~TaskThread() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void TaskThread::Run(std::function<void()> task) {
  ABSL_RAW_CHECK(!busy_, "TaskThread::Run while the previous task was not waited for");
  busy_ = true;
  absl::MutexLock l(&mu_);
  task_ = std::move(task);
  has_task_ = true;
}

void TaskThread::Wait() {
  if (!busy_) return;
  absl::MutexLock l(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !has_task_ && !running_; };
  mu_.Await(absl::Condition(&done));
  busy_ = false;
}

void TaskThread::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock l(&mu_);
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return has_task_ || stop_; };
      mu_.Await(absl::Condition(&wake));
      // The destructor waits for a handed-over task: it runs before the thread ends.
      if (!has_task_) return;
      task = std::move(task_);
      task_ = nullptr;
      has_task_ = false;
      running_ = true;
    }
    task();
    task = nullptr;  // The task's captures die on this thread, before Wait returns.
    absl::MutexLock l(&mu_);
    running_ = false;
  }
}

}  // namespace ringside
