// Checked-call macros for CUDA runtime, cuBLAS and NCCL calls. Each failure becomes an
// absl::Status naming the call, file:line, the library's error string and the rank, and
// is returned from the enclosing function (which must return absl::Status or
// absl::StatusOr). They never exit or abort: a distributed job must be able to report
// which rank failed and how.
#ifndef RINGSIDE_COMMON_CUDA_CHECK_H_
#define RINGSIDE_COMMON_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"

namespace ringside {

// The Status for a failed call. `rank` < 0 means "not in a distributed job".
absl::Status CudaError(cudaError_t err, const char* call, const char* file, int line,
                       int rank);
absl::Status CublasError(cublasStatus_t err, const char* call, const char* file, int line,
                         int rank);
absl::Status NcclError(ncclResult_t err, const char* call, const char* file, int line,
                       int rank);

}  // namespace ringside

#define RINGSIDE_CUDA_RETURN_IF_ERROR(rank, call)                                  \
  do {                                                                             \
    const cudaError_t ringside_cuda_err_ = (call);                                 \
    if (ringside_cuda_err_ != cudaSuccess) {                                       \
      return ::ringside::CudaError(ringside_cuda_err_, #call, __FILE__, __LINE__,  \
                                   (rank));                                        \
    }                                                                              \
  } while (0)

#define RINGSIDE_CUBLAS_RETURN_IF_ERROR(rank, call)                                    \
  do {                                                                                 \
    const cublasStatus_t ringside_cublas_err_ = (call);                                \
    if (ringside_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                               \
      return ::ringside::CublasError(ringside_cublas_err_, #call, __FILE__, __LINE__,  \
                                     (rank));                                          \
    }                                                                                  \
  } while (0)

#define RINGSIDE_NCCL_RETURN_IF_ERROR(rank, call)                                  \
  do {                                                                             \
    const ncclResult_t ringside_nccl_err_ = (call);                                \
    if (ringside_nccl_err_ != ncclSuccess && ringside_nccl_err_ != ncclInProgress) { \
      return ::ringside::NcclError(ringside_nccl_err_, #call, __FILE__, __LINE__,  \
                                   (rank));                                        \
    }                                                                              \
  } while (0)

#endif  // RINGSIDE_COMMON_CUDA_CHECK_H_
