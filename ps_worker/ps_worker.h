// ps_worker/: the parameter-server worker. Start here.
//   shard_client.h   one shard's RPCs with deadlines; zero-copy combined push-pull
//   ps_strategy.h    the StepStrategy: push chunks as backward announces them, pull back
//   ps_worker.h      (this) one worker end to end
//
// One parameter-server worker, end to end: connects to every shard (or hosts them
// all, colocated, when it is worker 0), registers, takes the start parameters from the
// shards and trains its shard of the data through the shared Trainer with the
// PsStrategy.
#ifndef RINGSIDE_PS_WORKER_PS_WORKER_H_
#define RINGSIDE_PS_WORKER_PS_WORKER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/ringside.pb.h"
#include "ps_worker/ps_strategy.h"

namespace ringside {

struct PsWorkerOptions {
  RunConfig config;                  // world_size = workers; ps_* fields set.
  int worker_id = 0;
  std::vector<std::string> servers;  // host:port of shard 0..S-1.
  absl::Duration timeout = absl::Seconds(60);
  std::string out_dir;
  bool resume = false;
  int64_t checkpoint_every = 0;
  int eval_batch = 1000;
};

struct PsResult {
  int64_t steps = 0;
  double samples_per_sec = 0;  // All workers together.
  double test_loss = 0;
  double test_accuracy = 0;
};

// Runs this worker's part of the job. With config.ps_colocated, worker 0 hosts every
// shard on its address in `servers` and keeps them up until all workers said goodbye.
// Every failure (shard lost, worker lost, mismatch, bad input) comes back as a status
// naming the worker.
absl::StatusOr<PsResult> RunPsWorker(const PsWorkerOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_PS_WORKER_PS_WORKER_H_
