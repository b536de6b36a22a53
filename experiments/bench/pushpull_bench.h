// `ringside bench pushpull`: one worker's combined push-pull against one
// parameter-server shard in another process, over TCP loopback, for a flat "model" of
// each size. Prints per size the median time of a push-pull (gradients in, updated
// parameters back, SGD applied on the shard in between) and the rate it moves data:
// 2 x model bytes / time, to compare with raw TCP bandwidth (scripts/bench_pushpull.sh
// runs iperf3 in the same run); beside it, the baseline the push-pull is meant to
// beat: the model pushed one way on a plain gRPC client stream of protobuf chunks of
// the same size (model bytes / time).
#ifndef RINGSIDE_EXPERIMENTS_BENCH_PUSHPULL_BENCH_H_
#define RINGSIDE_EXPERIMENTS_BENCH_PUSHPULL_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ps_server/shard.h"

namespace ringside {

struct PushPullBenchOptions {
  int64_t bytes = 1 << 20;  // Model size.
  int64_t chunk_bytes = kDefaultPsChunkBytes;
  int warmup = 3;
  int iters = 10;           // Timed push-pulls (the median is printed).
  bool print_header = false;
  std::string server;       // host:port of the shard.
  // CPUs for the worker's process and the shard's (see cpu_pinning.h); -1: wherever
  // the scheduler puts them.
  int worker_cpu = -1;
  int server_cpu = -1;
};

// The shard's half: hosts shard 0 of 1 for one worker on `listen` until the worker
// says goodbye.
absl::Status RunPushPullBenchServer(const PushPullBenchOptions& options, const std::string& listen);
// The worker's half: prints one table row to stdout.
absl::Status RunPushPullBenchWorker(const PushPullBenchOptions& options);

// The sweep: for each size, starts the shard as a child process (`ringside bench
// pushpull-server`, spawned from /proc/self/exe on a free port) and runs the worker's
// half here. With worker_cpu set, pins the calling thread first, so call it before
// this process starts any thread. Blocks; Internal if a server child fails.
absl::Status RunPushPullSweep(PushPullBenchOptions options, const std::vector<int64_t>& sizes);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_BENCH_PUSHPULL_BENCH_H_
