#include "experiments/sys/crash_report.h"

#include <signal.h>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"

namespace ringside {

void InstallCrashReport(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  absl::FailureSignalHandlerOptions options;
  // After the report, the default action of the signal (exit status: killed by it).
  options.call_previous_handler = false;
  absl::InstallFailureSignalHandler(options);
  // abseil's handler takes SIGTERM too: a process the launcher stops must end quietly,
  // as before (ScopedSignalCatcher catches it where a command reacts to it).
  signal(SIGTERM, SIG_DFL);
}

}  // namespace ringside
