// `ringside explain ps`: one BSP step of ringside's parameter server (ps_server/,
// ps_worker/) with N workers and S shards, as data: push, aggregate, update, pull, and
// the bytes through each node; and the check against a real run's shard metrics.
//
// What it mirrors:
//   slicing: shard s owns floats [floor(s P / S), floor((s + 1) P / S)) of the P flat
//     parameters (PsPartition's balanced cut, common/ps_placement.h), streamed as
//     chunks of the slice's chunk grid (NumChunks / ChunkOf, --ps_chunk_kb);
//   the wire: every chunk is one ps.Chunk message (ps.proto) written by WireChunk
//     (ps_server/wire_chunk.cc): the tags and varints of worker_id, step, kind, offset
//     and the payload's length, then the payload, 4 bytes per float;
//   counting: a shard's metrics record of step t counts, in, the gradient chunks of
//     step t from every worker (kind GRADIENTS, step t) and, out, the parameter chunks
//     it sends back (kind PARAMS, step t + 1) (ps_server/shard.cc Accept, CountServed).
#ifndef RINGSIDE_EXPERIMENTS_EXPLAIN_PS_EXPLAINER_H_
#define RINGSIDE_EXPERIMENTS_EXPLAIN_PS_EXPLAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ps_server/ps.pb.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/explain/frames.h"

namespace ringside {

struct PsExplainOptions {
  std::string model;  // A model spec (common/model.h), e.g. "mlp:784-256-256-10".
  int workers = 1;    // N >= 1.
  int shards = 1;     // S, 1 <= S <= the model's parameter count.
  int64_t chunk_bytes = int64_t{1} << 20;  // The tensor streams' chunk size (--ps_chunk_kb).
};

// The floats in `model`, built as the trainer builds it for 1x28x28 inputs and 10
// classes (Fashion-MNIST's shape and the synthetic dataset's default). InvalidArgument
// for a bad spec.
absl::StatusOr<int64_t> ModelParamCount(const std::string& model);

// The serialized size of one ps.Chunk as the PS's codec writes it
// (WireChunk::EncodedBytes, ps_server/wire_chunk.h): 1-byte tags, the varints of
// worker_id, step, kind, offset (floats, relative to the slice) and the payload length,
// the payload, and on a push (GRADIENTS, worker to shard) the 8-byte session with its
// tag; a pull (PARAMS, shard to worker) carries no session.
int64_t ChunkWireBytes(int worker, int64_t step, ps::TensorKind kind, int64_t offset,
                       int64_t payload_bytes);

// One shard's part of a step.
struct PsShardPart {
  int shard = 0;
  int64_t offset = 0;  // First float of its slice.
  int64_t floats = 0;  // Slice size.
  int64_t chunks = 0;  // Messages per worker per direction.
  // Per step, summed over the N workers: payload only (N x 4 x floats) and as counted
  // on the wire (payload + framing) for step `step` of PsExplanation.
  int64_t payload_in = 0;
  int64_t payload_out = 0;
  int64_t wire_in = 0;
  int64_t wire_out = 0;
};

struct PsExplanation {
  PsExplainOptions options;
  int64_t num_params = 0;
  int64_t chunk_floats = 0;
  int64_t step = 0;                 // The step the wire counts are for.
  std::vector<PsShardPart> shards;  // [S].
  std::vector<int64_t> worker_out;  // [N]: wire bytes each worker pushes per step.
  std::vector<int64_t> worker_in;   // [N]: wire bytes each worker pulls per step.
  int64_t master_in = 0;            // Sum over shards of wire_in ("the master").
  int64_t master_out = 0;
};

// The step `step` (0-based; only the varints of the framing depend on it) of a BSP run
// with `options`. InvalidArgument for a bad model, workers < 1, shards < 1 or more
// shards than floats, or a chunk size ps_server refuses.
absl::StatusOr<PsExplanation> ExplainPs(const PsExplainOptions& options, int64_t step = 0);

// The explanation as text: the slicing, the four phases of the step with their bytes,
// the bytes through each node, and one line that names the bottleneck.
std::string FormatPsExplanation(const PsExplanation& explanation);

// The frames of FILE.svg / FILE.html: push, aggregate, update, pull; workers in a row
// under the shards, arrows with the bytes they carry.
std::vector<Frame> PsFrames(const PsExplanation& explanation);

// What a real run's shard s counted in its metrics record of one step.
struct PsMeasuredStep {
  int shard = 0;
  int64_t step = 0;
  int64_t bytes_received = 0;
  int64_t bytes_sent = 0;
};

// Runs `binary` (a ringside) as `train --strategy=ps --ps_sync=bsp` with the options'
// workers, shards, model and chunk size for `steps` steps at `batch` on a small
// synthetic dataset, into a fresh temporary directory (removed afterwards), and reads
// every record of DIR/metrics.shard<s>.jsonl. Blocks; the run is killed past
// `timeout_s`. An error quotes the end of the run's output.
absl::StatusOr<std::vector<PsMeasuredStep>> RunPsJob(const std::string& binary,
                                                     const PsExplainOptions& options, int steps,
                                                     int batch, int timeout_s);

// Compares each measured record with ExplainPs's prediction for its shard and step:
// a table "shard s step t: predicted in/out, measured in/out" in *report, and OK when
// every measured count is within `tolerance` (relative) of the prediction and every
// shard reported steps 0 .. steps - 1 once; otherwise FailedPrecondition naming the
// first offending record.
absl::Status ComparePsBytes(const PsExplainOptions& options, int steps,
                            const std::vector<PsMeasuredStep>& measured, double tolerance,
                            std::string* report);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_EXPLAIN_PS_EXPLAINER_H_
