// Liveness: which of a job's ranks are lost, told through the job's rendezvous store
// (store.h), for the words of a failed collective. The two backends are twins over it:
//   - Gloo (gloo_peer_naming.h): after a failure, every survivor checks in at the store
//     (CheckInAfterFailure); the ranks that do not are the lost ones;
//   - NCCL (rank_monitor.h): every rank beats a heartbeat into the store; a failing rank
//     reads them twice (ReadRankRecords) and names the silent ones.
// What both need lives here once: reading every other rank's record at one moment,
// telling a missing record from a store that does not answer, and the words for a list
// of ranks. (The PS shard's lost-worker logic is its own: ps_server/.)
#ifndef RINGSIDE_DDP_RING_LIVENESS_H_
#define RINGSIDE_DDP_RING_LIVENESS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "ddp_ring/store.h"

namespace ringside {

// Every other rank's record at one moment.
struct RankRecords {
  // False when the store failed to answer (an error other than a missing key); the
  // records read before are kept, the others are nullopt.
  bool store_ok = true;
  // [world_size]: the value under key(r), nullopt where the key does not exist (and for
  // this rank, which is not read).
  std::vector<std::optional<std::string>> values;
};

// Reads key(r) for every rank r != rank of world_size with zero-timeout Gets (a missing
// key answers at once), stopping at the first store failure. Blocks for world_size - 1
// store round trips. Thread-safe (Stores are).
RankRecords ReadRankRecords(Store* store, int rank, int world_size,
                            absl::FunctionRef<std::string(int r)> key);

// "2" / "1, 3": ranks as the failure messages list them, after "rank" or "peer rank",
// singular even for a list, so that /rank ([0-9]+, )*R\b/ finds rank R in a message.
std::string JoinRanks(const std::vector<int>& ranks);

// Who checked in after a failure (CheckInAfterFailure).
struct CheckIn {
  // The store did not answer (this rank could not check in, or the wait failed other
  // than by its deadline): its host is stopped or gone.
  bool store_unreachable = false;
  // The ranks that did not check in within the window, ascending; empty when all did.
  std::vector<int> missing;
};

// The survivors' census after a failure: sets "alive_after_failure/<rank>" in `store`,
// then waits up to `window` for every rank's key. Every failing rank checks in first,
// so that the others' census finds it alive; a rank that is gone never does. (A
// transport's own naming of the far end is not enough: a survivor that failed first
// closes its connections too.) Blocks at most `window` plus a few store round trips.
// The keys are never deleted: one census per store (give each group its own prefix).
CheckIn CheckInAfterFailure(Store* store, int rank, int world_size, absl::Duration window);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_LIVENESS_H_
