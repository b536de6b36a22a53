#include "experiments/emulated_launch.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

// Written by the signal handler (which may only set a flag), read by InterruptGuard.
std::atomic<int> g_interrupt{0};
void OnInterrupt(int sig) { g_interrupt.store(sig); }
struct sigaction g_old_int, g_old_term;

}  // namespace

InterruptGuard::InterruptGuard() {
  g_interrupt.store(0);
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_old_int);
  sigaction(SIGTERM, &action, &g_old_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

bool InterruptGuard::interrupted() const { return g_interrupt.load() != 0; }

absl::StatusOr<std::string> SelfExePath() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return absl::InternalError(absl::StrCat("readlink /proc/self/exe: ", strerror(errno)));
  return std::string(path, n);
}

absl::StatusOr<std::unique_ptr<EmulatedNetwork>> PlaceRanksInNetwork(
    const std::string& profile_text, const std::vector<std::string>& roles, LaunchOptions* launch) {
  RINGSIDE_ASSIGN_OR_RETURN(NetworkProfile profile, ParseNetworkProfile(profile_text));
  if (!profile.enabled) return std::unique_ptr<EmulatedNetwork>();
  RINGSIDE_RETURN_IF_ERROR(CheckNetworkPrivileges());
  RemoveStaleNetworks().IgnoreError();  // Leftovers of killed runs; best effort.
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<EmulatedNetwork> net,
                            EmulatedNetwork::Create(profile, roles));
  launch->rank_prefix.clear();
  for (int i = 0; i < net->num_nodes(); ++i) launch->rank_prefix.push_back(net->CommandPrefix(i));
  return net;
}

}  // namespace ringside
