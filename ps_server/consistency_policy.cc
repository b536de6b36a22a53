#include "ps_server/consistency_policy.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside {

absl::StatusOr<SyncPolicy> ParseSyncPolicy(const std::string& text) {
  SyncPolicy p;
  if (text == "bsp") return p;
  if (text == "asp") {
    p.mode = SyncMode::kAsp;
    return p;
  }
  if (absl::StartsWith(text, "ssp:") && absl::SimpleAtoi(text.substr(4), &p.staleness) &&
      p.staleness >= 0) {
    p.mode = SyncMode::kSsp;
    return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--ps_sync must be bsp, ssp:K (K >= 0) or asp, got '", text, "'"));
}

std::string SyncModeName(SyncMode mode) {
  switch (mode) {
    case SyncMode::kBsp: return "bsp";
    case SyncMode::kSsp: return "ssp";
    case SyncMode::kAsp: return "asp";
  }
  return "?";
}

std::string SyncPolicyText(const SyncPolicy& p) {
  if (p.mode == SyncMode::kSsp) return absl::StrCat("ssp:", p.staleness);
  return SyncModeName(p.mode);
}

namespace {

// The workers w with progress[w] < need, ascending.
std::vector<int> Below(absl::Span<const int64_t> progress, int64_t need) {
  std::vector<int> late;
  for (size_t w = 0; w < progress.size(); ++w) {
    if (progress[w] < need) late.push_back(static_cast<int>(w));
  }
  return late;
}

std::string Names(absl::Span<const int> workers) {
  return workers.empty() ? "?" : absl::StrJoin(workers, ", ");
}

// BSP: a step's pushes of a chunk are summed; the N-th steps SGD on the sum and moves
// the chunk to the next step, which releases it to every worker.
class BspPolicy final : public ConsistencyPolicy {
 public:
  BspPolicy(const SyncPolicy& sync, int num_workers) : ConsistencyPolicy(sync, num_workers) {}

  bool sums_pushes() const override { return num_workers() > 1; }

  absl::StatusOr<PushAction> Push(int worker, int64_t step, int64_t chunk,
                                  ChunkClock* clock) const override {
    if (step != clock->version) {
      return absl::FailedPreconditionError(absl::StrCat("worker ", worker, " pushed step ", step,
                                                        " but chunk ", chunk, " is at step ",
                                                        clock->version));
    }
    PushAction action;
    if (num_workers() == 1) {
      // One worker: its push is the whole sum, stepped at once without a copy.
      ++clock->version;
      return action;
    }
    action.sum = true;
    action.first = clock->summed == 0;
    if (++clock->summed >= clock->participants) {
      action.complete = true;
      clock->summed = 0;
      ++clock->version;
    }
    return action;
  }

  bool CompleteIfDue(ChunkClock* clock) const override {
    if (num_workers() == 1 || clock->summed == 0 || clock->summed < clock->participants) {
      return false;
    }
    clock->summed = 0;
    ++clock->version;
    return true;
  }

  int64_t StepsNeeded(int64_t) const override { return kNoNeed; }

  ChunkRelease ReleaseOf(const ChunkClock& clock, int64_t step) const override {
    if (clock.version < step) return ChunkRelease::kWait;
    return clock.version == step ? ChunkRelease::kNow : ChunkRelease::kStale;
  }

  bool replies_borrow() const override { return true; }

  // Those who have not pushed this chunk of step - 1.
  std::vector<int> LateWorkers(int64_t step, absl::Span<const int64_t>,
                               const ChunkClock& clock) const override {
    std::vector<int64_t> pushed_steps(clock.pushed.size());
    for (size_t w = 0; w < pushed_steps.size(); ++w) pushed_steps[w] = clock.pushed[w] + 1;
    return Below(pushed_steps, step);
  }
};

// SSP(K) and ASP: each push is its own update.
class StepEachPush : public ConsistencyPolicy {
 public:
  StepEachPush(const SyncPolicy& sync, int num_workers) : ConsistencyPolicy(sync, num_workers) {}

  bool sums_pushes() const override { return false; }

  absl::StatusOr<PushAction> Push(int, int64_t, int64_t, ChunkClock*) const override {
    PushAction action;
    action.scale = static_cast<float>(num_workers());  // Undo the workers' 1/N.
    return action;
  }

  ChunkRelease ReleaseOf(const ChunkClock&, int64_t) const override { return ChunkRelease::kNow; }

  // Other workers' pushes may update the chunk while a reply is on its way.
  bool replies_borrow() const override { return false; }
};

// SSP(K): a pull of step s waits until every worker has pushed s - K whole steps.
class SspPolicy final : public StepEachPush {
 public:
  using StepEachPush::StepEachPush;  // Public, as StepEachPush's.

  int64_t StepsNeeded(int64_t step) const override { return step - sync().staleness; }

  // Those more than K steps behind `step`.
  std::vector<int> LateWorkers(int64_t step, absl::Span<const int64_t> clocks,
                               const ChunkClock&) const override {
    return Below(clocks, StepsNeeded(step));
  }

  std::string LateReason(int worker, int64_t, absl::Span<const int> late,
                         absl::Duration waited) const override {
    return absl::StrCat("worker(s) ", Names(late), " stayed more than ", sync().staleness,
                        " steps behind worker ", worker, " for ", absl::FormatDuration(waited));
  }
};

// ASP: SSP with an infinite bound; a pull never waits for another worker.
class AspPolicy final : public StepEachPush {
 public:
  using StepEachPush::StepEachPush;  // Public, as StepEachPush's.

  int64_t StepsNeeded(int64_t) const override { return kNoNeed; }

  // Nobody holds an ASP pull back; should one wait anyway, those who have not pushed
  // step - 1.
  std::vector<int> LateWorkers(int64_t step, absl::Span<const int64_t> clocks,
                               const ChunkClock&) const override {
    return Below(clocks, step);
  }
};

}  // namespace

std::unique_ptr<ConsistencyPolicy> ConsistencyPolicy::Create(const SyncPolicy& sync,
                                                             int num_workers) {
  switch (sync.mode) {
    case SyncMode::kBsp:
      return std::unique_ptr<ConsistencyPolicy>(new BspPolicy(sync, num_workers));
    case SyncMode::kSsp:
      return std::unique_ptr<ConsistencyPolicy>(new SspPolicy(sync, num_workers));
    case SyncMode::kAsp:
      break;
  }
  return std::unique_ptr<ConsistencyPolicy>(new AspPolicy(sync, num_workers));
}

absl::StatusOr<PushAction> ConsistencyPolicy::OnPush(int worker, int64_t step, int64_t chunk,
                                                     ChunkClock* clock) const {
  if (clock->pushed[worker] == step) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker, " pushed chunk ", chunk,
                                                      " of step ", step, " twice"));
  }
  absl::StatusOr<PushAction> action = Push(worker, step, chunk, clock);
  if (action.ok()) clock->pushed[worker] = step;
  return action;
}

std::string ConsistencyPolicy::LateReason(int, int64_t step, absl::Span<const int> late,
                                          absl::Duration waited) const {
  return absl::StrCat("worker(s) ", Names(late), " did not push step ", step - 1, " within ",
                      absl::FormatDuration(waited));
}

}  // namespace ringside
