// Helpers shared by the process-group tests (ranks as threads and as processes):
// group options, the closed-form inputs and sums every collective is checked against,
// and test-name suffixes.
#ifndef RINGSIDE_DDP_RING_PROCESS_GROUP_TEST_UTIL_H_
#define RINGSIDE_DDP_RING_PROCESS_GROUP_TEST_UTIL_H_

#include <cmath>
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

// The largest power of two <= world: the ranks the doublings run on.
inline int PowerOfTwoRanks(int world) {
  int p2 = 1;
  while (p2 * 2 <= world) p2 *= 2;
  return p2;
}

// The payload bytes rank `rank` of the Gloo group sends and receives for an all-reduce
// of n floats run with `algorithm` (resolved: not kAuto), from each algorithm's known
// traffic:
//   ring: 2 (n - one chunk) floats, the chunks being [n c / w, n (c + 1) / w): it
//     sends all chunks but c = r + 1 in the reduce-scatter and all but r + 2 in the
//     all-gather, and receives all but r, then all but r + 1;
//   recursive doubling: lg P x n each way on ranks r < P (P the largest power of two
//     <= w), plus n each way if rank r + P exists (it folds into r); n each way on
//     ranks r >= P;
//   halving-doubling: 2 (P - 1) / P x n each way on ranks r < P when P divides n (the
//     halvings then split evenly), plus the fold-in's n; n on ranks r >= P.
// Zero for n == 0 or one rank.
inline CollectiveBytes ExpectedAllReduceBytes(AllReduceAlgorithm algorithm, int world,
                                              int rank, int64_t n) {
  if (n == 0 || world == 1) return {};
  const int64_t m = n * static_cast<int64_t>(sizeof(float));
  auto chunk = [&](int c) {
    c = (c % world + world) % world;
    return (n * (c + 1) / world - n * c / world) * static_cast<int64_t>(sizeof(float));
  };
  const int p2 = PowerOfTwoRanks(world);
  int lg = 0;
  while ((1 << lg) < p2) ++lg;
  const int64_t fold = rank < world - p2 ? m : 0;
  switch (algorithm) {
    case AllReduceAlgorithm::kRing:
      return {2 * m - chunk(rank + 1) - chunk(rank + 2), 2 * m - chunk(rank) - chunk(rank + 1)};
    case AllReduceAlgorithm::kRecursiveDoubling:
      if (rank >= p2) return {m, m};
      return {lg * m + fold, lg * m + fold};
    case AllReduceAlgorithm::kHalvingDoubling: {
      if (rank >= p2) return {m, m};
      const int64_t each = 2 * (p2 - 1) * m / p2 + fold;
      return {each, each};
    }
    case AllReduceAlgorithm::kAuto:
      break;
  }
  return {-1, -1};
}

// How many of data[0, n) differ from expected(i) (relative tolerance `tol`; 0: exact),
// and the first that does (-1: none): the tests report these, not millions of lines.
struct Mismatches {
  int64_t count = 0;
  int64_t first = -1;
};
template <typename Expected>
Mismatches CountMismatches(const float* data, int64_t n, Expected expected, float tol) {
  Mismatches m;
  for (int64_t i = 0; i < n; ++i) {
    const float want = expected(i);
    const bool ok = tol == 0 ? data[i] == want
                             : std::fabs(data[i] - want) <= tol * std::fabs(want) + 1e-6f;
    if (!ok && m.count++ == 0) m.first = i;
  }
  return m;
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
