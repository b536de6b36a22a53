// CPU placement for the benchmarks. On loopback the two ends of a transfer share the
// machine's cores with each other and with the kernel's TCP processing; the scheduler
// often wakes the receiver on the sender's core, where the two then take turns. The
// push-pull benchmark can pin each end to a core of its own, as `iperf3 -A` does for
// the raw-TCP figure it is compared with (scripts/bench_pushpull.sh runs both ways).
#ifndef RINGSIDE_EXPERIMENTS_BENCH_CPU_PINNING_H_
#define RINGSIDE_EXPERIMENTS_BENCH_CPU_PINNING_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside {

// The CPUs this process may run on, ascending.
std::vector<int> AllowedCpus();

// Parses a comma-separated list of `count` distinct CPUs ("0,1"), each one this process
// may run on. InvalidArgument, naming `flag`, otherwise.
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view spec, int count,
                                              absl::string_view flag);

// Restricts the calling thread to `cpu`, which may lie outside AllowedCpus() (a child
// of a pinned process moves to its own core). Threads it starts afterwards inherit
// that, so a process calls this before it starts any (gRPC's included).
// InvalidArgument if the kernel does not offer that CPU to this process.
absl::Status PinCallingThread(int cpu);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_BENCH_CPU_PINNING_H_
