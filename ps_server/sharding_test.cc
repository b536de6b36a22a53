#include "ps_server/sharding.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// Parameter counts worth trying: tiny, prime, divisible by many shard counts or by
// none, and one large enough that P * s needs 64 bits.
const std::vector<int64_t>& ParamCounts() {
  static const auto* counts =
      new std::vector<int64_t>{1, 2, 3, 7, 10, 16, 100, 1001, (1 << 20) + 3, int64_t{1} << 40};
  return *counts;
}

// Checks that the S slices of P floats tile [0, P) in order and are byte-balanced.
void ExpectBalancedTiling(int64_t num_params, int num_shards) {
  SCOPED_TRACE(absl::StrCat("P=", num_params, " S=", num_shards));
  const int64_t floor_size = num_params / num_shards;
  const int64_t ceil_size = (num_params + num_shards - 1) / num_shards;
  int64_t next = 0;
  int64_t total = 0;
  for (int s = 0; s < num_shards; ++s) {
    const Slice slice = ShardSlice(num_params, s, num_shards);
    EXPECT_EQ(slice.offset, next) << "shard " << s << " is not contiguous with shard " << s - 1;
    EXPECT_GE(slice.size, floor_size) << "shard " << s;
    EXPECT_LE(slice.size, ceil_size) << "shard " << s;
    EXPECT_GE(slice.size, 1) << "shard " << s << " is empty";
    next = slice.offset + slice.size;
    total += slice.size;
  }
  EXPECT_EQ(next, num_params);
  EXPECT_EQ(total, num_params);
}

TEST(ShardSliceTest, TilesTheParametersContiguouslyAndBalanced) {
  for (int64_t p : ParamCounts()) {
    // S = 1, every small S (divisible or not), and S = P where P is small.
    for (int s = 1; s <= 17 && s <= p; ++s) ExpectBalancedTiling(p, s);
    if (p <= 1001) ExpectBalancedTiling(p, static_cast<int>(p));
    if (p >= 65535) ExpectBalancedTiling(p, 65535);
  }
}

TEST(ShardSliceTest, OneShardOwnsEverything) {
  const Slice slice = ShardSlice(12345, 0, 1);
  EXPECT_EQ(slice.offset, 0);
  EXPECT_EQ(slice.size, 12345);
}

TEST(ShardSliceTest, OneFloatPerShardWhenShardsEqualParams) {
  for (int s = 0; s < 5; ++s) {
    const Slice slice = ShardSlice(5, s, 5);
    EXPECT_EQ(slice.offset, s);
    EXPECT_EQ(slice.size, 1);
  }
}

TEST(ShardSliceTest, MatchesTheDocumentedFormula) {
  // [floor(s*P/S), floor((s+1)*P/S)) for P = 10, S = 3: [0,3) [3,6) [6,10).
  EXPECT_EQ(ShardSlice(10, 0, 3).offset, 0);
  EXPECT_EQ(ShardSlice(10, 0, 3).size, 3);
  EXPECT_EQ(ShardSlice(10, 1, 3).offset, 3);
  EXPECT_EQ(ShardSlice(10, 1, 3).size, 3);
  EXPECT_EQ(ShardSlice(10, 2, 3).offset, 6);
  EXPECT_EQ(ShardSlice(10, 2, 3).size, 4);
}

TEST(ValidateShardingTest, AcceptsOneToNumParamsShards) {
  EXPECT_TRUE(ValidateSharding(1, 1).ok());
  EXPECT_TRUE(ValidateSharding(10, 1).ok());
  EXPECT_TRUE(ValidateSharding(10, 7).ok());
  EXPECT_TRUE(ValidateSharding(10, 10).ok());
}

