#include "ddp_ring/allreduce_algorithm.h"

#include "absl/strings/str_cat.h"

namespace ringside {

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

AllReduceAlgorithm ResolveAllReduceAlgorithm(AllReduceAlgorithm algorithm, int world_size,
                                             int64_t bytes) {
  if (algorithm != AllReduceAlgorithm::kAuto) return algorithm;
  if (world_size == 2 || bytes < kAutoRecursiveDoublingBelowBytes) {
    return AllReduceAlgorithm::kRecursiveDoubling;
  }
  return AllReduceAlgorithm::kRing;
}

bool MayRunRecursiveDoubling(AllReduceAlgorithm algorithm, int world_size) {
  return world_size > 1 && (algorithm == AllReduceAlgorithm::kAuto ||
                            algorithm == AllReduceAlgorithm::kRecursiveDoubling);
}

}  // namespace ringside
