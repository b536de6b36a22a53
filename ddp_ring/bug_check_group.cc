#include "ddp_ring/bug_check_group.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringside {
namespace {

// Fingerprint floats per rank: sum |p| and sum p^2, each as a float pair (hi, lo)
// that keeps a double's precision through the float all-gather.
constexpr int kPrint = 4;
// Replicas whose fingerprints differ relatively by more than this differ (identical
// replicas give bitwise equal sums; different initialisations differ by ~1e-3).
constexpr double kReplicaTolerance = 1e-5;

void Split(double v, float* out) {
  out[0] = static_cast<float>(v);
  out[1] = static_cast<float>(v - static_cast<double>(out[0]));
}

// no_broadcast's skipped broadcast: done at once, nothing moved.
class DoneWork final : public Work {
 public:
  absl::Status Wait() override { return absl::OkStatus(); }
  bool IsCompleted() override { return true; }
};

}  // namespace

// AroundSteps' strategy: the Reducer's calls, forwarded, with the step and epoch checks
// around FinishStep and ReduceEval.
class BugCheckGroup::Steps final : public StepStrategy {
 public:
  Steps(BugCheckGroup* checks, StepStrategy* inner) : checks_(checks), inner_(inner) {}

  std::string role() const override { return inner_->role(); }
  absl::Status Start(int64_t step) override { return inner_->Start(step); }
  absl::Status Finish() override { return inner_->Finish(); }
  StepHooks hooks() override { return inner_->hooks(); }
  absl::Status SettleParams() override { return inner_->SettleParams(); }
  absl::StatusOr<std::vector<float>> SaveOptimizerState() override {
    return inner_->SaveOptimizerState();
  }
  absl::Status LoadOptimizerState(absl::Span<const float> state) override {
    return inner_->LoadOptimizerState(state);
  }
  absl::Status AfterCheckpoint() override { return inner_->AfterCheckpoint(); }

  absl::Status FinishStep(const HookTimes& hook_times, StepMetrics* m,
                          TraceWriter* trace) override {
    const int64_t t0 = NowMicros();
    absl::Status s = inner_->FinishStep(hook_times, m, trace);
    if (!s.ok()) {
      return checks_->uneven_ ? checks_->NameRanksOutOfData(s, (NowMicros() - t0) / 1e6) : s;
    }
    return checks_->AfterStep(m->step(), m->epoch());
  }

  absl::StatusOr<EvalResult> ReduceEval(const EvalResult& local) override {
    BugCheckGroup& c = *checks_;
    if (c.uneven_) RINGSIDE_RETURN_IF_ERROR(c.WaitForEveryRankAtEpochEnd());
    RINGSIDE_ASSIGN_OR_RETURN(EvalResult total, inner_->ReduceEval(local));
    // Only after a whole epoch of this process (not after max_steps cut it short or a
    // resume started it midway); every rank decides alike, since all run the same steps.
    if (!c.uneven_ && c.epoch_ >= 0 && c.epoch_steps_ == c.per_epoch_) {
      RINGSIDE_RETURN_IF_ERROR(c.CheckVisits());
      if (c.diverged_) RINGSIDE_RETURN_IF_ERROR(c.ReportReplicasApart());
      c.epoch_steps_ = 0;  // Reported once.
    }
    return total;
  }

 private:
  BugCheckGroup* const checks_;
  StepStrategy* const inner_;
};

absl::StatusOr<std::unique_ptr<BugCheckGroup>> BugCheckGroup::Create(ProcessGroup* inner,
                                                                     Model* model, Ops* ops,
                                                                     Store* job,
                                                                     const Options& o) {
  std::unique_ptr<BugCheckGroup> c(new BugCheckGroup(inner, model, ops, job, o));
  RINGSIDE_ASSIGN_OR_RETURN(c->print_in_, DeviceArray<float>::Create(ops, kPrint));
  RINGSIDE_ASSIGN_OR_RETURN(c->print_all_,
                            DeviceArray<float>::Create(ops, kPrint * inner->world_size()));
  RINGSIDE_ASSIGN_OR_RETURN(Sharder shard,
                            Sharder::Create(TrainShardOptions(
                                o.train_size, inner->world_size(), inner->rank(),
                                o.config->seed(), o.config->drop_last(), o.config->bugs())));
  c->shard_ = std::make_unique<Sharder>(std::move(shard));
  c->per_epoch_ = (c->shard_->num_samples() + c->step_size_ - 1) / c->step_size_;
  return c;
}

