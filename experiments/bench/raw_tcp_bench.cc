#include "experiments/bench/raw_tcp_bench.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "common/frame_io.h"
#include "common/socket_io.h"
#include "common/status_macros.h"
#include "common/task_thread.h"
#include "common/trace.h"
#include "experiments/sys/median.h"

namespace ringside {
namespace {

constexpr char kLink[] = "raw TCP bench connection";
// A message crosses as frames of at most this, each from (and into) one buffer that
// stays in cache, as iperf3 writes one 128 KiB buffer again and again: the socket's
// rate, not the memory's (a 64 MiB frame from a 64 MiB buffer ran at half of it here).
constexpr size_t kFrameBytes = size_t{1} << 20;

void NoProgress(size_t, size_t) {}

}  // namespace

absl::StatusOr<RawTcpResult> MeasureRawTcp(const RawTcpBenchOptions& o) {
  if (o.bytes < 1 || o.iters < 1 || o.warmup < 0) {
    return absl::InvalidArgumentError("raw TCP bench: needs bytes >= 1, iters >= 1 and warmup >= 0");
  }
  RINGSIDE_ASSIGN_OR_RETURN(TcpListener listener, ListenTcp("127.0.0.1", 1));
  const std::vector<std::string> endpoint = absl::StrSplit(listener.endpoint, ' ');
  if (endpoint.size() != 2) return absl::InternalError("raw TCP bench: listener endpoint " + listener.endpoint);
  const int messages = o.warmup + o.iters;
  const size_t bytes = static_cast<size_t>(o.bytes);

  // The receiver: accepts, then takes each message whole and answers it with 8 bytes.
  absl::Status received = absl::OkStatus();
  TaskThread receiver;
  receiver.Run([&]() {
    received = [&]() -> absl::Status {
      RINGSIDE_ASSIGN_OR_RETURN(ScopedFd fd, AcceptTcp(listener.fd.get(), absl::Now() + o.timeout));
      std::vector<char> in(std::min(bytes, kFrameBytes));
      uint64_t answer = 0;
      FrameCounts counts;
      for (int m = 0; m < messages; ++m) {
        for (size_t done = 0; done < bytes; done += kFrameBytes) {
          RINGSIDE_RETURN_IF_ERROR(ExchangeFrames(fd.get(), m, nullptr, 0, in.data(),
                                                  std::min(kFrameBytes, bytes - done), absl::Now() + o.timeout,
                                                  "the sender", kLink, NoProgress, &counts));
        }
        answer = m;
        RINGSIDE_RETURN_IF_ERROR(ExchangeFrames(fd.get(), m, &answer, sizeof(answer), nullptr, 0,
                                                absl::Now() + o.timeout, "the sender", kLink, NoProgress, &counts));
      }
      return absl::OkStatus();
    }();
  });

  std::vector<double> seconds;  // The timed messages'.
  const absl::Status sent = [&]() -> absl::Status {
    RINGSIDE_ASSIGN_OR_RETURN(ScopedFd fd, ConnectTcp(endpoint[0], endpoint[1], absl::Now() + o.timeout));
    const std::vector<char> out(std::min(bytes, kFrameBytes), 1);
    uint64_t answer = 0;
    FrameCounts counts;
    for (int m = 0; m < messages; ++m) {
      const int64_t start = NowMicros();
      for (size_t done = 0; done < bytes; done += kFrameBytes) {
        RINGSIDE_RETURN_IF_ERROR(ExchangeFrames(fd.get(), m, out.data(), std::min(kFrameBytes, bytes - done),
                                                nullptr, 0, absl::Now() + o.timeout, "the receiver", kLink,
                                                NoProgress, &counts));
      }
      RINGSIDE_RETURN_IF_ERROR(ExchangeFrames(fd.get(), m, nullptr, 0, &answer, sizeof(answer),
                                              absl::Now() + o.timeout, "the receiver", kLink, NoProgress, &counts));
      if (m >= o.warmup) seconds.push_back(static_cast<double>(NowMicros() - start) / 1e6);
    }
    return absl::OkStatus();
  }();
  receiver.Wait();
  // The receiver's error is the cause where both failed (the sender then saw it close).
  RINGSIDE_RETURN_IF_ERROR(received);
  RINGSIDE_RETURN_IF_ERROR(sent);
  RawTcpResult r;
  r.median_s = Median(seconds);
  r.bytes_per_s = r.median_s > 0 ? static_cast<double>(o.bytes) / r.median_s : 0;
  return r;
}

}  // namespace ringside
