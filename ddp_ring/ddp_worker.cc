#include "ddp_ring/ddp_worker.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/common.h"
#include "ddp_ring/job_store.h"
#include "ddp_ring/process_group_factory.h"
#include "ddp_ring/rank_monitor.h"
#include "ddp_ring/store.h"

namespace ringside {
namespace {

// Rendezvous step 2: every rank publishes its configuration through the store and
// compares every rank's with rank 0's. All ranks report the same mismatch, naming the
// differing fields. Blocks up to `timeout` for the ranks to arrive.
// Store keys of the duplicate-rank check (under the job's prefix).
constexpr char kRankClaimKey[] = "rank_claim/";
constexpr char kDuplicateRankKey[] = "duplicate_rank";
// How often a rank waiting for the others looks for a duplicate rank's report.
constexpr absl::Duration kDuplicatePoll = absl::Milliseconds(200);
// How long rank 0 (the store's host) keeps the store up after it saw the report, so
// that every waiting rank reads it too.
constexpr absl::Duration kDuplicateGrace = absl::Seconds(1);

// Rendezvous step 2a: this process claims its rank with an atomic add on the rank's
// key; a second process with the same RANK gets 2, publishes the rank under
// kDuplicateRankKey (which every waiting rank polls: WaitForRanks) and fails, one line.
absl::Status ClaimRank(const JobEnv& env, Store* job) {
  RINGSIDE_ASSIGN_OR_RETURN(const int64_t claims, job->Add(absl::StrCat(kRankClaimKey, env.rank), 1));
  if (claims == 1) return absl::OkStatus();
  job->Set(kDuplicateRankKey, absl::StrCat(env.rank)).IgnoreError();  // Best effort.
  return absl::AlreadyExistsError(absl::StrCat(
      "rank ", env.rank, ": another process already joined this job as rank ", env.rank,
      " (duplicate RANK); stopping"));
}

// Waits for `keys` as Store::Wait does, but fails at once (within kDuplicatePoll) with
// one line naming the rank if some process reported a duplicate rank.
absl::Status WaitForRanks(const JobEnv& env, const std::vector<std::string>& keys,
                          absl::Duration timeout, Store* job) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (absl::StatusOr<std::string> dup = job->Get(kDuplicateRankKey, absl::ZeroDuration());
        dup.ok()) {
      if (env.rank == 0) absl::SleepFor(kDuplicateGrace);
      return absl::AlreadyExistsError(absl::StrCat("rank ", env.rank, ": rank ", *dup,
                                                   " was claimed by two processes (duplicate "
                                                   "RANK); stopping the job"));
    }
    const absl::Duration left = deadline - absl::Now();
    absl::Status s = job->Wait(keys, std::max(absl::ZeroDuration(), std::min(kDuplicatePoll, left)));
    if (!absl::IsDeadlineExceeded(s) || left <= kDuplicatePoll) return s;
  }
}

absl::Status CheckSameConfigEverywhere(const JobEnv& env, const RunConfig& config,
                                       absl::Duration timeout, Store* job) {
  const std::string me = absl::StrCat("rank ", env.rank);
  RINGSIDE_RETURN_IF_ERROR(ClaimRank(env, job));
  RINGSIDE_RETURN_IF_ERROR(job->Set(absl::StrCat("config/", env.rank), config.SerializeAsString()));
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back(absl::StrCat("config/", r));
  if (absl::Status s = WaitForRanks(env, keys, timeout, job); !s.ok()) {
    if (absl::IsAlreadyExists(s)) return s;  // A duplicate rank: its own line.
    if (!absl::IsDeadlineExceeded(s)) {
      return Annotate(s, absl::StrCat(me, ": waiting for every rank to arrive (rank 0 hosts the store)"));
    }
    std::vector<std::string> missing;
    for (int r = 0; r < env.world_size; ++r) {
      if (!job->Get(keys[r], absl::ZeroDuration()).ok()) missing.push_back(absl::StrCat(r));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        me, ": rank(s) ", absl::StrJoin(missing, ", "), " never arrived within ",
        absl::FormatDuration(timeout), " (store at ", env.master_addr, ":", env.master_port, ")"));
  }
  absl::Status mismatch;
  RunConfig reference;
  for (int r = 0; r < env.world_size && mismatch.ok(); ++r) {
    RINGSIDE_ASSIGN_OR_RETURN(std::string blob, job->Get(keys[r], timeout));
    RunConfig theirs;
    if (!theirs.ParseFromString(blob)) {
      return absl::DataLossError(absl::StrCat(me, ": rank ", r, " published an unreadable configuration"));
    }
    if (r == 0) {
      reference = theirs;
    } else {
      mismatch = CheckSameConfig(reference, "rank 0", theirs, absl::StrCat("rank ", r));
    }
  }
  // Everyone has read every configuration before rank 0 (which hosts the store) may
  // leave, so that all ranks report the same mismatch.
  RINGSIDE_RETURN_IF_ERROR(job->Set(absl::StrCat("config_read/", env.rank), "1"));
  if (env.rank == 0) {
    std::vector<std::string> read_keys;
    for (int r = 0; r < env.world_size; ++r) read_keys.push_back(absl::StrCat("config_read/", r));
    job->Wait(read_keys, timeout).IgnoreError();  // A rank that died is found later.
  }
  return mismatch;
}

