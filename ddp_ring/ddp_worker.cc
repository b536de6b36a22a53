#include "ddp_ring/ddp_worker.h"

#include <algorithm>
#include <memory>
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
absl::Status CheckSameConfigEverywhere(const JobEnv& env, const RunConfig& config,
                                       absl::Duration timeout, Store* job) {
  const std::string me = absl::StrCat("rank ", env.rank);
  RINGSIDE_RETURN_IF_ERROR(job->Set(absl::StrCat("config/", env.rank), config.SerializeAsString()));
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back(absl::StrCat("config/", r));
  if (absl::Status s = job->Wait(keys, timeout); !s.ok()) {
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
  absl::StatusOr<Checkpoint> checkpoint = ReadCheckpoint(absl::StrCat(run.out_dir, "/", kCheckpointFile));
  if (absl::IsNotFound(checkpoint.status())) return -1;
  if (!checkpoint.ok()) return checkpoint.status();
  return checkpoint->header.step();
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
  absl::StatusOr<std::unique_ptr<Store>> store = JoinJobStore(env, o.timeout);
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

  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Reducer> reducer,
                            Reducer::Create(group->get(), replica.model.get(), replica.ops.get(),
                                            replica.hyper, o.reducer));
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
      TrainReplica(run, env.rank, env.world_size, &replica, reducer.get());
  if (!result.ok()) {
    // Rank 0 may host the store: keep it up a moment so that the other survivors can
    // find out, through it, which rank was lost (the NCCL group's rank monitor reads
    // the heartbeats twice, a few intervals apart).
    if (env.rank == 0) {
      absl::SleepFor(std::min(o.timeout, std::max(absl::Seconds(2), 3 * RankMonitorInterval(o.timeout))));
    }
    return Annotate(result.status(), me);
  }
  return result;
}

}  // namespace ringside
