#include "common/ops_factory.h"

#include "absl/strings/str_cat.h"
#include "common/cpu_ops.h"

namespace ringside {

absl::StatusOr<std::unique_ptr<Ops>> NewOps(absl::string_view kind, int device, int threads) {
  if (threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--threads must be >= 0, got ", threads));
  }
  if (kind == "cpu") {
    if (device != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the cpu ops backend has one device (0), asked for ", device));
    }
    return NewCpuOps(threads);
  }
  if (kind == "cuda") {
    return absl::FailedPreconditionError(
        "the cuda ops backend is not part of this build (train on cpu)");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ops backend '", kind, "' (expected cpu or cuda)"));
}

}  // namespace ringside
