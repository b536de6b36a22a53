#include "ps_server/sharding.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

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
