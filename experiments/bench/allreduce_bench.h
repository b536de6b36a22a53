// `ringside bench allreduce`: an nccl-tests-style all-reduce sweep over the process
// group. For each size: the median time per all-reduce, the algorithm bandwidth
// (bytes / time), the bus bandwidth (algbw * 2 (N-1) / N, comparable to the link's
// bandwidth at any N) and the number of wrong elements against the closed-form sum.
// RunAllReduceBench is one rank of a launched job (one process per rank; rank 0
// prints), over Gloo (host memory) or NCCL (device memory: rank r uses GPU
// LOCAL_RANK % GPUs; where a node's ranks outnumber its GPUs, each rank gets its own
// NCCL_HOSTID and the run is labelled emulated); MeasureAllReduceInProcess runs Gloo
// ranks as threads of the caller and returns the rows (`ringside calibrate`).
#ifndef RINGSIDE_EXPERIMENTS_BENCH_ALLREDUCE_BENCH_H_
#define RINGSIDE_EXPERIMENTS_BENCH_ALLREDUCE_BENCH_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/ops.h"
#include "common/rpc_security.h"
#include "ddp_ring/process_group.h"

namespace ringside {

struct AllReduceBenchOptions {
  std::string backend = "gloo";  // "gloo" or "nccl" (process_group_factory.h).
  int64_t min_bytes = 1 << 10;
  int64_t max_bytes = 64 << 20;  // Sizes min_bytes, 2 min_bytes, ... up to this.
  int warmup = 5;
  int iters = 20;  // Timed all-reduces per size (fewer for the large sizes, >= 5).
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;
  // Idle time between the barrier and each timed all-reduce, as in training, where a
  // bucket's all-reduce follows compute rather than another collective.
  absl::Duration gap = absl::ZeroDuration();
  absl::Duration timeout = absl::Seconds(60);
  // The security the job's store is hosted (rank 0) and joined with (JoinJobStore);
  // empty token (the bench verb sets none): unauthenticated.
  RpcSecurity security;
};

// One size of the sweep, as every rank agrees on it.
struct AllReduceRow {
  int64_t bytes = 0;
  int64_t floats = 0;
  double us = 0;           // The slowest rank's median time per all-reduce.
  double algbw_gbps = 0;   // bytes / time, GB/s.
  double busbw_gbps = 0;   // algbw * 2 (N-1) / N.
  int64_t wrong = 0;       // Wrong elements over all ranks and timed iterations.
  // This process's CPU time during one timed all-reduce (rank 0's median; user + system,
  // the kernel's socket work included). With ranks as threads of one process
  // (MeasureAllReduceInProcess) it is every rank's CPU, since they run in lockstep.
  double process_cpu_us = 0;
};

struct AllReduceBenchResult {
  std::string backend;    // "gloo" or "nccl".
  std::string algorithm;  // What ran, e.g. "ring" or "auto: recursive-doubling below ...".
  int ranks = 0;
  // Empty, or how ranks share devices, e.g. "emulated: 2 ranks on 1 GPU(s), NCCL over
  // sockets (NCCL_HOSTID per rank)".
  std::string placement;
  absl::Duration gap;
  std::vector<AllReduceRow> rows;
};

// The sweep on `group` (every rank calls it; collective), with its buffers in `ops`'s
// memory (the CPU backend's for Gloo, the CUDA backend's on the group's GPU for NCCL;
// filled and checked through copies outside the timed all-reduce). `on_row`, if set,
// is called on rank 0 as each size finishes. Every rank returns the same rows. Fails
// with the group's first failed collective.
absl::StatusOr<AllReduceBenchResult> MeasureAllReduce(
    ProcessGroup* group, Ops* ops, const AllReduceBenchOptions& options,
    const std::function<void(const AllReduceRow&)>& on_row = nullptr);

// `ranks` Gloo ranks as threads of this process over an in-memory store (loopback
// TCP between them, as between processes); rank 0's result. Blocks until every rank
// is done; the first rank's error otherwise.
absl::StatusOr<AllReduceBenchResult> MeasureAllReduceInProcess(int ranks,
                                                               const AllReduceBenchOptions& options);

// What `algorithm` runs at `ranks` ranks: its name, or for kAuto the algorithm below
// and above the size where it switches.
std::string AllReduceAlgorithmDescription(AllReduceAlgorithm algorithm, int ranks);

// The bench's table: two comment lines ("# ...") and one line per row.
void PrintAllReduceHeader(const AllReduceBenchResult& result, FILE* out);
void PrintAllReduceRow(const AllReduceRow& row, FILE* out);

// One rank's part of `ringside bench allreduce`; reads the job placement from the
// environment (see ddp_worker.h); rank 0 prints the table as the sweep goes.
absl::Status RunAllReduceBench(const AllReduceBenchOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_BENCH_ALLREDUCE_BENCH_H_