BugCheckGroup::BugCheckGroup(ProcessGroup* inner, Model* model, Ops* ops, Store* job,
                             const Options& o)
    : inner_(inner),
      model_(model),
      ops_(ops),
      job_(job),
      o_(o),
      uneven_(BugListHas(o.config->bugs(), kBugUnevenShards)),
      step_size_(static_cast<int64_t>(o.config->batch()) * std::max(1, o.config->grad_accum())) {}

std::unique_ptr<StepStrategy> BugCheckGroup::AroundSteps(StepStrategy* inner) {
  if (uneven_ && rank() == 0) DescribeUnevenShards();
  return std::make_unique<Steps>(this, inner);
}

std::shared_ptr<Work> BugCheckGroup::Broadcast(float* data, int64_t n, int root) {
  // Injection (bug no_broadcast): the ranks keep the parameters they initialised.
  if (data == model_->params() && BugListHas(o_.config->bugs(), kBugNoBroadcast)) {
    return std::make_shared<DoneWork>();
  }
  return inner_->Broadcast(data, n, root);
}

void BugCheckGroup::DescribeUnevenShards() const {
  std::vector<std::string> steps;
  for (int r = 0; r < world_size(); ++r) {
    ShardOptions so = TrainShardOptions(o_.train_size, world_size(), r, o_.config->seed(),
                                        o_.config->drop_last(), o_.config->bugs());
    absl::StatusOr<Sharder> s = Sharder::Create(so);
    if (!s.ok()) return;
    steps.push_back(absl::StrCat((s->num_samples() + step_size_ - 1) / step_size_));
  }
  absl::FPrintF(stderr,
                "bug uneven_shards: %d training samples over %d ranks without padding: "
                "steps per epoch by rank: %s%s\n",
                o_.train_size, world_size(), absl::StrJoin(steps, ", "),
                o_.train_size % world_size() == 0
                    ? " (the size divides: no symptom; try one that does not)"
                    : "");
  fflush(stderr);
}

absl::Status BugCheckGroup::AfterStep(int64_t step, int epoch) {
  if (epoch != epoch_) {
    epoch_ = epoch;
    epoch_steps_ = 0;
  }
  ++epoch_steps_;
  last_step_ = step;
  return CheckReplicas(step);
}

absl::Status BugCheckGroup::CheckReplicas(int64_t step) {
  if (diverged_) return absl::OkStatus();  // Reported once; they stay apart.
  std::vector<float> params(model_->num_params());
  RINGSIDE_RETURN_IF_ERROR(
      ops_->CopyToHost(params.data(), model_->params(), params.size() * sizeof(float)));
  double sum_abs = 0, sum_sq = 0;
  for (float p : params) {
    sum_abs += std::fabs(p);
    sum_sq += static_cast<double>(p) * p;
  }
  float mine[kPrint];
  Split(sum_abs, &mine[0]);
  Split(sum_sq, &mine[2]);
  RINGSIDE_RETURN_IF_ERROR(ops_->CopyToDevice(print_in_.data(), mine, sizeof(mine)));
  RINGSIDE_RETURN_IF_ERROR(Annotate(
      inner_->AllGather(print_in_.data(), kPrint, print_all_.data())->Wait(),
      "all-gather of the replicas' parameter fingerprints"));
  std::vector<float> all(kPrint * world_size());
  RINGSIDE_RETURN_IF_ERROR(
      ops_->CopyToHost(all.data(), print_all_.data(), all.size() * sizeof(float)));
  auto value = [&](int r, int k) {
    return static_cast<double>(all[r * kPrint + 2 * k]) + all[r * kPrint + 2 * k + 1];
  };
  int worst = -1;
  double worst_diff = 0;
  for (int r = 1; r < world_size(); ++r) {
    for (int k = 0; k < 2; ++k) {
      const double diff =
          std::fabs(value(r, k) - value(0, k)) / std::max(std::fabs(value(0, k)), 1e-30);
      if (diff > kReplicaTolerance && (worst < 0 || diff > worst_diff)) {
        worst = r;
        worst_diff = diff;
      }
    }
  }
  if (worst < 0) return absl::OkStatus();
  // Every rank saw the same fingerprints, so all take this branch (the distance below
  // is a collective).
  diverged_ = true;
  diverged_at_ = step;
  RINGSIDE_ASSIGN_OR_RETURN(const ReplicaDistance d, FarthestReplica());
  first_distance_ = d.distance;
  if (rank() == 0) {
    absl::FPrintF(stderr,
                  "step %d: replicas diverged: rank %d's parameters differ from rank 0's "
                  "(fingerprints sum|p| %.6g vs %.6g: relative difference %.2g; distance "
                  "%.4g)%s\n",
                  step, worst, value(worst, 0), value(0, 0), worst_diff, d.distance,
                  BugListHas(o_.config->bugs(), kBugNoBroadcast)
                      ? "; the initial broadcast was skipped (bug no_broadcast)"
                      : "");
    fflush(stderr);
  }
  return absl::OkStatus();
}

