// DataParallel (--strategy=dp) as torch.nn.DataParallel runs it: ONE process, R model
// replicas, one per thread (replica 0 is the master: the model the trainer trains, run
// on the training thread; replicas 1..R-1 each have their own Model, Ops and thread).
// Every step, on the master:
//
//   1. replicate  copy the master's parameters into replicas 1..R-1 ((R-1) x P floats)
//   2. scatter    cut the step's samples into R contiguous slices (torch.chunk along
//                 dim 0: ceil(n / R) each, the last ones shorter or absent) and load
//                 each replica's slice
//   3. apply      every replica runs forward and backward of its slice in parallel,
//                 with loss_scale = 1 / n, so that the sum of the replicas' gradients
//                 is the gradient of the mean loss over the global batch
//   4. gather     the losses and correct counts
//   5. reduce     add replicas 1..R-1's gradients into the master's ((R-1) x P floats)
//   6. update     one SGD step on the master (LocalSgdStrategy's, in FinishStep)
//
// so that DP at any R equals single-process training at the same global batch. Each
// phase is timed into StepMetrics (replicate_ms, scatter_ms = data_ms, apply_ms,
// reduce_ms, update_ms) and drawn as trace spans ("replicate", "scatter", the
// master's "forward"/"backward", "wait for replicas", "reduce", "update"; replica r's
// forward and backward on track r).
//
// Batch: RunConfig.batch is per replica, as for ps and ddp (one worker's batch); the
// global batch is batch x replicas. The trainer sees one process (world 1) training
// the global batch (TrainDataParallel), so its sharder hands out exactly the samples
// single-process training with --batch=batch x replicas would take.
//
// The CPU backend only: each replica owns a CPU Ops. RunConfig.threads is OpenBLAS's
// thread count, a process-wide setting the replicas share: each replica's GEMMs may use
// that many threads. The default 1 gives R compute threads in all (one per replica).
//
// Interpreter lock (RunConfig.dp_interpreter_lock): every replica's Ops is wrapped so
// that each op call (GEMM, bias, ReLU, loss, im2col, pool, copy, ...) holds one mutex
// shared by the replicas: an emulation of Python's global interpreter lock, which
// nn.DataParallel's replica threads contend for around the host work of every op. On
// the CPU backend an op's host work is all of it, so the lock serialises the replicas'
// compute: the worst case, as with ops that never release the GIL. Records are
// labelled emulated; the time the replicas waited for the lock is counted.
#ifndef RINGSIDE_COMMON_DATA_PARALLEL_H_
#define RINGSIDE_COMMON_DATA_PARALLEL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/local_step.h"
#include "common/replica.h"
#include "common/run_config.h"
#include "common/task_thread.h"
#include "common/trainer.h"

namespace ringside {

// The emulated global interpreter lock: one mutex the replicas' ops share, and the
// time spent waiting for it. Thread-safe.
struct InterpreterLock {
  absl::Mutex mu;
  std::atomic<int64_t> wait_us{0};  // Summed over every op call that had to wait.
};

// `ops` with every compute op (and Copy, Fill, Scale, Axpy, the SGD updates) called
// while holding lock->mu; memory, copies to and from the host and Synchronize pass
// through unlocked. Owns `ops`; shares `lock`.
std::unique_ptr<Ops> WithInterpreterLock(std::unique_ptr<Ops> ops,
                                         std::shared_ptr<InterpreterLock> lock);

// Per-step times of a DP run's phases (ms), for the summary: medians over the steps (a
// stall of the host in one step moves a mean of 64 steps by its share, and the
// tutorial quotes these), the interpreter lock's wait a mean (its total over steps).
struct DataParallelPhases {
  int64_t steps = 0;
  double replicate_ms = 0;
  double scatter_ms = 0;
  double apply_ms = 0;
  double forward_ms = 0;   // The master replica's part of apply.
  double backward_ms = 0;
  double reduce_ms = 0;
  double update_ms = 0;
  double lock_wait_ms = 0;  // Waits for the interpreter lock, all replicas together.
};

// Not thread-safe: every method runs on the training thread, which owns the replica
// threads (each runs only between a step's apply start and its end).
class DataParallelStrategy final : public StepStrategy, private StepCompute {
 public:
  // `config`: strategy "dp", world_size = replicas, batch per replica, valid for
  // ValidateRunConfig (which checks dp's replicas, grad_accum and device; its
  // InvalidArgument otherwise). `master` (borrowed; must outlive the strategy) is
  // replica 0, the process's Replica as NewReplica built it, parameters not yet
  // initialised: with the interpreter lock its ops are wrapped (WithInterpreterLock)
  // and its model rebuilt over them, so call Create before anything else holds
  // master->ops or master->model. Builds replicas 1..R-1 (ops, model) and their threads.
  static absl::StatusOr<std::unique_ptr<DataParallelStrategy>> Create(const RunConfig& config,
                                                                      Replica* master);
  ~DataParallelStrategy() override;

