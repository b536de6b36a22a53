#include "ps_server/shard_chunk.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "common/ops_factory.h"
#include "common/status_macros.h"
#include "ps_server/membership.h"

namespace ringside {

absl::StatusOr<std::unique_ptr<ShardChunk>> ShardChunk::Create(int64_t index, Slice range,
                                                                float* params, int num_workers,
                                                                const SgdHyper& hyper, bool sums,
                                                                bool summation) {
  // The shard's slice lives in host memory: its ops are always the CPU backend.
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 0));
  std::unique_ptr<ShardChunk> c(
      new ShardChunk(index, range, params, num_workers, std::move(ops), sums, summation));
  absl::MutexLock l(&c->mu_);
  RINGSIDE_ASSIGN_OR_RETURN(Sgd sgd, Sgd::Create(hyper, range.size, c->ops_.get()));
  c->sgd_.emplace(std::move(sgd));
  return c;
}

ShardChunk::ShardChunk(int64_t index, Slice range, float* params, int num_workers,
                       std::unique_ptr<Ops> ops, bool sums, bool summation)
    : index_(index),
      range_(range),
      params_(params),
      summation_(summation),
      ops_(std::move(ops)),
      clock_(num_workers, 0),
      from_(num_workers, kFromStart) {
  if (sums) sum_.emplace(num_workers, range.size, ops_.get());
}

int64_t ShardChunk::version() const {
  absl::MutexLock l(&mu_);
  return clock_.version;
}

absl::Status ShardChunk::LoadState(const float* data) {
  absl::MutexLock l(&mu_);
  return sgd_->LoadStateRange(0, absl::MakeConstSpan(data, range_.size));
}

void ShardChunk::LoadParams(const float* data) {
  absl::MutexLock l(&mu_);  // Readers of the chunk hold only its lock.
  std::memcpy(params_, data, range_.size * sizeof(float));
}

void ShardChunk::Start(int64_t step) {
  absl::MutexLock l(&mu_);
  clock_.version = step;
}

bool ShardChunk::CountsIn(int u, int64_t step) const {
  return from_[u] <= step || clock_.pushed[u] == step;
}

absl::StatusOr<ShardChunk::PushSpans> ShardChunk::Push(const ConsistencyPolicy& policy, int w,
                                                       int64_t step, OrderedSum::Blocks blocks) {
  absl::MutexLock l(&mu_);
  if (from_[w] > step) {
    // Elastic PS: dropped after the shard's check (a push racing its loss).
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", w, " was dropped from the job (lost); push refused"));
  }
  RINGSIDE_ASSIGN_OR_RETURN(const PushAction action, policy.OnPush(w, step, index_, &clock_));
  // Each block is stepped or summed where it belongs. SGD is element-wise, so stepping
  // block by block equals stepping the chunk at once.
  PushSpans spans;
  const int64_t t = absl::ToUnixMicros(absl::Now());
  if (!action.sum) {
    // The push is the update.
    blocks([&](int64_t at, float* block, int64_t len) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (action.scale != 1.0f) ops_->Scale(block, len, action.scale);
      if (summation_) {
        std::memcpy(params_ + at, block, len * sizeof(float));  // One worker's sum.
      } else {
        sgd_->StepRange(at, len, params_ + at, block);
      }
    });
    spans.update = {t, absl::ToUnixMicros(absl::Now())};
    return spans;
  }
  // In worker-id order (OrderedSum): the same sum every run.
  AdvanceSum(step, /*complete=*/false);  // Past workers that do not count.
  sum_->Add(w, blocks);
  // The workers parked behind w follow, in order, up to the next gap; the push that
  // completes the step (every worker that counts is in) steps SGD.
  spans.update = AdvanceSum(step, action.complete);
  spans.aggregate = {t, spans.update.end_us > spans.update.start_us
                            ? spans.update.start_us
                            : absl::ToUnixMicros(absl::Now())};
  return spans;
}

TraceInterval ShardChunk::AdvanceSum(int64_t step, bool complete) {
  if (!sum_.has_value()) return {};  // The policy does not sum (nor complete steps).
  sum_->Advance([&](int u) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return CountsIn(u, step); });
  if (!complete) return {};
  const int64_t t = absl::ToUnixMicros(absl::Now());
  if (summation_) {
    // A summation server serves the mean; every worker steps SGD with it.
    std::memcpy(params_, sum_->TakeMean(), range_.size * sizeof(float));
  } else {
    sgd_->StepRange(0, range_.size, params_, sum_->TakeMean());
  }
  CountParticipants();
  return {t, absl::ToUnixMicros(absl::Now())};
}