absl::StatusOr<BugCheckGroup::ReplicaDistance> BugCheckGroup::FarthestReplica() {
  const int64_t n = model_->num_params();
  if (!rank0_params_.data()) {
    RINGSIDE_ASSIGN_OR_RETURN(rank0_params_, DeviceArray<float>::Create(ops_, n));
  }
  // Rank 0's parameters to every rank, through a copy: the model's own stay as they are.
  if (rank() == 0) ops_->Copy(rank0_params_.data(), model_->params(), n);
  RINGSIDE_RETURN_IF_ERROR(ops_->Synchronize());
  RINGSIDE_RETURN_IF_ERROR(Annotate(inner_->Broadcast(rank0_params_.data(), n, 0)->Wait(),
                                    "broadcast of rank 0's parameters (replica distance)"));
  std::vector<float> mine(n), theirs(n);
  RINGSIDE_RETURN_IF_ERROR(ops_->CopyToHost(mine.data(), model_->params(), n * sizeof(float)));
  RINGSIDE_RETURN_IF_ERROR(
      ops_->CopyToHost(theirs.data(), rank0_params_.data(), n * sizeof(float)));
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(mine[i]) - theirs[i];
    sq += d * d;
  }
  float out[kPrint] = {};
  Split(std::sqrt(sq), &out[0]);
  RINGSIDE_RETURN_IF_ERROR(ops_->CopyToDevice(print_in_.data(), out, sizeof(out)));
  RINGSIDE_RETURN_IF_ERROR(
      Annotate(inner_->AllGather(print_in_.data(), kPrint, print_all_.data())->Wait(),
               "all-gather of the replicas' distances"));
  std::vector<float> all(kPrint * world_size());
  RINGSIDE_RETURN_IF_ERROR(
      ops_->CopyToHost(all.data(), print_all_.data(), all.size() * sizeof(float)));
  ReplicaDistance farthest;
  for (int r = 1; r < world_size(); ++r) {
    const double d = static_cast<double>(all[r * kPrint]) + all[r * kPrint + 1];
    if (farthest.rank < 0 || d > farthest.distance) farthest = {r, d};
  }
  return farthest;
}

absl::Status BugCheckGroup::ReportReplicasApart() {
  RINGSIDE_ASSIGN_OR_RETURN(const ReplicaDistance d, FarthestReplica());
  if (rank() != 0) return absl::OkStatus();
  absl::FPrintF(stderr,
                "epoch %d/%d: replicas still apart: rank %d's parameters are %.4g from rank "
                "0's (%.4g at step %d): every rank applies the same averaged update, so "
                "nothing brings them together%s\n",
                epoch_ + 1, o_.config->epochs(), d.rank, d.distance, first_distance_,
                diverged_at_,
                BugListHas(o_.config->bugs(), kBugNoBroadcast) ? " (bug no_broadcast)" : "");
  fflush(stderr);
  return absl::OkStatus();
}

