// Launch geometry shared by the .cu files of common/kernels/ (device code only).
#ifndef RINGSIDE_COMMON_KERNELS_LAUNCH_CUH_
#define RINGSIDE_COMMON_KERNELS_LAUNCH_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace ringside {
namespace kernels {

constexpr int kThreads = 256;
// Grid-stride loops cover any n with at most this many blocks.
constexpr int64_t kMaxBlocks = 1 << 20;

inline unsigned BlocksFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

// for (i = this thread's first index; i < n; i += all threads)
#define RINGSIDE_GRID_STRIDE(i, n)                                              \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

}  // namespace kernels
}  // namespace ringside

#endif  // RINGSIDE_COMMON_KERNELS_LAUNCH_CUH_
