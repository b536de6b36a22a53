#include "ddp_ring/nccl_rendezvous.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cuda_check.h"
#include "common/device.h"

namespace ringside {
namespace {

constexpr char kUniqueIdKey[] = "nccl_unique_id";

// Protocol step 1: a GPU, made current; NCCL_HOSTID set before NCCL's first call.
absl::Status SelectDevice(const ProcessGroupOptions& options) {
  const int rank = options.rank;
  const DeviceInfo devices = DetectDevices();
  if (devices.gpu_count == 0) {
    return absl::UnavailableError(
        absl::StrCat("rank ", rank, ": no GPU: ", devices.detail));
  }
  if (options.cuda_device < 0 || options.cuda_device >= devices.gpu_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, ": CUDA device ", options.cuda_device, " of ", devices.gpu_count));
  }
  RINGSIDE_CUDA_RETURN_IF_ERROR(rank, cudaSetDevice(options.cuda_device));
  // NCCL reads its environment once, at its first call (the unique id below).
  if (!options.nccl_host_id.empty()) {
    setenv("NCCL_HOSTID", options.nccl_host_id.c_str(), /*overwrite=*/1);
  }
  return absl::OkStatus();
}

// Protocol step 2: the unique id through the store.
absl::StatusOr<ncclUniqueId> ExchangeUniqueId(Store* store,
                                              const ProcessGroupOptions& options) {
  const int rank = options.rank;
  ncclUniqueId id;
  if (rank == 0) {
    RINGSIDE_NCCL_RETURN_IF_ERROR(rank, ncclGetUniqueId(&id));
    const absl::Status status =
        store->Set(kUniqueIdKey, std::string(id.internal, sizeof(id.internal)));
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("rank 0: cannot publish the NCCL unique id: ", status.message()));
    }
    return id;
  }
  absl::StatusOr<std::string> value = store->Get(kUniqueIdKey, options.timeout);
  if (!value.ok()) {
    return absl::Status(value.status().code(),
                        absl::StrCat("rank ", rank, ": no NCCL unique id from rank 0: ",
                                     value.status().message()));
  }
  if (value->size() != sizeof(id.internal)) {
    return absl::InternalError(absl::StrCat("rank ", rank, ": the NCCL unique id has ",
                                            value->size(), " bytes, expected ",
                                            sizeof(id.internal)));
  }
  std::memcpy(id.internal, value->data(), sizeof(id.internal));
  return id;
}

// Protocol step 3: the communicator, bounded by the timeout (aborted on failure).
absl::StatusOr<ncclComm_t> InitCommunicator(const ncclUniqueId& id,
                                            const ProcessGroupOptions& options) {
  const int rank = options.rank;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t init = ncclCommInitRankConfig(&comm, options.world_size, id, rank, &config);
  if (init != ncclSuccess && init != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    return NcclError(init, "ncclCommInitRankConfig", __FILE__, __LINE__, rank);
  }
  if (absl::Status ready =
          AwaitCommReady(comm, absl::Now() + options.timeout, rank, "ncclCommInitRank");
      !ready.ok()) {
    ncclCommAbort(comm);
    if (absl::IsDeadlineExceeded(ready)) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank, ": NCCL communicator of ", options.world_size,
                       " ranks not ready after ", absl::FormatDuration(options.timeout),
                       " (did every rank join?)"));
    }
    return ready;
  }
  return comm;
}

}  // namespace

absl::StatusOr<ncclComm_t> ConnectNccl(Store* store, const ProcessGroupOptions& options) {
  if (absl::Status s = SelectDevice(options); !s.ok()) return s;
  absl::StatusOr<ncclUniqueId> id = ExchangeUniqueId(store, options);
  if (!id.ok()) return id.status();
  return InitCommunicator(*id, options);
}

absl::Status AwaitCommReady(ncclComm_t comm, absl::Time deadline, int rank,
                            absl::string_view what) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    RINGSIDE_NCCL_RETURN_IF_ERROR(rank, ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) {
      return NcclError(state, std::string(what).c_str(), __FILE__, __LINE__, rank);
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank, ": ", what, " did not complete in time"));
    }
    absl::SleepFor(kNcclPollInterval);
  }
}


}  // namespace ringside
