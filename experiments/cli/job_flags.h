// The command line's one way to a JobSpec (launch/job_spec.h): the training flags,
// read once (flags.h ReadJobFlags: the one place that reads them for a job), turned
// into a typed, checked description (ParseJobSpec, pure), whose errors name the flag.
// A verb calls flags.h's JobSpecFromFlags, which is both.
//
// Errors and exit statuses are the command line's (command.h): a bad flag value or
// combination is a usage error (2), found before anything is loaded; the job's token
// or TLS files, the emulation flags (read when a local job is launched) and
// --ps_servers inside a launched job fail as a run would (1).
#ifndef RINGSIDE_EXPERIMENTS_CLI_JOB_FLAGS_H_
#define RINGSIDE_EXPERIMENTS_CLI_JOB_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "experiments/launch/job_spec.h"

namespace ringside {

// The verbs that describe a job (or one process of it) with the training flags.
enum class JobVerb {
  kTrain,     // `train`: --strategy says which.
  kPsServer,  // `ps-server`: one shard of a PS job, by hand (--shard, --listen).
  kPsWorker,  // `ps-worker`: one worker of a PS job, by hand (--worker_id, --ps_servers).
};

// The flags' values as given, untouched (flags.cc defines them; see their help).
struct JobFlags {
  std::string strategy, model, dataset;
  int32_t epochs = 0;
  int64_t steps = 0;
  int32_t batch = 0;
  double lr = 0, momentum = 0, weight_decay = 0;
  bool nesterov = false;
  uint64_t seed = 0;
  int32_t threads = 0;
  std::string device, precision;
  bool drop_last = false;
  int32_t grad_accum = 0;
  bool prefetch = false;
  std::string bug, nan_policy;
  // RunOptions.
  std::string out;
  bool resume = false;
  int64_t checkpoint_every = 0;
  int32_t keep_checkpoints = 0, eval_batch = 0;
  // Strategies.
  int32_t workers = 0;
  bool dp_interpreter_lock = false;
  std::string backend, allreduce;
  double bucket_cap_mb = 0, first_bucket_mb = 0;
  bool overlap = false;
  std::string compress;  // --compress: "none", "fp16" or "bf16" (RunConfig.compress).
  int32_t timeout_s = 0;
  int32_t ps_shards = 0, ps_chunk_kb = 0, ps_min_workers = 0;
  std::string ps_sync, ps_transport, ps_placement, ps_mode;
  bool ps_colocated = false;
  bool ps_worker_summers = false;
  // One PS process (ps-server, ps-worker, a launched PS job's processes).
  int32_t shard = 0, worker_id = 0;
  std::string listen, ps_servers;
  // A local job's nodes.
  std::string network, cluster, node_cpus, slow_node;
  int32_t ranks_per_node = 1;
  // Security.
  std::string token_file, tls_cert, tls_key, tls_ca;
};

// The job `flags` describe for `verb`, checked. `launch_here`: the job is started from
// this process (not inside a launched job), so its emulation flags are parsed; else
// --ps_servers is (a launched PS job's processes). The checks run in the order the
// command line always ran them; the first failure is returned.
absl::StatusOr<JobSpec> ParseJobSpec(const JobFlags& flags, JobVerb verb, bool launch_here);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_JOB_FLAGS_H_
