// The server role of a parameter-server job: the shard options a RunConfig implies
// (including the configuration workers must match), and `ringside ps-server`, which
// hosts one shard until every worker said goodbye.
#ifndef RINGSIDE_PS_SERVER_SERVER_ROLE_H_
#define RINGSIDE_PS_SERVER_SERVER_ROLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/trace.h"
#include "common/ringside.pb.h"
#include "common/rpc_security.h"
#include "ps_server/consistency_policy.h"
#include "common/run_config.h"
#include "ps_server/ps_service.h"

namespace ringside {

// The consistency mode of a job running `config` (ps_sync and ps_staleness): the one
// place a RunConfig's mode is read. InvalidArgument for an unknown mode.
absl::StatusOr<SyncPolicy> SyncPolicyOf(const RunConfig& config);

// Shard `shard`'s options for a job running `config` (ps_shards, ps_sync,
// ps_staleness, ps_chunk_bytes, world_size = workers, SGD hyper-parameters).
// InvalidArgument for a bad sync mode, chunk size or shard index.
absl::StatusOr<PsShardOptions> ShardOptionsFor(const RunConfig& config, int shard,
                                             absl::Duration timeout);

// A started shard with its metrics and trace files (out_dir/metrics.shard<i>.jsonl,
// out_dir/trace.shard<i>.json: output_files.h).
struct HostedShard {
  // Declared first: outlive the server, which writes into them.
  std::unique_ptr<MetricsWriter> metrics;
  std::unique_ptr<TraceWriter> trace;
  std::unique_ptr<PsServer> server;
};

// Starts shard `shard` on `address`. `out_dir` empty: no metrics or trace file.
// `resuming`: metrics are appended and the trace goes to a new file (output_files.h).
// `security` is the security the shard's server listens with (PsServer::Start); empty
// token (the default, for tests and benchmarks on loopback): unauthenticated.
absl::StatusOr<HostedShard> HostShard(const RunConfig& config, int shard,
                                      const std::string& address, absl::Duration timeout,
                                      const std::string& out_dir, bool resuming = false,
                                      const RpcSecurity& security = RpcSecurity());

// How long an aborted shard keeps answering before it shuts down, in a job whose peers
// time out after `timeout`: min(2 s, timeout / 4). Calls in flight and new ones are
// answered with the abort's reason meanwhile (a worker then names the cause); the
// shard still exits within 1.5 x timeout of a hang it detects after one timeout.
absl::Duration AbortGrace(absl::Duration timeout);

struct PsServerRoleOptions {
  RunConfig config;
  int shard = 0;
  std::string address;  // host:port to listen on.
  absl::Duration timeout = kDefaultPeerTimeout;
  std::string out_dir;
  bool resume = false;  // The job resumes: append metrics, write a new trace file.
  // The security the shard listens with: the job's token and TLS; empty token:
  // unauthenticated (RunPsServer warns on stderr).
  RpcSecurity security;
};

// Hosts one shard until every worker said goodbye (OK) or the job was aborted (the
// abort reason). Prints where it listens to stderr.
absl::Status RunPsServer(const PsServerRoleOptions& options);

// "host:port,host:port" -> addresses. InvalidArgument if empty or malformed.
absl::StatusOr<std::vector<std::string>> ParseServerList(const std::string& list);

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_SERVER_ROLE_H_
