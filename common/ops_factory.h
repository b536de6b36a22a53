// The one place production code gets an Ops backend from: by kind, device index,
// thread count and GEMM precision; and the parsing of --device and --precision. Tests
// that exercise the CPU backend itself may call NewCpuOps directly.
#ifndef RINGSIDE_COMMON_OPS_FACTORY_H_
#define RINGSIDE_COMMON_OPS_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ops.h"

namespace ringside {

// True when this binary was built with the CUDA ops backend (--config=cuda).
bool BuiltWithCuda();

// A new backend of `kind`:
//   "cpu"   OpenBLAS; `device` must be 0; `threads` > 0 sets OpenBLAS's thread count
//           (a process-wide setting), 0 leaves the library default. Every precision
//           computes FP32.
//   "cuda"  cuBLAS and CUDA kernels on GPU `device`, one stream; `threads` is unused.
//           FailedPrecondition in a build without CUDA ("rebuild with --config=cuda")
//           or on a machine without a usable GPU (naming the reason); InvalidArgument
//           for a device index the machine does not have.
// InvalidArgument for any other kind, a negative thread count or a bad device.
absl::StatusOr<std::unique_ptr<Ops>> NewOps(absl::string_view kind, int device, int threads,
                                            GemmPrecision precision = GemmPrecision::kFp32);

// FailedPrecondition ("--device=cuda: this ringside was built without CUDA; ...") for
// a CUDA device in a build without CUDA; NewOps's own check, for callers that refuse
// before starting processes.
absl::Status CheckDeviceBuilt(DeviceKind kind);

// --device: "cpu", "cuda" or "cuda:K" (K >= 0). `index` is -1 for plain "cuda" (the
// job picks: LOCAL_RANK modulo the GPU count in a launched job, else 0). Empty = cpu.
struct DeviceSpec {
  DeviceKind kind = DeviceKind::kCpu;
  int index = -1;
};
absl::StatusOr<DeviceSpec> ParseDevice(absl::string_view text);
// The GPU a process uses: `requested_index` when >= 0 (cuda:K), else local_rank modulo
// `gpus` (one rank per GPU, round robin where ranks outnumber GPUs; pass local_rank 0
// outside a launched job), 0 when gpus < 1 (NewOps then names the missing GPU).
int CudaDeviceFor(int requested_index, int local_rank, int gpus);
// Whether the ranks of one node's job share GPUs: more of them (`local_world_size`)
// than the GPUs they are spread over (1 for cuda:K, which every rank names alike, else
// `gpus`; see CudaDeviceFor). Such ranks are time-sliced on one GPU, and NCCL must
// treat them as separate hosts (ProcessGroupOptions::nccl_host_id): an emulation.
bool RanksShareGpu(int requested_index, int local_world_size, int gpus);
// "cpu", "cuda", "cuda:K".
std::string DeviceName(const DeviceSpec& spec);

// --precision: "fp32" (also empty), "tf32", "bf16"; and back.
absl::StatusOr<GemmPrecision> ParseGemmPrecision(absl::string_view text);
const char* GemmPrecisionName(GemmPrecision precision);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_OPS_FACTORY_H_