// The step this rank resumes from: its checkpoint's, or -1 when it starts fresh (no
// --resume, or no checkpoint yet). Other read errors are returned.
absl::StatusOr<int64_t> ResumeStep(const RunOptions& run) {
  if (!run.resume || run.out_dir.empty()) return -1;
  // The step the trainer will resume from: the newest intact checkpoint (it falls back
  // past a damaged newest one the same way).
  absl::StatusOr<NewestCheckpoint> newest = ReadNewestCheckpoint(run.out_dir);
  if (absl::IsNotFound(newest.status())) return -1;
  if (!newest.ok()) return newest.status();
  return newest->checkpoint.header.step();
}

// Rendezvous step 2b (after the configurations agree): every rank resumes from the same
// step. With --resume each rank reads OUT/checkpoint.bin, which rank 0 writes; a rank
// whose OUT is not the one rank 0 writes to (another node's disk) would start over and
// silently train other parameters. Every rank reports the same disagreement.
absl::Status CheckSameResumeStep(const JobEnv& env, const RunOptions& run, absl::Duration timeout,
                                 Store* job) {
  RINGSIDE_ASSIGN_OR_RETURN(const int64_t mine, ResumeStep(run));
  RINGSIDE_RETURN_IF_ERROR(job->Set(absl::StrCat("resume_step/", env.rank), absl::StrCat(mine)));
  auto describe = [](int64_t step) {
    return step < 0 ? std::string("starts from step 0 (no checkpoint)") : absl::StrCat("resumes from step ", step);
  };
  int64_t rank0 = -1;
  absl::Status mismatch;
  for (int r = 0; r < env.world_size && mismatch.ok(); ++r) {
    RINGSIDE_ASSIGN_OR_RETURN(std::string value, job->Get(absl::StrCat("resume_step/", r), timeout));
    int64_t theirs = 0;
    if (!absl::SimpleAtoi(value, &theirs)) {
      return absl::DataLossError(absl::StrCat("rank ", env.rank, ": rank ", r, " published an unreadable resume step"));
    }
    if (r == 0) {
      rank0 = theirs;
    } else if (theirs != rank0) {
      mismatch = absl::FailedPreconditionError(absl::StrCat(
          "rank ", r, " ", describe(theirs), " but rank 0 ", describe(rank0), ": with --resume every rank reads ",
          run.out_dir, "/", kCheckpointFile, ", so --out must be a directory every node shares"));
    }
  }
  // As in step 2: rank 0 (the store's host) leaves only after every rank has read.
  RINGSIDE_RETURN_IF_ERROR(job->Set(absl::StrCat("resume_read/", env.rank), "1"));
  if (env.rank == 0) {
    std::vector<std::string> read_keys;
    for (int r = 0; r < env.world_size; ++r) read_keys.push_back(absl::StrCat("resume_read/", r));
    job->Wait(read_keys, timeout).IgnoreError();
  }
  return mismatch;
}

