// Ranks as threads of this one process: `world` Gloo groups rendezvousing through one
// in-memory store. For the teaching commands that run a collective for real on a
// laptop (`ringside collective`, `ringside explain ring`) and for tests.
#ifndef RINGSIDE_DDP_RING_LOCAL_RANKS_H_
#define RINGSIDE_DDP_RING_LOCAL_RANKS_H_

#include <functional>

#include "absl/status/status.h"
#include "ddp_ring/process_group.h"

namespace ringside {

// Runs body(group) on `world` threads, rank r's with its own Gloo group of `world`
// ranks (options' rank and world_size are set per thread; the rest is `options`'s:
// timeout, algorithm, hostname). Blocks until every thread returned. OK when every
// rank's group was created and its body returned OK; otherwise the error of the
// lowest failing rank, prefixed "rank R: ". Each body must issue its collectives in
// the same order as the others (process_group.h); the group's timeout bounds a body
// that waits for a peer that failed.
absl::Status RunLocalGlooRanks(int world, const ProcessGroupOptions& options,
                               const std::function<absl::Status(ProcessGroup& group)>& body);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_LOCAL_RANKS_H_
