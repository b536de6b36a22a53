#include "ddp_ring/gloo_peer_naming.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ddp_ring/liveness.h"

namespace ringside {

GlooPeerNaming::GlooPeerNaming(Store* store, int rank, int world_size, absl::Duration timeout,
                               std::vector<std::pair<std::string, int>> peer_addresses)
    : store_(store),
      rank_(rank),
      world_size_(world_size),
      timeout_(timeout),
      peer_addresses_(std::move(peer_addresses)) {}

absl::Status GlooPeerNaming::Name(const absl::Status& status) const {
  const std::string message(status.message());
  const size_t at = message.find(" failed: ");
  if (at == std::string::npos || world_size_ == 1) return status;
  std::string peers;
  if (store_ != nullptr) {
    const CheckIn check_in = CheckInAfterFailure(store_, rank_, world_size_,
                                                 std::min(timeout_ / 2, absl::Seconds(1)));
    if (check_in.store_unreachable) {
      peers = "0 (it hosts the store, which does not answer: stopped or gone)";
    } else {
      peers = JoinRanks(check_in.missing);
    }
  }
  // Everyone alive (or no store): the far end named by Gloo's message, if known.
  if (peers.empty()) {
    for (const auto& [address, peer] : peer_addresses_) {
      if (message.find(address) != std::string::npos) {
        peers = absl::StrCat(peer);
        break;
      }
    }
  }
  if (peers.empty()) return status;
  // One lost peer: where it is (the host matters across machines).
  for (const auto& [address, peer] : peer_addresses_) {
    if (peers == absl::StrCat(peer)) {
      absl::StrAppend(&peers, " (at ", address, ")");
      break;
    }
  }
  const size_t cut = at + strlen(" failed: ");
  return absl::Status(status.code(), absl::StrCat(message.substr(0, cut), "peer rank ", peers,
                                                  ": ", message.substr(cut)));
}

}  // namespace ringside
