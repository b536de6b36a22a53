// The NCCL backend of ProcessGroup (process_group.h): GPU collectives on the group's
// own CUDA stream. The twin of gloo_process_group.h, built only under --config=cuda
// (//ddp_ring:nccl_process_group links libnccl and libcudart; docs/build.md). Code that
// must build either way creates groups through process_group_factory.h.
#ifndef RINGSIDE_DDP_RING_NCCL_PROCESS_GROUP_H_
#define RINGSIDE_DDP_RING_NCCL_PROCESS_GROUP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/store.h"

namespace ringside {

// The unique id travels through `store` (which must outlive the group). Blocks until
// all ranks joined or options.timeout passed. Unavailable when there is no usable GPU.
// Data pointers are device memory of options.cuda_device.
absl::StatusOr<std::unique_ptr<ProcessGroup>> NewNcclProcessGroup(
    Store* store, const ProcessGroupOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_NCCL_PROCESS_GROUP_H_
