#include "ps_server/sharding.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringside {

absl::Status ValidateSharding(int64_t num_params, int num_shards) {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--ps_shards must be >= 1, got ", num_shards));
  }
  if (num_shards > num_params) {
    return absl::InvalidArgumentError(absl::StrCat("--ps_shards=", num_shards, " exceeds the model's ",
                                                   num_params, " parameters"));
  }
  return absl::OkStatus();
}

int64_t NumChunks(int64_t size, int64_t chunk_floats) {
  return (size + chunk_floats - 1) / chunk_floats;
}

namespace {

// Size of chunk 0, the short one: in (0, chunk_floats] for size >= 1.
int64_t FirstChunkSize(int64_t size, int64_t chunk_floats) {
  return size - (NumChunks(size, chunk_floats) - 1) * chunk_floats;
}

}  // namespace

Slice ChunkOf(int64_t size, int64_t chunk_floats, int64_t k) {
  const int64_t r = FirstChunkSize(size, chunk_floats);
  if (k == 0) return Slice{0, r};
  return Slice{r + (k - 1) * chunk_floats, chunk_floats};
}

int64_t ChunkIndexAt(int64_t size, int64_t chunk_floats, int64_t offset) {
  if (offset < 0 || offset >= size) return -1;
  if (offset == 0) return 0;
  const int64_t from_r = offset - FirstChunkSize(size, chunk_floats);
  if (from_r < 0 || from_r % chunk_floats != 0) return -1;
  return from_r / chunk_floats + 1;
}

int64_t ChunkHolding(int64_t size, int64_t chunk_floats, int64_t offset) {
  const int64_t from_r = offset - FirstChunkSize(size, chunk_floats);
  return from_r < 0 ? 0 : from_r / chunk_floats + 1;
}

absl::StatusOr<int64_t> ChunkFloats(int64_t chunk_bytes) {
  if (chunk_bytes < 4 || chunk_bytes % 4 != 0 || chunk_bytes > (int64_t{64} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk size must be a positive multiple of 4 bytes up to 64 MiB, got ", chunk_bytes));
  }
  return chunk_bytes / 4;
}

}  // namespace ringside
