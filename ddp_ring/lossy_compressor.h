// DDP's lossy gradient compression (--compress=topk:F|powersgd:R, issue #36), as PyTorch
// DDP's communication hooks (torch.distributed.algorithms.ddp_comm_hooks) run it: each
// bucket's gradients are reduced through a compressor instead of a plain all-reduce,
// with error feedback (what a rank's compressed gradient left out is added to its next
// gradient of the same bucket).
//
//   top-k (Aji & Heafield 2017; Stich et al. 2018, with memory): a rank adds its
//     residual to the bucket's n gradients, keeps the k = ceil(F n) largest in magnitude
//     (ties: the lower index) and all-gathers them as k values and k indices; every rank
//     sums the ranks' sparse vectors in rank order. Residual: what it did not send.
//     A rank sends (N - 1) x 2k floats through the ring all-gather. With SGD momentum m
//     and error feedback, momentum correction (Lin et al., Deep Gradient Compression,
//     ICLR 2018): the rank keeps a velocity u = m u + g and accumulates u, not g, into
//     its residual, and clears u where it sent (momentum factor masking); the optimizer
//     then steps without momentum (Reducer), since the sum already carries it. Plain
//     momentum on a sparse sum applies each value long after it was due, which cost 3
//     points of accuracy on the job.
//   PowerSGD (Vogels et al., NeurIPS 2019; PyTorch's powerSGD_hook): a weight of m x n
//     with r = min(R, m, n) and r (m + n) < m n travels as P = M Q (m x r, all-reduced,
//     then orthonormalised) and Q = M^T P (n x r, all-reduced); the bucket's result is
//     P Q^T. Q starts random (the same on every rank, orthonormalised) and is kept from
//     step to step (warm start). Biases and weights too small to gain travel whole, in
//     the first all-reduce. Residual: the rank's input less its 1 / N share of the
//     result (PyTorch's: input less the averaged result, in ringside's units where the
//     all-reduce sums gradients already scaled by 1 / N); 0 on the tensors sent whole. A rank sends 2(N-1)/N x the
//     floats of both all-reduces through the ring.
//
// Host memory only (the Gloo group, CPU ops). The compressor owns one thread that runs
// the buckets' reductions in launch order, one at a time, issuing their collectives on
// the group; while a step's buckets are in flight nothing else may issue collectives on
// that group (the reducer issues none until its FinishStep has waited for them all).
// Thread-safe: Launch may be called from one thread while the compressor's runs.
#ifndef RINGSIDE_DDP_RING_LOSSY_COMPRESSOR_H_
#define RINGSIDE_DDP_RING_LOSSY_COMPRESSOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/model.h"
#include "common/ops.h"
#include "common/run_config.h"
#include "ddp_ring/process_group.h"

namespace ringside {

// What a lossy compressor's collectives carry for one bucket, and its encode and decode
// work (the cost model's terms; LossyCompressor sizes its buffers by the same plan).
struct LossyPayload {
  int64_t gather_floats = 0;           // Top-k: a rank's 2k, all-gathered.
  int64_t reduce_floats[2] = {0, 0};   // PowerSGD: P's (and the tensors sent whole), Q's.
  int64_t select_values = 0;           // Top-k: the n values each step selects from.
  double gemm_flops = 0;               // PowerSGD: 6 m n r over its matrices (P, Q, P Q^T).
};
// The payload of `bucket` under `compression` (lossy()), `tensors` as for Create.
// InvalidArgument as Create for a tensor that straddles the bucket's edge.
absl::StatusOr<LossyPayload> LossyPayloadOf(const Compression& compression, const ParamRange& bucket,
                                            const std::vector<ParamTensor>& tensors);

// Top-k's selection: the first k entries of `order` [n] become the indices of the k
// largest |v| (ties to the lower index), in no particular order. 1 <= k <= n.
void SelectTopK(const float* v, int64_t n, int64_t k, std::vector<int64_t>* order);

class LossyCompressor {
 public:
  // `compression`: top-k or PowerSGD (lossy()); `buckets`: the reducer's (flat gradient
  // ranges); `tensors`: the model's (Model::Tensors), each inside one bucket; `seed`:
  // PowerSGD's first Q (every rank must pass the same); `momentum`: top-k's momentum
  // correction (SGD's momentum, 0: none; used with error feedback only). The group is
  // borrowed and must outlive this. InvalidArgument for a method that is not lossy, a
  // momentum outside [0, 1), or a tensor that straddles buckets.
  static absl::StatusOr<std::unique_ptr<LossyCompressor>> Create(const Compression& compression,
                                                                 ProcessGroup* group,
                                                                 const std::vector<ParamRange>& buckets,
                                                                 const std::vector<ParamTensor>& tensors,
                                                                 uint64_t seed, float momentum = 0.0f);
  // Whether top-k corrects momentum itself: the optimizer must then step without it.
  bool corrects_momentum() const { return momentum_ > 0; }
  // Waits for the reductions queued, then ends the thread.
  ~LossyCompressor();
  LossyCompressor(const LossyCompressor&) = delete;
  LossyCompressor& operator=(const LossyCompressor&) = delete;

