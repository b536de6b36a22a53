// TaskThread: one long-lived thread that runs the tasks handed to it, one at a time.
//
// The parameter-server worker hands every step's push-pull to a helper thread. A new
// std::thread per step costs a clone(2) and an exit/join on the step's critical path
// (tens of microseconds each on a small VM, with the scheduler churn that comes with
// them); waking a parked thread costs one futex. Neither abseil nor gRPC exports a
// thread pool, and this needs only a single slot, so it is written here.
//
// Thread-safety: Run and Wait are called by one owner thread (thread-compatible);
// the task runs on the TaskThread's own thread.
#ifndef RINGSIDE_COMMON_TASK_THREAD_H_
#define RINGSIDE_COMMON_TASK_THREAD_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringside {

class TaskThread {
 public:
  TaskThread();
  // Waits for the running task, if any, then ends the thread.
  ~TaskThread();
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  // Starts `task` on the thread and returns at once. Requires that the previous task,
  // if any, was waited for (CHECK: one slot).
  void Run(std::function<void()> task);
  // Blocks until the task given to the last Run has returned; at once if none runs.
  void Wait();
  // Whether a task was handed over and not yet waited for.
  bool busy() const { return busy_; }

 private:
  void Loop();

  absl::Mutex mu_;
  std::function<void()> task_ ABSL_GUARDED_BY(mu_);
  bool has_task_ ABSL_GUARDED_BY(mu_) = false;   // Handed over, not started.
  bool running_ ABSL_GUARDED_BY(mu_) = false;    // Started, not returned.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ = false;  // Owner's view: Run called, Wait not yet.
  std::thread thread_;  // Last member: starts after the state above exists.
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_TASK_THREAD_H_