// The teaching bugs' symptoms (RunConfig.bugs, `ringside train --bug`), checked around
// the Reducer, which it wraps and forwards every call to. Only built when a bug is on:
//  - after every step, the ranks all-gather a fingerprint of their parameters; at the
//    first step where a rank's differs from rank 0's, rank 0 says so (naming the cause
//    with no_broadcast), and training goes on;
//  - at each epoch's end (ReduceEval), the ranks all-reduce how often each training
//    sample was visited in that epoch and rank 0 prints the summary (the symptom of
//    rank_seeds: samples seen twice and never). Skipped with uneven_shards;
//  - uneven_shards: at each epoch's end a rank publishes in the job's store that it ran
//    out of data, and waits there for the others; a rank whose step's all-reduce fails
//    reads those keys and names the rank it waited for.
// The collectives run in the same order on every rank. Not thread-safe (the training
// thread). Borrows everything.
class BugChecks final : public StepStrategy {
 public:
  struct Options {
    const RunConfig* config = nullptr;
    int rank = 0;
    int world_size = 1;
    int64_t train_size = 0;    // Training samples.
    absl::Duration timeout;    // The group's, per collective.
  };

  static absl::StatusOr<std::unique_ptr<BugChecks>> Create(StepStrategy* inner,
                                                           ProcessGroup* group, Model* model,
                                                           Ops* ops, Store* job,
                                                           const Options& o) {
    std::unique_ptr<BugChecks> c(new BugChecks(inner, group, model, ops, job, o));
    RINGSIDE_ASSIGN_OR_RETURN(c->print_in_, DeviceArray<float>::Create(ops, kPrint));
    RINGSIDE_ASSIGN_OR_RETURN(c->print_all_,
                              DeviceArray<float>::Create(ops, kPrint * o.world_size));
    RINGSIDE_ASSIGN_OR_RETURN(Sharder shard,
                              Sharder::Create(TrainShardOptions(
                                  o.train_size, o.world_size, o.rank, o.config->seed(),
                                  o.config->drop_last(), o.config->bugs())));
    c->shard_ = std::make_unique<Sharder>(std::move(shard));
    const int64_t step_size =
        static_cast<int64_t>(o.config->batch()) * std::max(1, o.config->grad_accum());
    c->per_epoch_ = (c->shard_->num_samples() + step_size - 1) / step_size;
    if (c->uneven_ && o.rank == 0) c->DescribeUnevenShards(step_size);
    return c;
  }

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
    if (!s.ok()) return uneven_ ? NameRanksOutOfData(s, (NowMicros() - t0) / 1e6) : s;
    if (m->epoch() != epoch_) {
      epoch_ = m->epoch();
      epoch_steps_ = 0;
    }
    ++epoch_steps_;
    last_step_ = m->step();
    return CheckReplicas(m->step());
  }

  absl::StatusOr<EvalResult> ReduceEval(const EvalResult& local) override {
    if (uneven_) RINGSIDE_RETURN_IF_ERROR(WaitForEveryRankAtEpochEnd());
    RINGSIDE_ASSIGN_OR_RETURN(EvalResult total, inner_->ReduceEval(local));
    // Only after a whole epoch of this process (not after max_steps cut it short or a
    // resume started it midway); every rank decides alike, since all run the same steps.
    if (!uneven_ && epoch_ >= 0 && epoch_steps_ == per_epoch_) {
      RINGSIDE_RETURN_IF_ERROR(CheckVisits());
      epoch_steps_ = 0;  // Reported once.
    }
    return total;
  }

 private:
  // Fingerprint floats per rank: sum |p| and sum p^2, each as a float pair (hi, lo)
  // that keeps a double's precision through the float all-gather.
  static constexpr int kPrint = 4;
  // Replicas whose fingerprints differ relatively by more than this differ (identical
  // replicas give bitwise equal sums; different initialisations differ by ~1e-3).
  static constexpr double kReplicaTolerance = 1e-5;

  BugChecks(StepStrategy* inner, ProcessGroup* group, Model* model, Ops* ops, Store* job,
            const Options& o)
      : inner_(inner),
        group_(group),
        model_(model),
        ops_(ops),
        job_(job),
        o_(o),
        uneven_(BugListHas(o.config->bugs(), kBugUnevenShards)) {}

  // Rank 0, at start: how many steps an epoch has on each rank without padding.
  void DescribeUnevenShards(int64_t step_size) const {
    std::vector<std::string> steps;
    for (int r = 0; r < o_.world_size; ++r) {
      ShardOptions so = TrainShardOptions(o_.train_size, o_.world_size, r, o_.config->seed(),
                                          o_.config->drop_last(), o_.config->bugs());
      absl::StatusOr<Sharder> s = Sharder::Create(so);
      if (!s.ok()) return;
      steps.push_back(absl::StrCat((s->num_samples() + step_size - 1) / step_size));
    }
    absl::FPrintF(stderr,
                  "bug uneven_shards: %d training samples over %d ranks without padding: "
                  "steps per epoch by rank: %s%s\n",
                  o_.train_size, o_.world_size, absl::StrJoin(steps, ", "),
                  o_.train_size % o_.world_size == 0
                      ? " (the size divides: no symptom; try one that does not)"
                      : "");
    fflush(stderr);
  }

  // After step `step`: rank 0 reports the first step at which the replicas differ.
  absl::Status CheckReplicas(int64_t step) {
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
        group_->AllGather(print_in_.data(), kPrint, print_all_.data())->Wait(),
        "all-gather of the replicas' parameter fingerprints"));
    std::vector<float> all(kPrint * o_.world_size);
    RINGSIDE_RETURN_IF_ERROR(
        ops_->CopyToHost(all.data(), print_all_.data(), all.size() * sizeof(float)));
    auto value = [&](int r, int k) {
      return static_cast<double>(all[r * kPrint + 2 * k]) + all[r * kPrint + 2 * k + 1];
    };
    int worst = -1;
    double worst_diff = 0;
    for (int r = 1; r < o_.world_size; ++r) {
      for (int k = 0; k < 2; ++k) {
        const double diff = std::fabs(value(r, k) - value(0, k)) /
                            std::max(std::fabs(value(0, k)), 1e-30);
        if (diff > kReplicaTolerance && (worst < 0 || diff > worst_diff)) {
          worst = r;
          worst_diff = diff;
        }
      }
    }
    if (worst < 0) return absl::OkStatus();
    diverged_ = true;
    if (o_.rank == 0) {
      absl::FPrintF(stderr,
                    "step %d: replicas diverged: rank %d's parameters differ from rank 0's "
                    "(fingerprints sum|p| %.6g vs %.6g: relative difference %.2g)%s\n",
                    step, worst, value(worst, 0), value(0, 0), worst_diff,
                    BugListHas(o_.config->bugs(), kBugNoBroadcast)
                        ? "; the initial broadcast was skipped (bug no_broadcast)"
                        : "");
      fflush(stderr);
    }
    return absl::OkStatus();
  }

  static void Split(double v, float* out) {
    out[0] = static_cast<float>(v);
    out[1] = static_cast<float>(v - static_cast<double>(out[0]));
  }

  // At an epoch's end: every rank's visits of each training sample, summed, and rank 0
  // prints the summary.
  absl::Status CheckVisits() {
    std::vector<float> counts(o_.train_size, 0.0f);
    for (int64_t i : shard_->Indices(epoch_)) counts[i] += 1;
    if (!visits_.data()) {
      RINGSIDE_ASSIGN_OR_RETURN(visits_, DeviceArray<float>::Create(ops_, o_.train_size));
    }
    if (o_.train_size > 0) {
      RINGSIDE_RETURN_IF_ERROR(
          ops_->CopyToDevice(visits_.data(), counts.data(), counts.size() * sizeof(float)));
      RINGSIDE_RETURN_IF_ERROR(Annotate(
          group_->AllReduce(visits_.data(), o_.train_size, ReduceOp::kSum)->Wait(),
          "all-reduce of the epoch's sample visits"));
      RINGSIDE_RETURN_IF_ERROR(
          ops_->CopyToHost(counts.data(), visits_.data(), counts.size() * sizeof(float)));
    }
    if (o_.rank != 0) return absl::OkStatus();
    const VisitSummary v = SummarizeVisits(counts);
    std::string line;
    if (v.never == 0 && v.repeated == 0) {
      line = absl::StrFormat("epoch %d/%d: %d ranks visited all %d samples, each once", epoch_ + 1,
                             o_.config->epochs(), o_.world_size, v.samples);
    } else if (v.never == 0) {
      line = absl::StrFormat("epoch %d/%d: %d ranks visited all %d samples; %d of them twice or more",
                             epoch_ + 1, o_.config->epochs(), o_.world_size, v.samples, v.repeated);
    } else {
      line = absl::StrFormat(
          "epoch %d/%d: %d ranks visited %d distinct samples of %d; %d were seen twice or more, "
          "%d never",
          epoch_ + 1, o_.config->epochs(), o_.world_size, v.distinct, v.samples, v.repeated, v.never);
    }
    if (v.never > 0 || v.repeated > 0) {
      if (BugListHas(o_.config->bugs(), kBugRankSeeds)) {
        absl::StrAppend(&line, " (ranks shuffle with different seeds: bug rank_seeds)");
      } else if (v.never == 0 && v.repeated < o_.world_size) {
        absl::StrAppend(&line, " (padding evens out the shards)");
      } else if (v.repeated == 0 && v.never < o_.world_size && o_.config->drop_last()) {
        absl::StrAppend(&line, " (drop_last)");
      }
    }
    absl::FPrintF(stderr, "%s\n", line);
    fflush(stderr);
    return absl::OkStatus();
  }

  std::string EpochEndKey(int rank) const {
    return absl::StrCat("bugs/epoch_end/", epoch_ends_, "/", rank);
  }

  // uneven_shards, before the epoch end's collectives: this rank says how far it got
  // and waits for the others there. A rank with more batches is still in a step's
  // all-reduce, which waits for this one: it times out first and names this rank (the
  // launcher then stops the others); this wait ends later, with this rank's view.
  absl::Status WaitForEveryRankAtEpochEnd() {
    RINGSIDE_RETURN_IF_ERROR(job_->Set(EpochEndKey(o_.rank), absl::StrCat(last_step_)));
    std::vector<std::string> keys;
    for (int r = 0; r < o_.world_size; ++r) keys.push_back(EpochEndKey(r));
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
      for (int r = 0; r < o_.world_size; ++r) {
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

  // uneven_shards: a step's collective failed after `waited_s`; names the ranks that
  // ran out of data before this step, if any did (else `s` as it is).
  absl::Status NameRanksOutOfData(const absl::Status& s, double waited_s) {
    std::vector<std::string> ranks;
    std::string after;
    for (int r = 0; r < o_.world_size; ++r) {
      absl::StatusOr<std::string> step = job_->Get(EpochEndKey(r), absl::ZeroDuration());
      if (!step.ok()) continue;
      ranks.push_back(absl::StrCat(r));
      after = *step;
    }
    if (ranks.empty()) return s;
    return absl::Status(s.code(),
                        absl::StrFormat("all-reduce waited %.0f s for rank %s, which ran out of "
                                        "data after step %s (uneven shards without padding: "
                                        "bug uneven_shards)",
                                        waited_s, absl::StrJoin(ranks, ", "), after));
  }

  StepStrategy* const inner_;
  ProcessGroup* const group_;
  Model* const model_;
  Ops* const ops_;
  Store* const job_;
  const Options o_;
  const bool uneven_;
  std::unique_ptr<Sharder> shard_;  // This rank's training shard, as the trainer's.
  int64_t per_epoch_ = 0;           // Steps per epoch on this rank.
  DeviceArray<float> print_in_;     // [kPrint] this rank's fingerprint.
  DeviceArray<float> print_all_;    // [kPrint * world] every rank's.
  DeviceArray<float> visits_;       // [train_size], allocated at the first epoch end.
  bool diverged_ = false;
  int epoch_ = -1;            // Epoch of the last step, and its steps in this process.
  int64_t epoch_steps_ = 0;
  int64_t last_step_ = -1;
  int epoch_ends_ = 0;        // Epoch ends passed (uneven_shards' keys).
};

}  // namespace

