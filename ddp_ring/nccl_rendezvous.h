// The NCCL backend's rendezvous: how the ranks of an NCCL process group find each other
// through the job's store and build one communicator. Internal to the NCCL backend
// (nccl_process_group.h); the twin of the Gloo backend's gloo_rendezvous.h.
//
// Protocol of ConnectNccl:
//   1. Device: DetectDevices (no GPU -> Unavailable), cudaSetDevice(cuda_device), and
//      NCCL_HOSTID set (before NCCL's first call, which reads the environment once).
//   2. Unique id: rank 0 creates it (ncclGetUniqueId) and sets "nccl_unique_id" in the
//      store; the other ranks get it, waiting at most the timeout.
//   3. Communicator: ncclCommInitRankConfig in non-blocking mode, then polling
//      ncclCommGetAsyncError until it is ready or the timeout passed (a rank that never
//      joins gives DeadlineExceeded and the half-built communicator is aborted,
//      instead of a hang).
// Each failure names the rank and the step it happened in.
#ifndef RINGSIDE_DDP_RING_NCCL_RENDEZVOUS_H_
#define RINGSIDE_DDP_RING_NCCL_RENDEZVOUS_H_

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/store.h"

namespace ringside {

// Runs the protocol above for options.rank of options.world_size through `store`.
// Blocks, each step bounded by options.timeout. Unavailable without a GPU,
// InvalidArgument for a CUDA device out of range, DeadlineExceeded when rank 0's id or
// a rank's join never came; otherwise CUDA's, NCCL's or the store's error, naming the
// rank. The caller owns the communicator (ncclCommDestroy / ncclCommAbort).
absl::StatusOr<ncclComm_t> ConnectNccl(Store* store, const ProcessGroupOptions& options);

// How often the backend polls a communicator or an event while it waits.
inline constexpr absl::Duration kNcclPollInterval = absl::Microseconds(50);

// Polls a non-blocking communicator until its pending operation (init, enqueue,
// finalize: `what`) finished. DeadlineExceeded after `deadline`; the NCCL error if it
// failed. Blocks; polls every kNcclPollInterval.
absl::Status AwaitCommReady(ncclComm_t comm, absl::Time deadline, int rank, absl::string_view what);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_NCCL_RENDEZVOUS_H_
