// The CUDA backend of the ops interface: GEMMs on cuBLAS, every other op a kernel of
// common/kernels/ (one .cu file per kernel family), all on one stream per object.
// Built only under --config=cuda; production code reaches it through NewOps("cuda").
#ifndef RINGSIDE_COMMON_CUDA_OPS_H_
#define RINGSIDE_COMMON_CUDA_OPS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/ops.h"

namespace ringside {

// Creates the backend on GPU `device` with its own stream and cuBLAS handle.
// FailedPrecondition naming the reason when the machine has no usable GPU
// (common/device.h), InvalidArgument when `device` is not one of its GPUs, the CUDA
// or cuBLAS error otherwise.
absl::StatusOr<std::unique_ptr<Ops>> NewCudaOps(int device, GemmPrecision precision);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_CUDA_OPS_H_
