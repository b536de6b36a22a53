// What a process prints when it crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
// SIGTRAP): one line naming the signal, then the symbolized stack, on stderr; the
// signal is then raised again, so the exit status still says what killed it (a
// launcher's summary names it). A crash seen once in a suite of a hundred runs is
// found from that stack, not reproduced. SIGINT and SIGTERM stay as they were: a
// stopped job ends without a report (ScopedSignalCatcher handles those).
#ifndef RINGSIDE_EXPERIMENTS_SYS_CRASH_REPORT_H_
#define RINGSIDE_EXPERIMENTS_SYS_CRASH_REPORT_H_

namespace ringside {

// Installs the report for this process (abseil's failure signal handler; symbols from
// argv0's ELF file). Call once, first thing in main, before threads start.
void InstallCrashReport(const char* argv0);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_SYS_CRASH_REPORT_H_
