// One DDP rank, end to end: given its place in the job (common/job_env.h, torchrun's
// environment variables), rendezvouses through the store that rank 0 hosts, checks that every rank
// runs the same configuration, builds the process group and the replica
// (common/replica.h) and trains its shard through the shared Trainer with the Reducer,
// whose lifecycle broadcasts rank 0's parameters first and holds a barrier last.
#ifndef RINGSIDE_DDP_RING_DDP_WORKER_H_
#define RINGSIDE_DDP_RING_DDP_WORKER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/job_env.h"
#include "common/replica.h"
#include "common/ringside.pb.h"
#include "common/rpc_security.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/reducer.h"

namespace ringside {

struct DdpWorkerOptions {
  RunOptions run;                // Configuration, outputs, resume: as every strategy.
  std::string backend = "gloo";  // "gloo" or "nccl".
  ReducerOptions reducer;
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;  // Gloo only.
  absl::Duration timeout = kDefaultPeerTimeout;  // Rendezvous and every collective.
  // The security the job's store is hosted (rank 0) and joined with (JoinJobStore):
  // the job's token and TLS; empty token: unauthenticated.
  RpcSecurity security;
};

// Runs this rank's part of the job. Every failure (peer lost, timeout, configuration
// mismatch, bad input) comes back as a status naming the rank and the step. The
// result's job_samples_per_sec counts all ranks together.
absl::StatusOr<TrainResult> RunDdpWorker(const JobEnv& env, const DdpWorkerOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_DDP_WORKER_H_
