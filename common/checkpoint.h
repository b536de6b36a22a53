// Checkpoints: one file holding a header (model spec, step, position in the data, the
// run's configuration), the flat parameters and the optimizer state, closed by a
// checksum over all of it; and the set of them a run keeps in its output directory.
//
// File layout, format version 3 (integers little-endian):
//
//   offset 0   "RINGCKPT"                       8 bytes, magic
//          8   uint32 version (3)
//         12   uint32 H, header bytes           0 < H <= 1 MiB
//         16   CheckpointHeader proto           H bytes
//     16 + H   float32 params [num_params]      from the header
//              float32 optimizer state [num_optimizer_state]
//    size - 4  uint32 zlib crc32 of bytes [0, size - 4)
//
// So size == 20 + H + 4 * (num_params + num_optimizer_state) exactly. The checksum
// covers the magic, version, header and both blobs: one changed byte anywhere (a step,
// a position in the data, a parameter) refuses the file. The optimizer state is Sgd's
// carried momentum term (common/sgd.h). Version 2 files (whose checksum covered the
// blobs only) and version 1 are refused, naming the version.
//
// Files in a run's output directory (OUT): OUT/checkpoint.bin is always the newest;
// with keep K > 1 the K - 1 checkpoints before it stay as OUT/checkpoint.<step>.bin
// (hard links of the files that were checkpoint.bin). A resume reads the newest one
// that is intact (ReadNewestCheckpoint).
#ifndef RINGSIDE_COMMON_CHECKPOINT_H_
#define RINGSIDE_COMMON_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/ringside.pb.h"

namespace ringside {

// The newest checkpoint's file name in a run's output directory.
inline constexpr char kCheckpointFile[] = "checkpoint.bin";

struct Checkpoint {
  CheckpointHeader header;
  std::vector<float> params;
  std::vector<float> optimizer_state;
};

// Writes atomically: a temporary file in the same directory is written, flushed to
// disk and renamed over `path`, so a crash never leaves a torn checkpoint. Fills in
// the header's sizes.
absl::Status WriteCheckpoint(const std::string& path, CheckpointHeader header,
                             absl::Span<const float> params,
                             absl::Span<const float> optimizer_state);

// Parses a whole checkpoint file held in `bytes` (the reader behind ReadCheckpoint;
// safe on any input: every length and count is checked against the bytes before
// anything is allocated or read). `name` names the file in errors. DataLoss, one line
// "checkpoint NAME ...", for a foreign format, another version, a length or count that
// does not match the bytes, a header that does not parse, or a failed checksum.
absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view bytes,
                                           absl::string_view name = "(buffer)");

// Reads and parses the file at `path` as ParseCheckpoint does, without holding it in
// memory twice. NotFound if missing; FailedPrecondition if not a regular file;
// PermissionDenied if unreadable; DataLoss as ParseCheckpoint.
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path);

// OUT/checkpoint.bin, and OUT/checkpoint.<step>.bin (an older checkpoint kept).
std::string CheckpointPath(const std::string& dir);
std::string KeptCheckpointPath(const std::string& dir, int64_t step);

// Writes a checkpoint as OUT/checkpoint.bin (atomically, as WriteCheckpoint) keeping
// `keep` >= 1 checkpoints in all: when the checkpoint.bin it replaces holds an earlier
// step, that file is kept as OUT/checkpoint.<its step>.bin (a hard link, no copy); then
// every checkpoint.<s>.bin with s >= header.step() (left from an abandoned future, after
// a fallback) and all but the keep - 1 newest others are removed. A kill at any point
// leaves checkpoint.bin intact (the old or the new one). Not for concurrent writers of
// one directory.
absl::Status WriteCheckpointKeeping(const std::string& dir, int keep, CheckpointHeader header,
                                    absl::Span<const float> params,
                                    absl::Span<const float> optimizer_state);

// The checkpoint a resume continues from, with where it came from.
struct NewestCheckpoint {
  Checkpoint checkpoint;
  std::string path;
  // Empty when `path` is the newest file; else one line naming each newer file that
  // could not be used and why, and the file used (for the caller to print once).
  std::string warning;
};

// The newest intact checkpoint in `dir`: checkpoint.bin, else the kept ones from the
// highest step down. NotFound when there is none at all; when every one is unusable,
// the newest one's error (with how many older ones failed too).
absl::StatusOr<NewestCheckpoint> ReadNewestCheckpoint(const std::string& dir);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_CHECKPOINT_H_
