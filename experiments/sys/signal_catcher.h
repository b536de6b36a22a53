// SIGINT and SIGTERM, caught for a scope instead of ending the process: the one signal
// catcher of the CLI. A launcher forwards what it caught to its children, a matrix run
// stops after the running cell, and set-up that must be undone (an emulated network)
// finishes before the process reacts.
#ifndef RINGSIDE_EXPERIMENTS_SYS_SIGNAL_CATCHER_H_
#define RINGSIDE_EXPERIMENTS_SYS_SIGNAL_CATCHER_H_

#include <signal.h>

namespace ringside {

// While an instance lives, SIGINT and SIGTERM only record the signal; the destructor
// restores the handlers that were in place before. Catchers nest (the inner one's
// lifetime must lie within the outer one's, as scopes do): a signal caught by an inner
// catcher stays visible to the outer one unless the inner one took it. Create and
// destroy on one thread; caught()/Take() may be called from any thread.
//
// A signal handler can only reach process-wide state, so the caught signal is kept in
// one process-wide atomic; this class is its only user.
class ScopedSignalCatcher {
 public:
  ScopedSignalCatcher();
  ~ScopedSignalCatcher();
  ScopedSignalCatcher(const ScopedSignalCatcher&) = delete;
  ScopedSignalCatcher& operator=(const ScopedSignalCatcher&) = delete;

  // The last signal caught and not taken (0: none). Does not clear it.
  int caught() const;
  // Returns caught() and clears it, so that each signal is acted on once.
  int Take();

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_SYS_SIGNAL_CATCHER_H_
