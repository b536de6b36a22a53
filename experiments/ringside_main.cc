// ringside: the one user-facing binary. Process-wide tuning that must happen before
// anything else runs, then the command line (experiments/cli/cli.h).
#include <malloc.h>

#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "experiments/cli/cli.h"
#include "experiments/sys/crash_report.h"
#include "experiments/sys/subprocess.h"
#include "grpc/support/log.h"

// gRPC's own log lines (e.g. "Address already in use" before the store reports the
// same failure as a status) would break the one-error-line contract.
void DropGrpcLog(gpr_log_func_args*) {}

int main(int argc, char** argv) {
  // A child spawned with SpawnOptions::die_with_parent: arm the parent-death signal and
  // become the real program, before anything here touches the environment.
  if (const int rc = ringside::RunParentDeathGuard(argc, argv); rc >= 0) return rc;
  // A crash prints its stack before the signal ends the process.
  ringside::InstallCrashReport(argv[0]);
  // Tensor streams allocate and free megabyte buffers all the time: keep them in the
  // heap instead of fresh mmap()s, whose pages the kernel faults in and zeroes again
  // for every chunk (about 10% of a push-pull's CPU time).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Debian's abseil checks every lock acquisition for cycles unless told not to;
  // the unit tests keep the check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Before gRPC starts (it reads the variable once), and inherited by every process
  // this one launches: two of gRPC 1.51's transport experiments that go together.
  // tcp_frame_size_tuning tells the TCP layer how many bytes the message being read
  // still needs; tcp_rcv_lowat turns that into SO_RCVLOWAT, so a thread waiting for a
  // 1 MiB chunk is woken near its end instead of for every batch of segments. A PS
  // step on Fashion-MNIST waits about 0.4 ms less for its parameters
  // (docs/benchmarks.md, tenth session). A GRPC_EXPERIMENTS of the user's wins.
  setenv("GRPC_EXPERIMENTS", "tcp_frame_size_tuning,tcp_rcv_lowat", /*overwrite=*/0);
  if (std::getenv("RINGSIDE_GRPC_LOG") == nullptr) gpr_set_log_function(DropGrpcLog);
  return ringside::RunCli(argc, argv);
}
