#include "ddp_ring/process_group_factory.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ddp_ring/gloo_process_group.h"

// RINGSIDE_CUDA is 1 (local_defines in ddp_ring/BUILD) exactly when
// //ddp_ring:nccl_process_group is linked in (--config=cuda), else 0.
#if RINGSIDE_CUDA
#include "ddp_ring/nccl_process_group.h"
#endif

namespace ringside {

bool ProcessGroupBuiltWithCuda() { return RINGSIDE_CUDA != 0; }

absl::Status CheckProcessGroupBackend(absl::string_view backend) {
  if (backend == "gloo") return absl::OkStatus();
  if (backend == "nccl") {
    if (ProcessGroupBuiltWithCuda()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        "--backend=nccl: this ringside was built without CUDA; rebuild with --config=cuda "
        "(docs/build.md)");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--backend=", backend, " is not a process-group backend (gloo or nccl)"));
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> NewProcessGroup(
    absl::string_view backend, Store* store, const ProcessGroupOptions& options) {
  RINGSIDE_RETURN_IF_ERROR(CheckProcessGroupBackend(backend));
#if RINGSIDE_CUDA
  if (backend == "nccl") return NewNcclProcessGroup(store, options);
#endif
  return NewGlooProcessGroup(store, options);
}

}  // namespace ringside
