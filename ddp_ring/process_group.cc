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

absl::StatusOr<AllReduceAlgorithm> ParseAllReduceAlgorithm(absl::string_view name) {
  for (AllReduceAlgorithm a :
       {AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kRing,
        AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kRecursiveDoubling}) {
    if (name == AllReduceAlgorithmName(a)) return a;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--allreduce must be auto, ring, halving-doubling or recursive-doubling, got '", name,
      "'"));
}

const char* AllReduceAlgorithmName(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kAuto: return "auto";
    case AllReduceAlgorithm::kRing: return "ring";
    case AllReduceAlgorithm::kHalvingDoubling: return "halving-doubling";
    case AllReduceAlgorithm::kRecursiveDoubling: return "recursive-doubling";
  }
  return "?";
}

AllReduceAlgorithm ResolveAllReduceAlgorithm(AllReduceAlgorithm algorithm, int world_size) {
  if (algorithm != AllReduceAlgorithm::kAuto) return algorithm;
  return world_size == 2 ? AllReduceAlgorithm::kRecursiveDoubling : AllReduceAlgorithm::kRing;
}

}  // namespace ringside