void ShardChunk::CountParticipants() {
  int count = 0;
  for (size_t u = 0; u < from_.size(); ++u) {
    if (CountsIn(static_cast<int>(u), clock_.version)) ++count;
  }
  clock_.participants = count;
}

absl::StatusOr<bool> ShardChunk::Serve(const ConsistencyPolicy& policy, const Pull& pull,
                                       const FillFn& fill) {
  absl::MutexLock l(&mu_);
  const int64_t pushed = clock_.pushed[pull.worker];
  if (pull.kind == ps::PARAMS && pull.step > pull.start_step && pushed < pull.step - 1) {
    // Nobody may make a worker's pull wait for a step it cannot be about to run (it
    // would time out and abort the job, blaming the others): refused at once.
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", pull.worker, " asked for the parameters of step ", pull.step, " (chunk ",
        index_, "), but has pushed that chunk only ",
        pushed < 0 ? std::string("for no step") : absl::StrCat("through step ", pushed)));
  }
  if (pull.behind) return false;
  if (pull.kind == ps::PARAMS) {
    switch (policy.ReleaseOf(clock_, pull.step)) {
      case ChunkRelease::kNow:
        break;
      case ChunkRelease::kWait:
        return false;
      case ChunkRelease::kStale:
        return absl::FailedPreconditionError(absl::StrCat("worker ", pull.worker, " asked for step ",
                                                          pull.step, " of chunk ", index_,
                                                          ", which is at step ", clock_.version));
    }
  }
  if (pull.kind == ps::OPTIMIZER_STATE) {
    std::vector<float> state(range_.size);
    RINGSIDE_RETURN_IF_ERROR(sgd_->SaveStateRange(0, absl::MakeSpan(state)));
    fill(state.data(), range_);
  } else {
    fill(params_, range_);
  }
  return true;
}

void ShardChunk::AwaitRelease(const ConsistencyPolicy& policy, int64_t step,
                              const std::atomic<bool>& aborted, absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto released = [this, &policy, &aborted, step]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return policy.ReleaseOf(clock_, step) != ChunkRelease::kWait || aborted.load();
  };
  mu_.AwaitWithTimeout(absl::Condition(&released), timeout);
}

std::vector<int> ShardChunk::LateWorkers(const ConsistencyPolicy& policy, int64_t step,
                                         const std::vector<int64_t>& clocks,
                                         const std::vector<bool>& lost) {
  absl::MutexLock l(&mu_);
  std::vector<int> late;
  for (int u : policy.LateWorkers(step, clocks, clock_)) {
    if (!lost[u] && from_[u] <= step - 1) late.push_back(u);
  }
  return late;
}

void ShardChunk::Drop(const ConsistencyPolicy& policy, const std::vector<int>& workers) {
  absl::MutexLock l(&mu_);
  bool fewer = false;
  for (int w : workers) {
    if (from_[w] <= clock_.version && clock_.pushed[w] != clock_.version) fewer = true;
    from_[w] = kNever;
  }
  if (!fewer) return;
  const int64_t step = clock_.version;
  CountParticipants();
  const bool complete = policy.CompleteIfDue(&clock_);
  AdvanceSum(step, complete);
}

void ShardChunk::RejoinLocked(const ConsistencyPolicy& policy, int w, int64_t step, bool moving) {
  if (moving && from_[w] <= clock_.version) {
    // No longer counted in the step it was to rejoin at.
    const int64_t at = clock_.version;
    from_[w] = kNever;
    CountParticipants();
    AdvanceSum(at, policy.CompleteIfDue(&clock_));
  }
  from_[w] = step;
  CountParticipants();
}

ChunkSetLock::ChunkSetLock(const std::vector<std::unique_ptr<ShardChunk>>& chunks) {
  held_.reserve(chunks.size());
  for (const auto& c : chunks) held_.push_back(std::make_unique<absl::MutexLock>(&c->mu_));
}

ChunkSetLock::~ChunkSetLock() {
  held_.clear();
}

}  // namespace ringside
