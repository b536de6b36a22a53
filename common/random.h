// Deterministic, platform-independent random numbers. std::*_distribution differ
// between standard libraries, so every seeded draw in ringside goes through these.
#ifndef RINGSIDE_COMMON_RANDOM_H_
#define RINGSIDE_COMMON_RANDOM_H_

#include <cmath>
#include <cstdint>

namespace ringside {

// SplitMix64 finaliser: a bijective mix of a 64-bit value. Also a counter-based
// generator: Mix64(seed ^ f(index)) gives independent values per index.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A small sequential generator (SplitMix64). Not thread-safe; cheap to copy.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 random bits (exact in float).
  float UniformFloat() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [lo, hi).
  float Uniform(float lo, float hi) { return lo + (hi - lo) * UniformFloat(); }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias < n / 2^64).
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  // Standard normal (Box-Muller, one value per call).
  float Normal() {
    double u1 = (static_cast<double>(Next() >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(6.283185307179586 * u2));
  }

 private:
  uint64_t state_;
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_RANDOM_H_
