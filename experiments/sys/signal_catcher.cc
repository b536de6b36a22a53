#include "experiments/sys/signal_catcher.h"

#include <atomic>

namespace ringside {
namespace {

std::atomic<int> g_caught_signal{0};  // Written by OnSignal only; see the header.
std::atomic<int> g_depth{0};          // Catchers alive.

void OnSignal(int sig) { g_caught_signal.store(sig); }

}  // namespace

ScopedSignalCatcher::ScopedSignalCatcher() {
  // The outermost catcher starts clean; an inner one keeps what the outer one caught.
  if (g_depth.fetch_add(1) == 0) g_caught_signal.store(0);
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

ScopedSignalCatcher::~ScopedSignalCatcher() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  g_depth.fetch_sub(1);
}

int ScopedSignalCatcher::caught() const { return g_caught_signal.load(); }

int ScopedSignalCatcher::Take() { return g_caught_signal.exchange(0); }

}  // namespace ringside
