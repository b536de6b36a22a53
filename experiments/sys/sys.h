// experiments/sys/: the CLI's one small OS layer (LevelDB's Env idea at our size).
// Everything in experiments/ that starts a process, catches a signal, reads or writes a
// whole file or asks about this process goes through here.
//   subprocess.h      spawn with environment, streams, process group; wait with a
//                     deadline; RunCommand (capture, timeout); exit statuses in words
//   signal_catcher.h  ScopedSignalCatcher: SIGINT/SIGTERM recorded for a scope
//   crash_report.h    InstallCrashReport: a crashing process prints its stack
//   files.h           ReadFile, WriteFileAtomically
//   process_info.h    SelfExePath, IsTerminal, ReserveFreePort
//   median.h          Median, the statistic every report and bench quotes
// Clocks: common/trace.h's NowMicros and absl::Now.
#ifndef RINGSIDE_EXPERIMENTS_SYS_SYS_H_
#define RINGSIDE_EXPERIMENTS_SYS_SYS_H_

#include "experiments/sys/crash_report.h"
#include "experiments/sys/files.h"
#include "experiments/sys/median.h"
#include "experiments/sys/process_info.h"
#include "experiments/sys/signal_catcher.h"
#include "experiments/sys/subprocess.h"

#endif  // RINGSIDE_EXPERIMENTS_SYS_SYS_H_
