// Checkpoints: one file holding a header (model spec, step, position in the data,
// checksum, the run's configuration), the flat parameters and the optimizer state.
//
// File layout (little-endian):
//   "RINGCKPT" | uint32 version (2) | uint32 header bytes | CheckpointHeader proto |
//   float32 params [num_params] | float32 optimizer state [num_optimizer_state]
// The optimizer state is Sgd's carried momentum term (common/sgd.h).
#ifndef RINGSIDE_COMMON_CHECKPOINT_H_
#define RINGSIDE_COMMON_CHECKPOINT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/ringside.pb.h"

namespace ringside {

struct Checkpoint {
  CheckpointHeader header;
  std::vector<float> params;
  std::vector<float> optimizer_state;
};

// Writes atomically: a temporary file in the same directory is written, flushed to
// disk and renamed over `path`, so a crash never leaves a torn checkpoint. Fills in
// the header's sizes and checksum.
absl::Status WriteCheckpoint(const std::string& path, CheckpointHeader header,
                             absl::Span<const float> params,
                             absl::Span<const float> optimizer_state);

// NotFound if missing; DataLoss if truncated, of a foreign format or failing its
// checksum.
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_CHECKPOINT_H_