TEST(ValidateShardingTest, RejectsTooFewOrTooManyShards) {
  EXPECT_EQ(ValidateSharding(10, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateSharding(10, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateSharding(10, 11).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateSharding(0, 1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChunkTest, ChunksTileASliceFromItsEnd) {
  for (int64_t size : {1, 3, 4, 5, 11, 1000, 1 << 20}) {
    for (int64_t cf : {1, 3, 4, 1024, 1 << 18}) {
      SCOPED_TRACE(absl::StrCat("size=", size, " chunk_floats=", cf));
      const int64_t n = NumChunks(size, cf);
      EXPECT_EQ(n, (size + cf - 1) / cf);
      int64_t next = 0;
      for (int64_t k = 0; k < n; ++k) {
        const Slice c = ChunkOf(size, cf, k);
        EXPECT_EQ(c.offset, next);
        EXPECT_GE(c.size, 1);
        // Every chunk but the first is full.
        if (k > 0) {
          EXPECT_EQ(c.size, cf);
        }
        EXPECT_LE(c.size, cf);
        // Each chunk is found at its start, and holds its floats.
        EXPECT_EQ(ChunkIndexAt(size, cf, c.offset), k);
        EXPECT_EQ(ChunkHolding(size, cf, c.offset), k);
        EXPECT_EQ(ChunkHolding(size, cf, c.offset + c.size - 1), k);
        if (c.size > 1) {
          EXPECT_EQ(ChunkIndexAt(size, cf, c.offset + 1), -1);
        }
        next = c.offset + c.size;
      }
      EXPECT_EQ(next, size);
      EXPECT_EQ(ChunkIndexAt(size, cf, size), -1);
      EXPECT_EQ(ChunkIndexAt(size, cf, -1), -1);
    }
  }
}

TEST(ChunkTest, ShortFirstChunk) {
  // 10 floats by 4: [0, 2), [2, 6), [6, 10).
  EXPECT_EQ(NumChunks(10, 4), 3);
  EXPECT_EQ(ChunkOf(10, 4, 0).offset, 0);
  EXPECT_EQ(ChunkOf(10, 4, 0).size, 2);
  EXPECT_EQ(ChunkOf(10, 4, 1).offset, 2);
  EXPECT_EQ(ChunkOf(10, 4, 2).offset, 6);
  EXPECT_EQ(ChunkOf(10, 4, 2).size, 4);
  EXPECT_EQ(ChunkIndexAt(10, 4, 6), 2);
  EXPECT_EQ(ChunkIndexAt(10, 4, 4), -1);
  EXPECT_EQ(ChunkIndexAt(10, 4, 8), -1);
  EXPECT_EQ(ChunkHolding(10, 4, 5), 1);
  EXPECT_EQ(NumChunks(8, 4), 2);
  EXPECT_EQ(ChunkOf(8, 4, 0).size, 4);
  EXPECT_EQ(ChunkOf(8, 4, 1).size, 4);
  EXPECT_EQ(NumChunks(3, 1024), 1);
  EXPECT_EQ(ChunkOf(3, 1024, 0).size, 3);
}

TEST(ChunkFloatsTest, AcceptsPositiveMultiplesOfFourUpTo64MiB) {
  EXPECT_EQ(*ChunkFloats(4), 1);
  EXPECT_EQ(*ChunkFloats(16), 4);
  EXPECT_EQ(*ChunkFloats(1 << 20), 1 << 18);
  EXPECT_EQ(*ChunkFloats(int64_t{64} << 20), int64_t{16} << 20);
}

TEST(ChunkFloatsTest, RejectsZeroNegativeUnalignedAndHuge) {
  for (int64_t bytes : {int64_t{0}, int64_t{-4}, int64_t{1}, int64_t{2}, int64_t{6},
                        int64_t{1023}, (int64_t{64} << 20) + 4, int64_t{128} << 20}) {
    EXPECT_EQ(ChunkFloats(bytes).status().code(), absl::StatusCode::kInvalidArgument)
        << bytes << " bytes";
  }
}

}  // namespace
}  // namespace ringside
