#include "ddp_ring/lossy_compressor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/ops_factory.h"
#include "common/random.h"
#include "common/status_macros.h"
#include "common/trace.h"

namespace ringside {
namespace {

// PyTorch's PowerSGD epsilon (_orthogonalize_gram_schmidt): keeps a zero column finite.
constexpr float kOrthoEpsilon = 1e-8f;

// A bucket's reduction, done on the compressor's thread.
class LossyWork final : public Work {
 public:
  absl::Status Wait() override {
    done_.WaitForNotification();
    return status_;
  }
  bool IsCompleted() override { return done_.HasBeenNotified(); }
  int64_t start_us() const override { return start_us_; }
  int64_t end_us() const override { return end_us_; }
  CollectiveBytes bytes() const override { return bytes_; }

  // The compressor's thread: records the result, then wakes the waiters.
  void Finish(absl::Status status, CollectiveBytes bytes, int64_t start_us) {
    status_ = std::move(status);
    bytes_ = bytes;
    start_us_ = start_us;
    end_us_ = NowMicros();
    done_.Notify();
  }

 private:
  absl::Notification done_;
  // Written before done_ is notified, read after: the notification orders them.
  absl::Status status_;
  CollectiveBytes bytes_;
  int64_t start_us_ = 0, end_us_ = 0;
};

// Runs one collective to completion, adding its bytes.
absl::Status RunCollective(const std::shared_ptr<Work>& work, CollectiveBytes* bytes) {
  absl::Status s = work->Wait();
  *bytes += work->bytes();
  return s;
}

// A bucket's plan: top-k's k, or PowerSGD's matrices (offsets in the bucket, rank r) and
// the ranges it sends whole.
struct BucketPlan {
  int64_t k = 0;
  struct Matrix {
    int64_t offset = 0, rows = 0, cols = 0, rank = 0;
  };
  std::vector<Matrix> matrices;
  std::vector<ParamRange> whole;
  int64_t whole_floats = 0;
};

absl::StatusOr<BucketPlan> PlanBucket(const Compression& compression, const ParamRange& range,
                                      const std::vector<ParamTensor>& tensors) {
  BucketPlan plan;
  if (compression.method == Compression::Method::kTopK) {
    plan.k = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(compression.topk_fraction * range.size)), 1,
                                 std::max<int64_t>(1, range.size));
    return plan;
  }
  for (const ParamTensor& t : tensors) {
    const int64_t lo = t.range.offset, hi = t.range.offset + t.range.size;
    if (hi <= range.offset || lo >= range.offset + range.size) continue;
    if (lo < range.offset || hi > range.offset + range.size) {
      return absl::InvalidArgumentError(absl::StrCat("lossy compressor: tensor at ", lo, " (", t.range.size,
                                                     " floats) straddles a bucket's edge"));
    }
    const int64_t rows = t.rows, cols = rows > 0 ? t.range.size / rows : 0;
    const int64_t r = std::min<int64_t>({compression.powersgd_rank, rows, cols});
    if (rows > 0 && r * (rows + cols) < rows * cols) {
      plan.matrices.push_back({lo - range.offset, rows, cols, r});
    } else {
      plan.whole.push_back({lo - range.offset, t.range.size});
      plan.whole_floats += t.range.size;
    }
  }
  return plan;
}

}  // namespace

absl::StatusOr<LossyPayload> LossyPayloadOf(const Compression& compression, const ParamRange& bucket,
                                            const std::vector<ParamTensor>& tensors) {
  if (!compression.lossy()) return absl::InvalidArgumentError("lossy compressor: not top-k or PowerSGD");
  RINGSIDE_ASSIGN_OR_RETURN(const BucketPlan plan, PlanBucket(compression, bucket, tensors));
  LossyPayload out;
  if (compression.method == Compression::Method::kTopK) {
    out.gather_floats = 2 * plan.k;
    out.select_values = bucket.size;
    return out;
  }
  out.reduce_floats[0] = plan.whole_floats;
  for (const BucketPlan::Matrix& m : plan.matrices) {
    out.reduce_floats[0] += m.rows * m.rank;
    out.reduce_floats[1] += m.cols * m.rank;
    out.gemm_flops += 6.0 * m.rows * m.cols * m.rank;
  }
  return out;
}

void SelectTopK(const float* v, int64_t n, int64_t k, std::vector<int64_t>* order) {
  order->resize(n);
  std::iota(order->begin(), order->end(), int64_t{0});
  std::nth_element(order->begin(), order->begin() + (k - 1), order->end(), [v](int64_t a, int64_t b) {
    const float fa = std::fabs(v[a]), fb = std::fabs(v[b]);
    return fa > fb || (fa == fb && a < b);
  });
}

void OrthonormalizeColumns(float* a, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < cols; ++i) {
    double norm = 0;
    for (int64_t r = 0; r < rows; ++r) norm += double{a[r * cols + i]} * a[r * cols + i];
    const float scale = 1.0f / (static_cast<float>(std::sqrt(norm)) + kOrthoEpsilon);
    for (int64_t r = 0; r < rows; ++r) a[r * cols + i] *= scale;
    for (int64_t j = i + 1; j < cols; ++j) {
      double dot = 0;
      for (int64_t r = 0; r < rows; ++r) dot += double{a[r * cols + i]} * a[r * cols + j];
      for (int64_t r = 0; r < rows; ++r) a[r * cols + j] -= static_cast<float>(dot) * a[r * cols + i];
    }
  }
}