  std::string role() const override { return "dp"; }
  StepCompute* compute() override { return this; }
  // No announcements: the master steps once the replicas' gradients are reduced.
  StepHooks hooks() override { return {}; }
  // The master's SGD step (update_ms) over the reduced gradients.
  absl::Status FinishStep(const HookTimes& hook_times, StepMetrics* m,
                          TraceWriter* trace) override;
  absl::StatusOr<std::vector<float>> SaveOptimizerState() override {
    return sgd_->SaveOptimizerState();
  }
  absl::Status LoadOptimizerState(absl::Span<const float> state) override {
    return sgd_->LoadOptimizerState(state);
  }

  int replicas() const { return static_cast<int>(replicas_.size()) + 1; }
  bool interpreter_lock() const { return lock_ != nullptr; }
  // Over the steps run so far (DataParallelPhases: medians, the lock wait a mean).
  DataParallelPhases phases() const;

 private:
  // Replica r >= 1. Members in destruction order last to first: the thread ends
  // before the model, which lives in the ops' memory.
  struct ReplicaSlot {
    std::unique_ptr<Ops> ops;
    std::unique_ptr<Model> model;
    std::unique_ptr<LocalStep> step;
    // This step's work and its result, handed over by TaskThread::Run / Wait.
    absl::Span<const int64_t> slice;
    StepMetrics m;
    absl::Status status;
    int64_t start_us = 0;
    int64_t cpu_us = 0;  // The thread's CPU time for this step's forward and backward.
    std::unique_ptr<TaskThread> thread;
  };

  // One step as Run measures it, for RecordStep: the phases' start times (NowMicros)
  // and the replicas' results as the gather adds them up.
  struct StepTally {
    int64_t t_rep = 0;         // 1. replicate.
    int64_t t_scatter = 0;     // 2. scatter.
    int64_t t_apply = 0;       // 3. parallel apply.
    int64_t t_wait = 0;        // The master's own slice done: waiting for the replicas.
    int64_t t_reduce = 0;      // 5. reduce.
    int64_t t_end = 0;         // The step's end.
    int64_t moved = 0;         // Bytes replicate moves, and reduce.
    int64_t lock_wait0 = 0;    // lock_->wait_us at the step's start (0 without the lock).
    StepMetrics own;           // The master's LocalStep::Run.
    // Apply's CPU time, loss (summed over samples) and correct count, added up over
    // the master and the used replicas.
    int64_t apply_cpu_us = 0;
    double loss_sum = 0;
    int64_t correct = 0;
  };

  DataParallelStrategy(Replica* master, std::unique_ptr<LocalSgdStrategy> sgd,
                       std::shared_ptr<InterpreterLock> lock);
  // Steps 1-5 of the header's list (StepCompute).
  absl::Status Run(absl::Span<const int64_t> samples, float loss_scale, StepMetrics* m,
                   TraceWriter* trace) override;
  // Steps 3-4: replicas 1..active-1 run their scattered slices on their threads while
  // the master runs `master_slice` here, into tally's t_wait and the sums after it. Blocks
  // until every one has finished (even after an error), then returns the first error
  // (the master's, else the lowest replica's, annotated "replica r").
  absl::Status ApplyAndGather(absl::Span<const int64_t> master_slice, int active,
                              float loss_scale, TraceWriter* trace, StepTally* tally);
  // Fills `m` with the step's phases (a step of `n` samples) and draws the master's
  // phase spans other than forward and backward on `trace` (may be nullptr).
  void RecordStep(int64_t n, const StepTally& tally, StepMetrics* m,
                  TraceWriter* trace) const;

  Replica* const master_;
  std::unique_ptr<LocalSgdStrategy> sgd_;  // Steps the master's parameters.
  std::shared_ptr<InterpreterLock> lock_;  // nullptr without the lock.
  LocalStep master_step_;
  std::vector<std::unique_ptr<ReplicaSlot>> replicas_;  // Replicas 1..R-1.
  bool tracks_named_ = false;
  std::vector<StepMetrics> records_;  // Every finished step's, in order (phases()).
};

// Trains `master` with `dp` (both borrowed) through the Trainer as one process whose
// batch is the global batch (run.config.batch x dp->replicas()); records labelled
// emulated with the interpreter lock. Blocks until done; the first error.
absl::StatusOr<TrainResult> TrainDataParallel(const RunOptions& run, Replica* master,
                                              DataParallelStrategy* dp);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_DATA_PARALLEL_H_
