// ps_worker/: the parameter-server worker. Start here.
//   shard_client.h   one shard's RPCs with deadlines; zero-copy combined push-pull
//   tcp_shard_channel.h  the tensors over the TCP data plane (--ps_transport=tcp), the
//                    twin of shard_client.h's gRPC data calls
//   ps_strategy.h    the StepStrategy: push chunks as backward announces them, pull back
//   ps_worker.h      (this) one worker end to end
//
// One parameter-server worker, end to end: builds the replica (common/replica.h),
// connects to every shard (or hosts them all, colocated, when it is worker 0),
// registers, and trains its shard of the data through the shared Trainer with the
// PsStrategy, whose lifecycle takes the start parameters from the shards first and
// says goodbye last.
#ifndef RINGSIDE_PS_WORKER_PS_WORKER_H_
#define RINGSIDE_PS_WORKER_PS_WORKER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/replica.h"
#include "common/ringside.pb.h"
#include "common/rpc_security.h"
#include "grpcpp/channel.h"
#include "ps_worker/ps_strategy.h"

namespace ringside {

struct PsWorkerOptions {
  RunOptions run;                    // config: world_size = workers; ps_* fields set.
  int worker_id = 0;
  std::vector<std::string> servers;  // host:port of shard 0..S-1.
  absl::Duration timeout = kDefaultPeerTimeout;
  // The security this worker's channels to the shards connect with, and, colocated,
  // the security worker 0's shards listen with: the job's token and TLS; empty token:
  // unauthenticated.
  RpcSecurity security;
};

// Runs this worker's part of the job. With config.ps_colocated, worker 0 hosts every
// shard on its address in `servers` and keeps them up until all workers said goodbye.
// Every failure (shard lost, worker lost, mismatch, bad input) comes back as a status
// naming the worker. The result's job_samples_per_sec counts all workers together.
absl::StatusOr<TrainResult> RunPsWorker(const PsWorkerOptions& options);

// Protocol step 0: registers with shard s at `servers[s]` through `channels[s]` (one
// channel per server: NewPsChannel, or in-process channels to hosted shards), sending
// `config`, which every shard compares with its own. The clients in shard order, or
// the first refusal (a different configuration names the differing field);
// InvalidArgument if the channels do not match the servers. A shard that serves a TCP
// data plane (RegisterResponse.data_port) is connected to it on its server's host,
// with the job's `token` (empty: none).
absl::StatusOr<std::vector<std::unique_ptr<ShardClient>>> RegisterWithShards(
    const RunConfig& config, int worker_id, const Model& model,
    const std::vector<std::string>& servers,
    const std::vector<std::shared_ptr<grpc::Channel>>& channels, absl::Duration timeout,
    const std::string& token = "");

}  // namespace ringside

#endif  // RINGSIDE_PS_WORKER_PS_WORKER_H_