absl::StatusOr<std::unique_ptr<LossyCompressor>> LossyCompressor::Create(const Compression& compression,
                                                                         ProcessGroup* group,
                                                                         const std::vector<ParamRange>& buckets,
                                                                         const std::vector<ParamTensor>& tensors,
                                                                         uint64_t seed, float momentum) {
  if (!compression.lossy()) return absl::InvalidArgumentError("lossy compressor: not top-k or PowerSGD");
  if (!(momentum >= 0 && momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("lossy compressor: momentum ", momentum, " outside [0, 1)"));
  }
  const bool correct = compression.method == Compression::Method::kTopK && compression.error_feedback;
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 1));
  std::unique_ptr<LossyCompressor> c(
      new LossyCompressor(compression, group, std::move(ops), correct ? momentum : 0.0f));
  const int64_t world = group->world_size();
  for (const ParamRange& range : buckets) {
    BucketState s;
    s.range = range;
    s.acc.resize(range.size);
    if (compression.error_feedback) s.residual.assign(range.size, 0.0f);
    RINGSIDE_ASSIGN_OR_RETURN(const BucketPlan plan, PlanBucket(compression, range, tensors));
    if (compression.method == Compression::Method::kTopK) {
      s.k = plan.k;
      s.order.resize(range.size);
      if (c->momentum_ > 0) s.velocity.assign(range.size, 0.0f);
      s.sent.resize(2 * s.k);
      s.gathered.resize(world * 2 * s.k);
    } else {
      int64_t p_floats = 0, q_floats = 0;
      for (const BucketPlan::Matrix& m : plan.matrices) {
        s.matrices.push_back({m.offset, m.rows, m.cols, m.rank, p_floats, q_floats});
        p_floats += m.rows * m.rank;
        q_floats += m.cols * m.rank;
      }
      s.whole = plan.whole;
      s.whole_floats = plan.whole_floats;
      s.p.resize(p_floats + s.whole_floats);
      s.q.resize(q_floats);
      // Q's first value: normal draws from the seed and the tensor's place, the same on
      // every rank, orthonormalised (PyTorch's powerSGD_hook on its first step).
      for (const Matrix& m : s.matrices) {
        Rng rng(Mix64(seed ^ Mix64(static_cast<uint64_t>(range.offset + m.offset))));
        float* q = s.q.data() + m.q_offset;
        for (int64_t i = 0; i < m.cols * m.rank; ++i) q[i] = rng.Normal();
        OrthonormalizeColumns(q, m.cols, m.rank);
      }
    }
    c->buckets_.push_back(std::move(s));
  }
  return c;
}

// Its own FIFO thread rather than common/task_thread.h's TaskThread: that holds one task
// at a time, and a step launches every bucket before waiting for the first.
LossyCompressor::LossyCompressor(const Compression& compression, ProcessGroup* group, std::unique_ptr<Ops> ops,
                                 float momentum)
    : compression_(compression),
      group_(group),
      momentum_(momentum),
      ops_(std::move(ops)),
      thread_([this]() { Loop(); }) {}

