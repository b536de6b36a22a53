// `ringside bench allreduce`: an nccl-tests-style all-reduce sweep over the process
// group. For each size it prints the median time per all-reduce, the algorithm
// bandwidth (bytes / time), the bus bandwidth (algbw * 2 (N-1) / N, comparable to the
// link's bandwidth at any N) and the number of wrong elements against the closed-form
// sum. Run inside a launched job (one process per rank); rank 0 prints.
#ifndef RINGSIDE_EXPERIMENTS_BENCH_ALLREDUCE_BENCH_H_
#define RINGSIDE_EXPERIMENTS_BENCH_ALLREDUCE_BENCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ddp_ring/process_group.h"

namespace ringside {

struct AllReduceBenchOptions {
  int64_t min_bytes = 1 << 10;
  int64_t max_bytes = 64 << 20;
  int warmup = 5;
  int iters = 20;  // Timed all-reduces per size (fewer for the large sizes, >= 5).
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;
  // Idle time between the barrier and each timed all-reduce, as in training, where a
  // bucket's all-reduce follows compute rather than another collective.
  absl::Duration gap = absl::ZeroDuration();
  absl::Duration timeout = absl::Seconds(60);
};

// One rank's part; reads the job placement from the environment (see ddp_worker.h).
absl::Status RunAllReduceBench(const AllReduceBenchOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_BENCH_ALLREDUCE_BENCH_H_
