#include "common/cuda_check.h"

#include "absl/strings/str_cat.h"

namespace ringside {
namespace {

std::string Where(const char* call, const char* file, int line, int rank) {
  std::string where = absl::StrCat(call, " at ", file, ":", line);
  if (rank >= 0) absl::StrAppend(&where, " on rank ", rank);
  return where;
}

}  // namespace

absl::Status CudaError(cudaError_t err, const char* call, const char* file, int line,
                       int rank) {
  // No device or driver is a property of the machine, not a bug in the call.
  const absl::StatusCode code =
      (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
          ? absl::StatusCode::kUnavailable
          : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(Where(call, file, line, rank), ": CUDA error ",
                                         static_cast<int>(err), " (",
                                         cudaGetErrorString(err), ")"));
}

absl::Status CublasError(cublasStatus_t err, const char* call, const char* file, int line,
                         int rank) {
  return absl::InternalError(absl::StrCat(Where(call, file, line, rank), ": cuBLAS error ",
                                          static_cast<int>(err), " (",
                                          cublasGetStatusString(err), ")"));
}

absl::Status NcclError(ncclResult_t err, const char* call, const char* file, int line,
                       int rank) {
  const absl::StatusCode code = err == ncclRemoteError ? absl::StatusCode::kUnavailable
                                                       : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(Where(call, file, line, rank), ": NCCL error ",
                                         static_cast<int>(err), " (",
                                         ncclGetErrorString(err), ")"));
}

}  // namespace ringside
