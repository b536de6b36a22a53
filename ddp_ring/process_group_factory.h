// The one place that maps a backend name ("gloo", "nccl") to a ProcessGroup. Which
// backends exist depends on the build: Gloo always, NCCL only under --config=cuda
// (docs/build.md). Callers that take the backend from the user (ddp_worker.cc) go
// through here, so that a CPU build answers --backend=nccl with one clear error.
#ifndef RINGSIDE_DDP_RING_PROCESS_GROUP_FACTORY_H_
#define RINGSIDE_DDP_RING_PROCESS_GROUP_FACTORY_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/store.h"

namespace ringside {

// True in a --config=cuda build (the NCCL backend is linked in).
bool ProcessGroupBuiltWithCuda();

// OK if this build can create `backend`. InvalidArgument for a name that is no
// backend; FailedPrecondition for "nccl" in a build without CUDA ("this ringside was
// built without CUDA; rebuild with --config=cuda"). Cheap and local: lets a caller
// refuse before any rendezvous.
absl::Status CheckProcessGroupBackend(absl::string_view backend);

// CheckProcessGroupBackend, then NewGlooProcessGroup or NewNcclProcessGroup with the
// same contract (gloo_process_group.h, nccl_process_group.h).
absl::StatusOr<std::unique_ptr<ProcessGroup>> NewProcessGroup(
    absl::string_view backend, Store* store, const ProcessGroupOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_PROCESS_GROUP_FACTORY_H_
