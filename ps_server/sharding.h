// How the flat parameters are split over parameter-server shards, how a shard's slice
// is cut into stream chunks. Shared by servers and workers. (The consistency modes:
// consistency_policy.h.)
#ifndef RINGSIDE_PS_SERVER_SHARDING_H_
#define RINGSIDE_PS_SERVER_SHARDING_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ringside {

// A contiguous range of the flat float parameters.
struct Slice {
  int64_t offset = 0;
  int64_t size = 0;
};

// InvalidArgument unless 1 <= num_shards <= num_params.
absl::Status ValidateSharding(int64_t num_params, int num_shards);

// The chunk grid of a slice of `size` floats cut into pieces of `chunk_floats`,
// aligned on the slice's END: with K = NumChunks chunks and r = size - (K - 1) *
// chunk_floats (0 < r <= chunk_floats), chunk 0 is [0, r) and chunk k >= 1 is
// [r + (k - 1) * chunk_floats, r + k * chunk_floats), relative to the slice.
// Why the end: backward produces gradients from the end of the flat vector towards
// its start, so the chunks that become ready while backward still runs are full and
// the short chunk is the one pushed last, whose round trip nothing overlaps.
int64_t NumChunks(int64_t size, int64_t chunk_floats);
Slice ChunkOf(int64_t size, int64_t chunk_floats, int64_t k);
// The index of the chunk that starts at `offset`, or -1 when no chunk starts there
// (off the grid, or outside [0, size)).
int64_t ChunkIndexAt(int64_t size, int64_t chunk_floats, int64_t offset);
// The index of the chunk that holds float `offset` (0 <= offset < size).
int64_t ChunkHolding(int64_t size, int64_t chunk_floats, int64_t offset);

// Floats per chunk for a chunk size in bytes. InvalidArgument unless the size is a
// positive multiple of 4 no larger than 64 MiB (under gRPC's receive cap set by both
// ends).
absl::StatusOr<int64_t> ChunkFloats(int64_t chunk_bytes);

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_SHARDING_H_