  // Queues bucket b's reduction of `data` [its size] (host memory, in place: the sum
  // over ranks of their compressed gradients, as an all-reduce's sum would be) and
  // returns at once. Every rank launches the same buckets in the same order. `data`
  // stays untouched by the caller until the Work is done. The Work's bytes are those of
  // the bucket's collectives; it fails with the first failed collective's error.
  std::shared_ptr<Work> Launch(size_t b, float* data);

  // The floats rank's collectives for bucket b carry, by the formulas above: top-k's
  // 2k (all-gathered: a rank sends N - 1 times that); PowerSGD's two all-reduces'
  // sum(r (m + n)) plus the floats sent whole (a ring rank sends 2(N-1)/N of that).
  int64_t PayloadFloats(size_t b) const;

 private:
  // A weight PowerSGD compresses, or a range a bucket sends whole: offsets in the bucket.
  struct Matrix {
    int64_t offset = 0, rows = 0, cols = 0, rank = 0;
    int64_t p_offset = 0, q_offset = 0;  // Its P in p_, its Q in q_ (floats).
  };
  struct BucketState {
    ParamRange range;
    std::vector<float> residual;  // [size] error feedback (empty without it).
    std::vector<float> acc;       // [size] gradient + residual.
    // Top-k.
    int64_t k = 0;
    std::vector<float> velocity;  // [size] momentum correction's u (empty without it).
    std::vector<int64_t> order;  // [size] index scratch for the selection.
    std::vector<float> sent, gathered;  // [2k], [N x 2k].
    // PowerSGD.
    std::vector<Matrix> matrices;
    std::vector<ParamRange> whole;  // Sent uncompressed, after the Ps in p_.
    int64_t whole_floats = 0;
    std::vector<float> p, q;  // [sum m r + whole_floats], [sum n r]: q is the warm start.
  };

  LossyCompressor(const Compression& compression, ProcessGroup* group, std::unique_ptr<Ops> ops, float momentum);
  void Loop();
  // Bucket b's reduction on the compressor's thread; adds its collectives' bytes.
  absl::Status Reduce(size_t b, float* data, CollectiveBytes* bytes);
  absl::Status TopK(BucketState& s, float* data, CollectiveBytes* bytes);
  absl::Status PowerSgd(BucketState& s, float* data, CollectiveBytes* bytes);

  const Compression compression_;
  ProcessGroup* const group_;
  const float momentum_;  // Top-k's momentum correction; 0: none.
  std::unique_ptr<Ops> ops_;  // CPU: the compressor thread's GEMMs.
  std::vector<BucketState> buckets_;  // Touched by the compressor's thread only.

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last member: starts after the state above exists.
};

// Orthonormalises the columns of `a` [rows x cols] (row-major) in place by Gram-Schmidt,
// as PyTorch's PowerSGD does: each column divided by its norm + 1e-8, then taken out of
// the later ones. Exposed for tests.
void OrthonormalizeColumns(float* a, int64_t rows, int64_t cols);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_LOSSY_COMPRESSOR_H_