absl::StatusOr<TrainResult> RunDdpWorker(const JobEnv& env, const DdpWorkerOptions& o) {
  const std::string me = absl::StrCat("rank ", env.rank);
  RINGSIDE_RETURN_IF_ERROR(ValidateRunConfig(o.run.config));
  // Before the rendezvous, so that every rank refuses at once and alike.
  RINGSIDE_RETURN_IF_ERROR(CheckProcessGroupBackend(o.backend));
  if (o.backend != o.run.config.backend()) {
    return absl::InternalError(absl::StrCat(me, ": backend ", o.backend,
                                            " but the configuration says ",
                                            o.run.config.backend()));
  }
  RunOptions run = o.run;
  run.config.set_world_size(env.world_size);
  const RunConfig& config = run.config;

  // Rendezvous step 1: the job's store (rank 0's, or torchrun's agent's).
  absl::StatusOr<std::unique_ptr<Store>> store = JoinJobStore(env, o.security, o.timeout);
  if (!store.ok()) return store.status();
  std::unique_ptr<Store> job = NewPrefixStore(absl::StrCat("ringside/", env.run_id), store->get());
  RINGSIDE_RETURN_IF_ERROR(CheckSameConfigEverywhere(env, config, o.timeout, job.get()));
  RINGSIDE_RETURN_IF_ERROR(CheckSameResumeStep(env, run, o.timeout, job.get()));

  // The replica, as in single-process training (on the GPU: this rank's GPU, which
  // the NCCL group must use too).
  RINGSIDE_ASSIGN_OR_RETURN(Replica replica, NewReplica(config));

  // Rendezvous step 3: the process group (Gloo's full mesh or NCCL's communicator,
  // through the store).
  std::unique_ptr<Store> pg_store = NewPrefixStore("pg", job.get());
  ProcessGroupOptions pg_options;
  pg_options.rank = env.rank;
  pg_options.world_size = env.world_size;
  pg_options.timeout = o.timeout;
  pg_options.algorithm = o.algorithm;
  pg_options.hostname = ReachableAddress(env);
  pg_options.cuda_device = std::max(replica.cuda_device, 0);
  // Ranks that share a GPU: NCCL refuses two ranks on one device unless each passes
  // for a host of its own, and then connects them over sockets (an emulation,
  // labelled in the records). The id is unique in the job.
  if (replica.shares_gpu) pg_options.nccl_host_id = absl::StrCat("ringside-", env.run_id, "-rank", env.rank);
  // The store's host, named when a lost rank takes the store with it.
  pg_options.store_host_rank = env.agent_store ? -1 : 0;
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
      NewProcessGroup(o.backend, pg_store.get(), pg_options);
  if (!group.ok()) return Annotate(group.status(), me);

  ReducerOptions reducer_options = o.reducer;
  if (BugListHas(config.bugs(), kBugNoBroadcast)) reducer_options.broadcast_at_start = false;
  // Numerical safety: skip_step checks the reduced gradients before any update.
  reducer_options.skip_nonfinite = config.nan_policy() == kNanPolicySkipStep;
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Reducer> reducer,
                            Reducer::Create(group->get(), replica.model.get(), replica.ops.get(),
                                            replica.hyper, reducer_options));
  // Teaching bugs: their symptoms' checks around the reducer.
  StepStrategy* strategy = reducer.get();
  std::unique_ptr<BugChecks> bug_checks;
  if (!config.bugs().empty()) {
    BugChecks::Options bo;
    bo.config = &config;
    bo.rank = env.rank;
    bo.world_size = env.world_size;
    bo.train_size = replica.data.train->size();
    bo.timeout = o.timeout;
    RINGSIDE_ASSIGN_OR_RETURN(bug_checks, BugChecks::Create(reducer.get(), group->get(),
                                                            replica.model.get(),
                                                            replica.ops.get(), job.get(), bo));
    strategy = bug_checks.get();
  }
  if (env.rank == 0) {
    absl::FPrintF(stderr, "ddp: %d ranks (%s), backend %s on %s%s, %d buckets, overlap %s, model %s (%d parameters)\n",
                  env.world_size, env.launcher, (*group)->backend(), replica.ops->name(),
                  (*group)->emulated() || replica.shares_gpu
                      ? absl::StrCat(" (emulated: ", env.local_world_size,
                                     " ranks share the GPU(s) of this node; NCCL over sockets)")
                      : std::string(),
                  reducer->buckets().size(), o.reducer.overlap ? "on" : "off", config.model(),
                  replica.model->num_params());
  }
  // The reducer's lifecycle: broadcast of rank 0's parameters, training, final barrier.
  absl::StatusOr<TrainResult> result =
      TrainReplica(run, env.rank, env.world_size, &replica, strategy);
  if (!result.ok()) {
    // Rank 0 may host the store: keep it up a moment so that the other survivors can
    // find out, through it, which rank was lost. They started looking when their own
    // collective failed, about when this rank's did: Gloo's check-in window is
    // min(timeout / 2, 1 s), the NCCL group's rank monitor reads the heartbeats twice,
    // 2 intervals apart. Bounded by timeout / 2, so that rank 0 too exits within
    // 2 x timeout of a peer's hang.
    if (env.rank == 0) {
      absl::SleepFor(std::min(o.timeout / 2,
                              std::max(absl::Seconds(1), 3 * RankMonitorInterval(o.timeout))));
    }
    return Annotate(result.status(), me);
  }
  return result;
}

}  // namespace ringside
