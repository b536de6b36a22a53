#include "experiments/cli/build_kind.h"

#include "absl/strings/str_format.h"

#if RINGSIDE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ringside {

std::string BuildKind() {
#if RINGSIDE_CUDA
  return absl::StrFormat("CUDA %d.%d", CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
#else
  return "CPU";
#endif
}

}  // namespace ringside
