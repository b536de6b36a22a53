// The Gloo backend of ProcessGroup (process_group.h): CPU collectives over Gloo's TCP
// transport. Always built; the twin of nccl_process_group.h.
#ifndef RINGSIDE_DDP_RING_GLOO_PROCESS_GROUP_H_
#define RINGSIDE_DDP_RING_GLOO_PROCESS_GROUP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/store.h"

namespace ringside {

// Rendezvous through `store` (which must outlive the group; give each group its own
// prefix). Blocks until all world_size ranks joined or options.timeout passed
// (DeadlineExceeded naming the ranks that never arrived, where known). Data pointers
// are host memory.
absl::StatusOr<std::unique_ptr<ProcessGroup>> NewGlooProcessGroup(
    Store* store, const ProcessGroupOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_GLOO_PROCESS_GROUP_H_