absl::Status BugCheckGroup::CheckVisits() {
  std::vector<float> counts(o_.train_size, 0.0f);
  for (int64_t i : shard_->Indices(epoch_)) counts[i] += 1;
  if (!visits_.data()) {
    RINGSIDE_ASSIGN_OR_RETURN(visits_, DeviceArray<float>::Create(ops_, o_.train_size));
  }
  if (o_.train_size > 0) {
    RINGSIDE_RETURN_IF_ERROR(
        ops_->CopyToDevice(visits_.data(), counts.data(), counts.size() * sizeof(float)));
    RINGSIDE_RETURN_IF_ERROR(
        Annotate(inner_->AllReduce(visits_.data(), o_.train_size, ReduceOp::kSum)->Wait(),
                 "all-reduce of the epoch's sample visits"));
    RINGSIDE_RETURN_IF_ERROR(
        ops_->CopyToHost(counts.data(), visits_.data(), counts.size() * sizeof(float)));
  }
  if (rank() != 0) return absl::OkStatus();
  const VisitSummary v = SummarizeVisits(counts);
  const int world = world_size();
  std::string line;
  if (v.never == 0 && v.repeated == 0) {
    line = absl::StrFormat("epoch %d/%d: %d ranks visited all %d samples, each once",
                           epoch_ + 1, o_.config->epochs(), world, v.samples);
  } else if (v.never == 0) {
    line = absl::StrFormat(
        "epoch %d/%d: %d ranks visited all %d samples; %d of them twice or more", epoch_ + 1,
        o_.config->epochs(), world, v.samples, v.repeated);
  } else {
    line = absl::StrFormat(
        "epoch %d/%d: %d ranks visited %d distinct samples of %d; %d were seen twice or more, "
        "%d never",
        epoch_ + 1, o_.config->epochs(), world, v.distinct, v.samples, v.repeated, v.never);
  }
  if (v.never > 0 || v.repeated > 0) {
    if (BugListHas(o_.config->bugs(), kBugRankSeeds)) {
      absl::StrAppend(&line, " (ranks shuffle with different seeds: bug rank_seeds)");
    } else if (v.never == 0 && v.repeated < world) {
      absl::StrAppend(&line, " (padding evens out the shards)");
    } else if (v.repeated == 0 && v.never < world && o_.config->drop_last()) {
      absl::StrAppend(&line, " (drop_last)");
    }
  }
  absl::FPrintF(stderr, "%s\n", line);
  fflush(stderr);
  return absl::OkStatus();
}

std::string BugCheckGroup::EpochEndKey(int rank) const {
  return absl::StrCat("bugs/epoch_end/", epoch_ends_, "/", rank);
}

// A rank with more batches is still in a step's all-reduce, which waits for this one:
// it times out first and names this rank (the launcher then stops the others); this
// wait ends later, with this rank's view.
absl::Status BugCheckGroup::WaitForEveryRankAtEpochEnd() {
  RINGSIDE_RETURN_IF_ERROR(job_->Set(EpochEndKey(rank()), absl::StrCat(last_step_)));
  std::vector<std::string> keys;
  for (int r = 0; r < world_size(); ++r) keys.push_back(EpochEndKey(r));
  const absl::Duration wait = 2 * o_.timeout + absl::Seconds(10);
  if (absl::Status s = job_->Wait(keys, wait); !s.ok()) {
    const std::string mine = absl::StrCat("ran out of data after step ", last_step_, " (",
                                          epoch_steps_, " steps in epoch ", epoch_ + 1, ")");
    if (!absl::IsDeadlineExceeded(s)) {
      // Typically the store's host (rank 0, which has more batches) failed and left.
      return absl::Status(s.code(), absl::StrCat(mine, " and waited at the epoch's end for "
                                                 "ranks with more batches (uneven shards "
                                                 "without padding: bug uneven_shards): ",
                                                 s.message()));
    }
    std::vector<std::string> missing;
    for (int r = 0; r < world_size(); ++r) {
      if (!job_->Get(keys[r], absl::ZeroDuration()).ok()) missing.push_back(absl::StrCat(r));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        mine, "; rank(s) ", absl::StrJoin(missing, ", "), " did not finish the epoch within ",
        absl::FormatDuration(wait), ": they have more batches (uneven shards without "
        "padding: bug uneven_shards)"));
  }
  ++epoch_ends_;
  return absl::OkStatus();
}

absl::Status BugCheckGroup::NameRanksOutOfData(const absl::Status& s, double waited_s) {
  std::vector<std::string> ranks;
  std::string after;
  for (int r = 0; r < world_size(); ++r) {
    absl::StatusOr<std::string> step = job_->Get(EpochEndKey(r), absl::ZeroDuration());
    if (!step.ok()) continue;
    ranks.push_back(absl::StrCat(r));
    after = *step;
  }
  if (ranks.empty()) return s;
  return absl::Status(s.code(),
                      absl::StrFormat("all-reduce waited %.1f s (its timeout: %s, then naming the "
                                      "lost rank) for rank %s, which ran out of data after "
                                      "step %s (uneven shards without padding: bug "
                                      "uneven_shards)",
                                      waited_s, absl::FormatDuration(o_.timeout),
                                      absl::StrJoin(ranks, ", "), after));
}

}  // namespace ringside
