#include "ddp_ring/process_group.h"

#include "absl/strings/str_cat.h"

namespace ringside {

absl::Status ValidateProcessGroupOptions(const Store* store, const ProcessGroupOptions& options) {
  const int rank = options.rank;
  if (store == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": null store"));
  }
  if (options.world_size < 1 || rank < 0 || rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, ": invalid rank/world size (world size ", options.world_size, ")"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": the timeout must be positive"));
  }
  return absl::OkStatus();
}

}  // namespace ringside
