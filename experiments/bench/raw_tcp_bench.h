// Raw TCP: one connection on loopback moving frames one way through the frame layer
// every non-gRPC byte of ringside travels in (common/frame_io.h): the rate each
// transport's path is set beside, measured in the same run as the transports (issue
// #35: a PS cell's communication split into what the wire must carry and what its
// transport adds). iperf3's one loopback stream is the outside reference for this
// number (docs/benchmarks.md).
#ifndef RINGSIDE_EXPERIMENTS_BENCH_RAW_TCP_BENCH_H_
#define RINGSIDE_EXPERIMENTS_BENCH_RAW_TCP_BENCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringside {

struct RawTcpBenchOptions {
  int64_t bytes = int64_t{16} << 20;  // One message, sent `warmup + iters` times.
  int warmup = 1;
  int iters = 5;
  absl::Duration timeout = absl::Seconds(30);  // Per message; then DeadlineExceeded.
};

struct RawTcpResult {
  double median_s = 0;     // One message's time, sent until its 8-byte answer is back.
  double bytes_per_s = 0;  // bytes / median_s.
};

// Sends `bytes` from this thread to a receiver thread over one loopback connection
// (127.0.0.1, a port the kernel picks), `warmup + iters` times, each message as frames
// of up to 1 MiB from one buffer into one buffer (the socket's rate, as iperf3's), timed
// from its first byte sent until the receiver's answer (8 bytes) is back. Blocks until
// done.
// InvalidArgument for bytes < 1 or iters < 1; the socket layer's errors otherwise.
absl::StatusOr<RawTcpResult> MeasureRawTcp(const RawTcpBenchOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_BENCH_RAW_TCP_BENCH_H_
