#include "experiments/launch/network_placement.h"

#include "common/status_macros.h"

namespace ringside {

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
