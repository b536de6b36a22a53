// The one place production code gets an Ops backend from: by kind ("cpu" today; "cuda"
// once its backend is built), device index and thread count. Tests that exercise the
// CPU backend itself may call NewCpuOps directly.
#ifndef RINGSIDE_COMMON_OPS_FACTORY_H_
#define RINGSIDE_COMMON_OPS_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ops.h"

namespace ringside {

// The backend every job uses until a CUDA backend is built.
inline constexpr char kDefaultOpsKind[] = "cpu";

// A new backend of `kind`:
//   "cpu"   OpenBLAS; `device` must be 0; `threads` > 0 sets OpenBLAS's thread count
//           (a process-wide setting), 0 leaves the library default.
//   "cuda"  FailedPrecondition: this build has no CUDA ops backend.
// InvalidArgument for any other kind, a negative thread count or a bad device.
absl::StatusOr<std::unique_ptr<Ops>> NewOps(absl::string_view kind, int device, int threads);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_OPS_FACTORY_H_
