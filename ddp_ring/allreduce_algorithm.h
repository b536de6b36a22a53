// The all-reduce algorithms of the Gloo process group and their flag spellings. Its own
// light library so that spec validation (experiments/matrix/spec.cc) and the cost model can check a
// name without linking Gloo.
#ifndef RINGSIDE_DDP_RING_ALLREDUCE_ALGORITHM_H_
#define RINGSIDE_DDP_RING_ALLREDUCE_ALGORITHM_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside {

enum class AllReduceAlgorithm {
  kAuto,               // By world size and message size: see ResolveAllReduceAlgorithm.
  kRing,               // Bandwidth-optimal ring: reduce-scatter, then all-gather.
  kHalvingDoubling,    // Recursive halving-doubling (Rabenseifner).
  kRecursiveDoubling,  // lg N rounds, each swapping the whole vector with one peer.
};

// The flag spellings: "auto", "ring", "halving-doubling", "recursive-doubling".
// InvalidArgument naming the valid ones for anything else.
absl::StatusOr<AllReduceAlgorithm> ParseAllReduceAlgorithm(absl::string_view name);
const char* AllReduceAlgorithmName(AllReduceAlgorithm algorithm);

// Messages below this size run recursive doubling under kAuto at any world size.
inline constexpr int64_t kAutoRecursiveDoublingBelowBytes = int64_t{4} << 20;

// What kAuto runs for a message of `bytes` on `world_size` ranks (any other algorithm:
// itself): recursive doubling at two ranks, where it sends and receives n floats per
// rank, as the ring does, but in one exchange instead of a reduce-scatter followed by
// an all-gather; at more ranks recursive doubling below
// kAutoRecursiveDoublingBelowBytes (lg N exchanges instead of the ring's 2 (N - 1)
// dependent steps) and the ring from there (2 (N - 1) / N x bytes per rank instead of
// lg N x bytes). The crossover was measured at 4 ranks (docs/benchmarks.md).
AllReduceAlgorithm ResolveAllReduceAlgorithm(AllReduceAlgorithm algorithm, int world_size,
                                             int64_t bytes);

// Whether `algorithm` may run recursive doubling on `world_size` ranks for some size.
bool MayRunRecursiveDoubling(AllReduceAlgorithm algorithm, int world_size);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_ALLREDUCE_ALGORITHM_H_
