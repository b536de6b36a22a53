// The all-reduce algorithms of the Gloo process group and their flag spellings. Its own
// light library so that spec validation (experiments/compare_command.cc) can check a
// name without linking Gloo.
#ifndef RINGSIDE_DDP_RING_ALLREDUCE_ALGORITHM_H_
#define RINGSIDE_DDP_RING_ALLREDUCE_ALGORITHM_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside {

enum class AllReduceAlgorithm {
  kAuto,               // Recursive doubling for 2 ranks, the ring otherwise.
  kRing,               // Bandwidth-optimal ring: reduce-scatter, then all-gather.
  kHalvingDoubling,    // Recursive halving-doubling (Rabenseifner).
  kRecursiveDoubling,  // lg N rounds, each swapping the whole vector with one peer.
};

// The flag spellings: "auto", "ring", "halving-doubling", "recursive-doubling".
// InvalidArgument naming the valid ones for anything else.
absl::StatusOr<AllReduceAlgorithm> ParseAllReduceAlgorithm(absl::string_view name);
const char* AllReduceAlgorithmName(AllReduceAlgorithm algorithm);

// What kAuto runs on `world_size` ranks (any other algorithm: itself). At two ranks
// recursive doubling sends and receives n floats per rank, as the ring does, but in
// one exchange instead of a reduce-scatter followed by an all-gather.
AllReduceAlgorithm ResolveAllReduceAlgorithm(AllReduceAlgorithm algorithm, int world_size);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_ALLREDUCE_ALGORITHM_H_