LossyCompressor::~LossyCompressor() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void LossyCompressor::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](LossyCompressor* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) { return c->stop_ || !c->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // Stopped, and nothing left to run.
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

std::shared_ptr<Work> LossyCompressor::Launch(size_t b, float* data) {
  auto work = std::make_shared<LossyWork>();
  absl::MutexLock l(&mu_);
  queue_.push_back([this, b, data, work]() {
    const int64_t start = NowMicros();
    CollectiveBytes bytes;
    absl::Status s = b < buckets_.size() ? Reduce(b, data, &bytes)
                                         : absl::InvalidArgumentError(absl::StrCat("no bucket ", b));
    work->Finish(std::move(s), bytes, start);
  });
  return work;
}

int64_t LossyCompressor::PayloadFloats(size_t b) const {
  const BucketState& s = buckets_.at(b);
  if (compression_.method == Compression::Method::kTopK) return 2 * s.k;
  return static_cast<int64_t>(s.p.size() + s.q.size());
}

absl::Status LossyCompressor::Reduce(size_t b, float* data, CollectiveBytes* bytes) {
  BucketState& s = buckets_[b];
  const int64_t n = s.range.size;
  // Error feedback: this step's gradient (top-k with momentum correction: its velocity)
  // plus what the last ones left out.
  if (!s.velocity.empty()) {
    for (int64_t i = 0; i < n; ++i) {
      s.velocity[i] = momentum_ * s.velocity[i] + data[i];
      s.acc[i] = s.velocity[i] + s.residual[i];
    }
  } else if (s.residual.empty()) {
    std::copy(data, data + n, s.acc.begin());
  } else {
    for (int64_t i = 0; i < n; ++i) s.acc[i] = data[i] + s.residual[i];
  }
  return compression_.method == Compression::Method::kTopK ? TopK(s, data, bytes) : PowerSgd(s, data, bytes);
}

absl::Status LossyCompressor::TopK(BucketState& s, float* data, CollectiveBytes* bytes) {
  const int64_t n = s.range.size, k = s.k;
  // The k largest |acc|, ties to the lower index, so every run picks the same ones.
  const std::vector<float>& acc = s.acc;
  SelectTopK(acc.data(), n, k, &s.order);
  // Sent: k values, then their k indices as the float with the index's bits (the
  // all-gather only moves them).
  for (int64_t j = 0; j < k; ++j) {
    const int64_t i = s.order[j];
    s.sent[j] = acc[i];
    const uint32_t index = static_cast<uint32_t>(i);
    std::memcpy(&s.sent[k + j], &index, sizeof(index));
  }
  if (!s.residual.empty()) {
    std::copy(acc.begin(), acc.end(), s.residual.begin());
    for (int64_t j = 0; j < k; ++j) s.residual[s.order[j]] = 0.0f;
  }
  // Momentum factor masking: a value sent leaves no velocity behind.
  if (!s.velocity.empty()) {
    for (int64_t j = 0; j < k; ++j) s.velocity[s.order[j]] = 0.0f;
  }
  RINGSIDE_RETURN_IF_ERROR(RunCollective(group_->AllGather(s.sent.data(), 2 * k, s.gathered.data()), bytes));
  // Every rank sums the same sparse vectors in rank order: identical results.
  std::fill(data, data + n, 0.0f);
  for (int r = 0; r < group_->world_size(); ++r) {
    const float* values = s.gathered.data() + int64_t{r} * 2 * k;
    for (int64_t j = 0; j < k; ++j) {
      uint32_t index = 0;
      std::memcpy(&index, &values[k + j], sizeof(index));
      if (index >= static_cast<uint64_t>(n)) {
        return absl::InternalError(
            absl::StrCat("top-k: rank ", r, " sent index ", index, " outside its bucket of ", n, " gradients"));
      }
      data[index] += values[j];
    }
  }
  return absl::OkStatus();
}

absl::Status LossyCompressor::PowerSgd(BucketState& s, float* data, CollectiveBytes* bytes) {
  const int64_t n = s.range.size;
  const float* acc = s.acc.data();
  // 1. P = M Q per matrix (Q: the last step's, or the first one's), and the tensors sent
  // whole after the Ps; one all-reduce sums them over the ranks.
  for (const Matrix& m : s.matrices) {
    ops_->Gemm(false, false, m.rows, m.rank, m.cols, 1.0f, acc + m.offset, s.q.data() + m.q_offset, 0.0f,
               s.p.data() + m.p_offset);
  }
  float* whole = s.p.data() + (s.p.size() - s.whole_floats);
  for (const ParamRange& w : s.whole) {
    std::copy(acc + w.offset, acc + w.offset + w.size, whole);
    whole += w.size;
  }
  RINGSIDE_RETURN_IF_ERROR(
      RunCollective(group_->AllReduce(s.p.data(), static_cast<int64_t>(s.p.size()), ReduceOp::kSum), bytes));
  // 2. Orthonormalise each P, then Q = M^T P; a second all-reduce sums the Qs.
  for (const Matrix& m : s.matrices) {
    OrthonormalizeColumns(s.p.data() + m.p_offset, m.rows, m.rank);
    ops_->Gemm(true, false, m.cols, m.rank, m.rows, 1.0f, acc + m.offset, s.p.data() + m.p_offset, 0.0f,
               s.q.data() + m.q_offset);
  }
  if (!s.q.empty()) {
    RINGSIDE_RETURN_IF_ERROR(
        RunCollective(group_->AllReduce(s.q.data(), static_cast<int64_t>(s.q.size()), ReduceOp::kSum), bytes));
  }
  // 3. The result: P Q^T per matrix, the sums of the tensors sent whole. Q stays for the
  // next step (warm start).
  for (const Matrix& m : s.matrices) {
    ops_->Gemm(false, true, m.rows, m.cols, m.rank, 1.0f, s.p.data() + m.p_offset, s.q.data() + m.q_offset, 0.0f,
               data + m.offset);
  }
  const float* summed = s.p.data() + (s.p.size() - s.whole_floats);
  for (const ParamRange& w : s.whole) {
    std::copy(summed, summed + w.size, data + w.offset);
    summed += w.size;
  }
  // Error feedback: the rank's input less its share of the result. The tensors sent
  // whole lost nothing: their residual is 0 (PyTorch keeps input less the average there
  // too, which sums to 0 over the ranks but wanders on each).
  if (!s.residual.empty()) {
    const float share = 1.0f / static_cast<float>(group_->world_size());
    for (int64_t i = 0; i < n; ++i) s.residual[i] = acc[i] - share * data[i];
    for (const ParamRange& w : s.whole) std::fill_n(s.residual.begin() + w.offset, w.size, 0.0f);
  }
  return absl::OkStatus();
}

}  // namespace ringside
