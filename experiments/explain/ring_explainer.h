// `ringside explain ring`: the ring all-reduce of ringside's Gloo backend
// (ddp_ring/allreduce_ring.cc), step by step, as data, and the check that the real
// backend computes the same floats.
//
// The explanation runs the backend's own schedule (ddp_ring/ring_schedule.h,
// RingSchedule::Unsegmented: the chunks, and which chunk each rank sends and receives
// in each step), so the two cannot drift apart. The backend cuts each chunk into
// segments and pipelines them (RingSchedule::Pipelined), but each float still gets the
// same additions in the same order (segment k of a transfer covers the same floats of
// the same chunk on both ends, and the transfer that forwards a running sum is
// completed after the one that produced it), so the sums are bit-identical: the sum of
// chunk c is x[c + w - 1] + (... + (x[c + 1] + x[c])), ranks taken modulo w.
#ifndef RINGSIDE_EXPERIMENTS_EXPLAIN_RING_EXPLAINER_H_
#define RINGSIDE_EXPERIMENTS_EXPLAIN_RING_EXPLAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ddp_ring/ring_schedule.h"  // RingChunk, RingChunkOf, RingPhase.
#include "experiments/explain/frames.h"

namespace ringside {

// What one rank did in one step.
struct RingRankStep {
  int rank = 0;
  RingChunk sent;                      // To rank + 1.
  std::vector<float> sent_values;      // sent.count floats.
  RingChunk received;                  // From rank - 1.
  std::vector<float> received_values;  // received.count floats.
  // The rank's copy of the received chunk before and after the step: reduce-scatter
  // new = old + received (element-wise, in float); all-gather new = received.
  std::vector<float> old_values;
  std::vector<float> new_values;
};

struct RingStep {
  RingPhase phase = RingPhase::kReduceScatter;
  int step = 0;                             // Within the phase: 0 .. world - 2.
  std::vector<RingRankStep> ranks;          // [world], by rank.
  std::vector<std::vector<float>> buffers;  // [world][n]: every rank's vector after it.
};

// The whole all-reduce (sum) of `inputs` on a ring.
struct RingExplanation {
  int world = 0;
  int64_t elements = 0;
  std::vector<std::vector<float>> inputs;  // [world][elements].
  std::vector<RingStep> steps;             // 2 (world - 1): reduce-scatter, then all-gather.
  std::vector<std::vector<float>> result;  // [world][elements]: after the last step.
  // Per rank: chunks and floats handed to the right neighbour and taken from the left
  // one, over both phases (chunks counts the empty ones too; the backend skips those).
  std::vector<int64_t> chunks_sent;
  std::vector<int64_t> floats_sent;
  std::vector<int64_t> floats_received;
};

// How `explain ring` fills the ranks' vectors.
enum class RingValues {
  // Small integers, rank r element i = 10 r + i: every sum is exact and easy to follow.
  kReadable,
  // Random floats of magnitudes 2^-8 .. 2^8 of both signs, drawn from `seed`: float
  // addition is not associative on them, so a different summation order than the
  // backend's would show in the bits.
  kRandom,
};

// inputs [world][n]. world >= 1, n >= 0.
std::vector<std::vector<float>> RingInputs(int world, int64_t n, RingValues values, uint64_t seed);

// The ring all-reduce of `inputs` (non-empty, all of one length), step by step.
RingExplanation ExplainRing(const std::vector<std::vector<float>>& inputs);

// Each rank's vector after the real Gloo ring all-reduce of `inputs`, and what its
// Work::bytes() counted.
struct RingBackendRun {
  std::vector<std::vector<float>> buffers;  // [world][n].
  std::vector<int64_t> bytes_sent;          // [world].
  std::vector<int64_t> bytes_received;      // [world].
};

// Runs the all-reduce (sum, AllReduceAlgorithm::kRing) of `inputs` on inputs.size()
// Gloo ranks, threads of this process over loopback (ddp_ring/local_ranks.h). Blocks;
// bounded by `timeout_s` per collective. The backend's errors, prefixed.
absl::StatusOr<RingBackendRun> RunGlooRing(const std::vector<std::vector<float>>& inputs,
                                           int timeout_s = 60);

// OK when every rank's buffer of `run` equals `explanation.result` bit for bit and the
// backend counted 4 x the explanation's floats sent and received on every rank;
// otherwise Internal naming the first differing rank and element (or byte count).
absl::Status CompareWithBackend(const RingExplanation& explanation, const RingBackendRun& run);

// The explanation as text, for a terminal: the chunks, each step (who sends which
// chunk with which values, old + received = new), every buffer after each step, the
// traffic. Chunks longer than a few values are shown cut ("... 117 more").
std::string FormatRingExplanation(const RingExplanation& explanation);

// The frames of FILE.svg / FILE.html: the start, then one per step, ranks as boxes on
// a circle with an arrow per send labelled with the chunk.
std::vector<Frame> RingFrames(const RingExplanation& explanation);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_EXPLAIN_RING_EXPLAINER_H_
