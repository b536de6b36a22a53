// ringside's collective algorithms, one per file as in Gloo's own tree, each a function
// of (rank, world size, buffers, transfer) over the byte-counting Transfer
// (transfer.h): no queue, no threads, no error naming. The Gloo process group
// (gloo_process_group.cc) runs them on its worker thread and turns their errors into
// its own. Buffer shapes are those of ProcessGroup (process_group.h); every function
// needs world_size > 1 unless it says otherwise, and n > 0.
//
//   allreduce_ring.cc                 pipelined ring (ring_schedule.h)
//   allreduce_ring_compressed.cc      the same ring, 2-byte values on the wire
//   allreduce_halving_doubling.cc     Rabenseifner, over the direct pairs
//   allreduce_recursive_doubling.cc   lg P swaps, over the direct pairs
//   doubling_steps.cc                 the doublings' fold-in, fold-out and exchange
//   reduce_scatter_ring.cc, allgather_ring.cc
//   broadcast_binomial.cc, reduce_binomial.cc
//   scatter_gather_flat.cc, alltoall_pairwise.cc
#ifndef RINGSIDE_DDP_RING_COLLECTIVE_ALGORITHMS_H_
#define RINGSIDE_DDP_RING_COLLECTIVE_ALGORITHMS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/wire_format.h"
#include "ddp_ring/transfer.h"

