#include "ddp_ring/ddp_worker.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/common.h"
#include "ddp_ring/bug_check_group.h"
#include "ddp_ring/job_store.h"
#include "ddp_ring/process_group_factory.h"
#include "ddp_ring/rank_monitor.h"
#include "ddp_ring/store.h"

namespace ringside {
namespace {

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

// After a rendezvous check: this rank says it has read every rank's entry (key
// `prefix` + rank); rank 0, which hosts the store, waits up to `timeout` for every
// rank's before it goes on (and may leave), so that all ranks see the same entries. A
// rank that died is found later.
absl::Status HoldStoreUntilAllRead(const JobEnv& env, absl::string_view prefix,
                                   absl::Duration timeout, Store* job) {
  RINGSIDE_RETURN_IF_ERROR(job->Set(absl::StrCat(prefix, env.rank), "1"));
  if (env.rank == 0) {
    std::vector<std::string> read_keys;
    for (int r = 0; r < env.world_size; ++r) read_keys.push_back(absl::StrCat(prefix, r));
    job->Wait(read_keys, timeout).IgnoreError();
  }
  return absl::OkStatus();
}

// Rendezvous step 2: every rank publishes its configuration through the store and
// compares every rank's with rank 0's. All ranks report the same mismatch, naming the
// differing fields. Blocks up to `timeout` for the ranks to arrive.
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
  RINGSIDE_RETURN_IF_ERROR(HoldStoreUntilAllRead(env, "config_read/", timeout, job));
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
  RINGSIDE_RETURN_IF_ERROR(HoldStoreUntilAllRead(env, "resume_read/", timeout, job));
  return mismatch;
}

// Rendezvous step 3's options: this rank's place, the timeout, and where NCCL runs.
ProcessGroupOptions GroupOptions(const JobEnv& env, const DdpWorkerOptions& o,
                                 const Replica& replica) {
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
  return pg_options;
}

// Rank 0's one line about the job before training.
void DescribeJob(const JobEnv& env, const DdpWorkerOptions& o, const RunConfig& config,
                 const Replica& replica, const ProcessGroup& group, const Reducer& reducer) {
  if (env.rank != 0) return;
  absl::FPrintF(stderr, "ddp: %d ranks (%s), backend %s on %s%s, %d buckets, overlap %s, gradients in %s, model %s (%d parameters)\n",
                env.world_size, env.launcher, group.backend(), replica.ops->name(),
                group.emulated() || replica.shares_gpu
                    ? absl::StrCat(" (emulated: ", env.local_world_size,
                                   " ranks share the GPU(s) of this node; NCCL over sockets)")
                    : std::string(),
                reducer.buckets().size(), o.reducer.overlap ? "on" : "off", WireFormatName(o.reducer.wire), config.model(),
                replica.model->num_params());
}

// After a failed run: rank 0 may host the store, so it keeps it up a moment for the
// other survivors to find out, through it, which rank was lost. They started looking
// when their own collective failed, about when this rank's did: Gloo's check-in window
// is min(timeout / 2, 1 s), the NCCL group's rank monitor reads the heartbeats twice,
// 2 intervals apart. Bounded by timeout / 2, so that rank 0 too exits within
// 2 x timeout of a peer's hang.
void LingerForSurvivors(const JobEnv& env, absl::Duration timeout) {
  if (env.rank != 0) return;
  absl::SleepFor(std::min(timeout / 2, std::max(absl::Seconds(1), 3 * RankMonitorInterval(timeout))));
}

}  // namespace

absl::StatusOr<TrainResult> RunDdpWorker(const JobEnv& env, const DdpWorkerOptions& o) {
  const std::string me = absl::StrCat("rank ", env.rank);
  // o.run.config was validated where the job was described; the ranks compare it
  // with rank 0's below (the trust boundary).
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
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
      NewProcessGroup(o.backend, pg_store.get(), GroupOptions(env, o, replica));
  if (!group.ok()) return Annotate(group.status(), me);
  // Teaching bugs: the group the reducer uses injects them and checks their symptoms.
  ProcessGroup* reduced_by = group->get();
  std::unique_ptr<BugCheckGroup> bug_checks;
  if (!config.bugs().empty()) {
    BugCheckGroup::Options bo;
    bo.config = &config;
    bo.train_size = replica.data.train->size();
    bo.timeout = o.timeout;
    RINGSIDE_ASSIGN_OR_RETURN(bug_checks, BugCheckGroup::Create(group->get(), replica.model.get(),
                                                                replica.ops.get(), job.get(), bo));
    reduced_by = bug_checks.get();
  }

  ReducerOptions reducer_options = o.reducer;
  // Numerical safety: skip_step checks the reduced gradients before any update.
  reducer_options.skip_nonfinite = config.nan_policy() == kNanPolicySkipStep;
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Reducer> reducer,
                            Reducer::Create(reduced_by, replica.model.get(), replica.ops.get(),
                                            replica.hyper, reducer_options));
  std::unique_ptr<StepStrategy> checked_steps;
  if (bug_checks != nullptr) checked_steps = bug_checks->AroundSteps(reducer.get());
  StepStrategy* strategy = checked_steps != nullptr ? checked_steps.get() : reducer.get();
  DescribeJob(env, o, config, replica, **group, *reducer);
  // The reducer's lifecycle: broadcast of rank 0's parameters, training, final barrier.
  absl::StatusOr<TrainResult> result =
      TrainReplica(run, env.rank, env.world_size, &replica, strategy);
  if (!result.ok()) {
    LingerForSurvivors(env, o.timeout);
    return Annotate(result.status(), me);
  }
  return result;
}

}  // namespace ringside
