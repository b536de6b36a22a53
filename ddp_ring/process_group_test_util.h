// Helpers shared by the process-group tests (ranks as threads and as processes):
// group options, the closed-form inputs and sums every collective is checked against,
// and test-name suffixes.
#ifndef RINGSIDE_DDP_RING_PROCESS_GROUP_TEST_UTIL_H_
#define RINGSIDE_DDP_RING_PROCESS_GROUP_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "ddp_ring/process_group.h"

namespace ringside {
namespace testing_util {

inline ProcessGroupOptions Options(int rank, int world, AllReduceAlgorithm algorithm,
                                   absl::Duration timeout) {
  ProcessGroupOptions options;
  options.rank = rank;
  options.world_size = world;
  options.algorithm = algorithm;
  options.timeout = timeout;
  options.hostname = "127.0.0.1";
  return options;
}

// Rank r's i-th input, multiples of 1/4: sums over a few ranks are exact in float.
inline float Value(int rank, int64_t i) {
  return static_cast<float>(rank + 1) + static_cast<float>(i % 1024) * 0.25f;
}

// Closed form of the sum over `world` ranks of Value(r, i).
inline float SumOfValues(int world, int64_t i) {
  return 0.5f * world * (world + 1) + world * (static_cast<float>(i % 1024) * 0.25f);
}

inline std::string AlgorithmName(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kAuto: return "Auto";
    case AllReduceAlgorithm::kRing: return "Ring";
    case AllReduceAlgorithm::kHalvingDoubling: return "HalvingDoubling";
    case AllReduceAlgorithm::kRecursiveDoubling: return "RecursiveDoubling";
  }
  return "Unknown";
}

}  // namespace testing_util
}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_PROCESS_GROUP_TEST_UTIL_H_
