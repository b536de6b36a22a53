// `ringside bench pushpull`: one worker's combined push-pull against one
// parameter-server shard in another process, over TCP loopback, for a flat "model" of
// each size. Prints per size the median time of a push-pull (gradients in, updated
// parameters back, SGD applied on the shard in between) and the rate it moves data:
// 2 x model bytes / time, to compare with raw TCP bandwidth (scripts/bench_pushpull.sh
// runs iperf3 in the same run); beside it, the baseline the push-pull is meant to
// beat: the model pushed one way on a plain client stream of chunks of the same size
// (model bytes / time). Over gRPC (protobuf chunks) or, with transport "tcp", the TCP
// data plane (ps_server/tcp_wire.h) for both.
#ifndef RINGSIDE_EXPERIMENTS_BENCH_PUSHPULL_BENCH_H_
#define RINGSIDE_EXPERIMENTS_BENCH_PUSHPULL_BENCH_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rpc_security.h"
#include "common/run_config.h"
#include "ps_server/shard.h"

namespace ringside {

struct PushPullBenchOptions {
  int64_t bytes = 1 << 20;  // Model size.
  int64_t chunk_bytes = kDefaultPsChunkBytes;
  int warmup = 3;
  int iters = 10;           // Timed push-pulls (the median is reported).
  std::string server;       // host:port of the shard.
  // CPUs for the worker's process and the shard's (see cpu_pinning.h); -1: wherever
  // the scheduler puts them.
  int worker_cpu = -1;
  int server_cpu = -1;
  // The sweep hosts each size's shard on gRPC threads of this process instead of a
  // child process (no pinning then); TCP loopback between the two ends either way.
  bool server_in_process = false;
  // The security the shard listens with and the worker connects with; empty token (the
  // bench verbs set none): unauthenticated.
  RpcSecurity security;
  // What carries the tensors: RunConfig.ps_transport ("tcp" or "grpc").
  std::string transport = kPsTransportDefault;
  // RunPushPullSweep also measures raw TCP at each size (raw_tcp_bench.h, the same
  // iterations; its threads wherever the scheduler puts them).
  bool raw_tcp = false;
};

// One size: the push-pull's median and fastest time, its rate (2 x bytes / median:
// the data moves both ways), the plain one-way stream's median and rate, and raw TCP's
// one-way rate measured beside them.
struct PushPullRow {
  int64_t bytes = 0;
  int64_t chunks = 0;
  double median_ms = 0, min_ms = 0, gbps = 0;
  double plain_ms = 0, plain_gbps = 0;
  double raw_gbps = 0;  // Raw TCP one way at the same size (0: not measured).
};

// The shard's half: hosts shard 0 of 1 for one worker on `listen` until the worker
// says goodbye.
absl::Status RunPushPullBenchServer(const PushPullBenchOptions& options, const std::string& listen);
// The worker's half, against options.server. Internal if a returned parameter differs
// from the reference SGD's.
absl::StatusOr<PushPullRow> MeasurePushPull(const PushPullBenchOptions& options);

// One worker's push-pulls against a shard in this process while other work ran beside
// them (PushPullsBeside).
struct PushPullLoad {
  int64_t push_pulls = 0;  // Push-pulls of options.bytes completed while `beside` ran.
  double seconds = 0;      // How long `beside` ran.
};

// Hosts shard 0 of 1 in this process on a free loopback port (or, with options.server
// set, uses the shard listening there: `bench pushpull-server` in another process, as
// calibrate's PS CPU phase through a shaped link does), starts one worker's push-pulls of options.bytes against it back to back on
// a thread of their own, runs `beside` on the calling thread, stops the push-pulls and
// returns how many completed while `beside` ran. Both ends and `beside` share this
// process's CPU (calibrate runs it on an emulated node, so that the communication's CPU
// shows as compute lost; calibrate.cc). Blocks until `beside` returns and the loop
// stopped; `beside`'s error, else the first push-pull's, else the shard's.
absl::StatusOr<PushPullLoad> PushPullsBeside(PushPullBenchOptions options,
                                             const std::function<absl::Status()>& beside);

// `ringside bench pushpull-beside`'s one line on stdout: PushPullLoad's fields and the
// steps' mean wall time, "push_pulls=12 seconds=3.204 mean_step_ms=455.1".
std::string FormatPushPullsBeside(const PushPullLoad& load, double mean_step_ms);
// Reads that line back (calibrate.cc); InvalidArgument quoting it if it is not one.
absl::Status ParsePushPullsBeside(absl::string_view line, PushPullLoad* load, double* mean_step_ms);

// The table: a header line, one line per row.
void PrintPushPullHeader(FILE* out);
void PrintPushPullRow(const PushPullRow& row, FILE* out);

// The sweep: for each size, starts the shard (as a child process, `ringside bench
// pushpull-server` spawned from SelfExePath() on a free port, or in this process with
// server_in_process) and runs the worker's half here. `on_row`, if set, is called as
// each size finishes. With worker_cpu set, pins the calling thread first, so call it
// before this process starts any thread. Blocks; Internal if a server fails.
absl::StatusOr<std::vector<PushPullRow>> RunPushPullSweep(
    PushPullBenchOptions options, const std::vector<int64_t>& sizes,
    const std::function<void(const PushPullRow&)>& on_row = nullptr);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_BENCH_PUSHPULL_BENCH_H_
