// GlooPeerNaming: names the rank behind a failed Gloo collective, the Gloo twin of the
// NCCL backend's RankMonitor (rank_monitor.h), both over liveness.h. Internal to the
// Gloo backend.
#ifndef RINGSIDE_DDP_RING_GLOO_PEER_NAMING_H_
#define RINGSIDE_DDP_RING_GLOO_PEER_NAMING_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ddp_ring/store.h"

namespace ringside {

class GlooPeerNaming {
 public:
  // `store` (null: no census, only the addresses) is borrowed and outlives the object;
  // `peer_addresses` maps the address of each peer's end of its connection to this
  // rank (published at rendezvous, gloo_rendezvous.h) to that peer.
  GlooPeerNaming(Store* store, int rank, int world_size, absl::Duration timeout,
                 std::vector<std::pair<std::string, int>> peer_addresses);

  // `status` ("rank 0: all_reduce #7 failed: <why>") with the lost peer named:
  // "rank 0: all_reduce #7 failed: peer rank 2 (at <address>): <why>". Every survivor
  // checks in at the store and waits min(timeout / 2, 1 s) for the others
  // (CheckInAfterFailure); the ranks that do not check in are the lost ones
  // ("peer rank 1, 3: ..."), and an unreachable store means rank 0, its host, is
  // stopped or gone ("peer rank 0 (it hosts the store, which does not answer: stopped
  // or gone): ..."). If every rank checked in, the far end's address in Gloo's message
  // names it. `status` unchanged when nobody can be named. Blocks for the wait.
  absl::Status Name(const absl::Status& status) const;

 private:
  Store* const store_;
  const int rank_;
  const int world_size_;
  const absl::Duration timeout_;
  const std::vector<std::pair<std::string, int>> peer_addresses_;
};

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_GLOO_PEER_NAMING_H_