namespace ringside {

// Where an algorithm runs: this rank among world_size, the collective's tag (the same
// on every rank: the n-th collective of a group carries tag n), the transfer and a
// scratch vector the algorithm may grow (kept between collectives, so that steady
// state allocates nothing), and one of 2-byte codes for the compressed ring. Borrowed;
// one collective at a time.
struct CollectiveContext {
  int rank = 0;
  int world_size = 1;
  uint32_t tag = 0;
  Transfer* transfer = nullptr;
  std::vector<float>* scratch = nullptr;
  std::vector<uint16_t>* wire_scratch = nullptr;
};

// Slot prefixes of the algorithms on posted transfers. Gloo's built-in collectives use
// prefixes 0x01..0x08 (gloo/types.h); any other value keeps the slots apart.
inline constexpr uint8_t kReduceScatterSlotPrefix = 0x52;
inline constexpr uint8_t kRingReduceSlotPrefix = 0x53;
inline constexpr uint8_t kRingGatherSlotPrefix = 0x54;
inline constexpr uint8_t kBroadcastSlotPrefix = 0x55;
inline constexpr uint8_t kAllGatherSlotPrefix = 0x56;
inline constexpr uint8_t kReduceSlotPrefix = 0x57;
inline constexpr uint8_t kScatterSlotPrefix = 0x58;
inline constexpr uint8_t kGatherSlotPrefix = 0x59;
inline constexpr uint8_t kAllToAllSlotPrefix = 0x5a;

// data [n] = sum over ranks, in place: the ring of ring_schedule.h (RingSchedule::
// Pipelined), with `lag` transfers still in flight while the oldest is waited for and
// added: post transfer t, then complete transfer t - lag, so that sending, receiving
// and adding overlap. Matching is FIFO per peer and slot, so the oldest completion on a
// buffer is the oldest post. Received running sums land in scratch, one slot per
// transfer in flight, and are added into `data`; the all-gather receives straight into
// `data`. Each rank sends and receives about 2 (w - 1) / w x n floats.
absl::Status RingAllReduce(const CollectiveContext& c, float* data, int64_t n);

// data [n] = sum over ranks, in place, on RingAllReduce's schedule with every value on
// the wire in `format` (--compress=fp16|bf16; kFp32 runs RingAllReduce): a rank encodes
// its running sum just before sending it, decodes what it receives and adds it in
// float32; the all-gather moves each chunk's final sum as encoded once by the rank that
// completed it, and every rank ends with the decoded codes, so all ranks end
// bit-identical. Chunk c's result is thus dec(enc(x[c + w - 1] + dec(enc(... +
// dec(enc(x[c])))))). Each rank sends and receives about 2 (w - 1) / w x n values of 2
// bytes: half of RingAllReduce's bytes. A partial sum beyond fp16's range (65504) turns
// into +-inf (the non-finite checks see it). Needs c.wire_scratch.
absl::Status CompressedRingAllReduce(const CollectiveContext& c, float* data, int64_t n, WireFormat format);

// data [n] = sum over ranks, in place, over the direct pairs (Transfer::Exchange):
// fold-in; then in round k = 0 .. lg P - 1 rank r < P (P the largest power of two <=
// world) swaps its running sum with rank r ^ 2^k and adds the partner's; then
// fold-out. Each rank < P sends and receives n floats per round (plus n each way for a
// rank with a folded partner; a folded rank sends and receives n once). Both sides of
// a swap add the same two values, so every rank ends bit-identical.
absl::Status RecursiveDoublingAllReduce(const CollectiveContext& c, float* data, int64_t n);

// data [n] = sum over ranks, in place, over the direct pairs (Rabenseifner): fold-in;
// then among ranks r < P a reduce-scatter by recursive halving (round k, mask
// P / 2^(k+1): rank r keeps one half of its current range, the lower one if
// r & mask == 0, sends the other half to r ^ mask and adds the partner's copy of the
// kept half), after which rank r holds the full sum of a 1/P slice; then an all-gather
// by recursive doubling that retraces the halvings (send the range held, receive the
// partner's half, straight into `data`); then fold-out. A rank < P sends and receives
// about 2 (P - 1) / P x n floats (plus n each way for a folded partner). Each slice's
// sum is computed on one rank, so all ranks end bit-identical.
absl::Status HalvingDoublingAllReduce(const CollectiveContext& c, float* data, int64_t n);

// out [n] = sum over ranks of in [rank n, (rank + 1) n), with in [world n]: the ring's
// reduce-scatter phase (RingStepChunksOf) with chunk ownership shifted by one rank, so
// that rank r ends with chunk r. Running sums alternate between two accumulators in
// scratch-free local vectors; step 0 sends straight from `in`. Each rank sends and
// receives (w - 1) n floats. World size 1: a copy.
absl::Status RingReduceScatter(const CollectiveContext& c, const float* in, float* out,
                               int64_t n);

// out [world n], whose slice `rank` is already filled: the ring's all-gather phase with
// chunk ownership shifted by one rank (rank r sends slice r - s, receives slice
// r - s - 1 in step s). Each rank sends and receives (w - 1) n floats.
absl::Status RingAllGather(const CollectiveContext& c, float* out, int64_t n);

// data [n] = root's data [n] by a binomial tree: with v = (rank - root) mod w, in round
// k = 0, 1, ... ranks v < 2^k send to v + 2^k and ranks 2^k <= v < 2^(k+1) receive from
// v - 2^k. A rank receives the vector once (the root never) and sends it once per child.
absl::Status BinomialBroadcast(const CollectiveContext& c, float* data, int64_t n, int root);

// Root's data [n] = sum over ranks, the broadcast's tree run backwards: for k from the
// last round down to 0, ranks v < 2^k receive the partial sum of v + 2^k and add it, and
// ranks 2^k <= v < 2^(k+1) send theirs to v - 2^k. The root sums into `data`; other
// ranks with children sum into a copy, so that their `data` stays untouched.
absl::Status BinomialReduce(const CollectiveContext& c, float* data, int64_t n, int root);

// Flat scatter (Gloo's scatter's pattern): the root sends slice r of in [world n] to
// each rank r != root, all at once, and copies its own into out [n]; the others receive
// theirs into `out`. World size 1: a copy.
absl::Status FlatScatter(const CollectiveContext& c, const float* in, float* out, int64_t n,
                         int root);

// Flat gather, FlatScatter reversed: the root receives slice r of out [world n] from
// each rank r at once and copies its own in [n]. World size 1: a copy.
absl::Status FlatGather(const CollectiveContext& c, const float* in, float* out, int64_t n,
                        int root);

// Pairwise all-to-all (Gloo's alltoall's pattern): every rank posts, for i = 1 .. w - 1,
// the receive of slice rank - i of out from rank - i and the send of slice rank + i of
// in to rank + i (staggered, so that no rank is everybody's first peer), copies its own
// slice, then waits for all of them. World size 1: a copy.
absl::Status PairwiseAllToAll(const CollectiveContext& c, const float* in, float* out,
                              int64_t n);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_COLLECTIVE_ALGORITHMS_H_
