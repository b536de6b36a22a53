// The parameter server's two roles as this process plays them, shared by `ringside
// ps-server` / `ps-worker` (one role by hand, e.g. across machines) and by a PS job's
// processes under `ringside train --strategy=ps`.
#ifndef RINGSIDE_EXPERIMENTS_CLI_PS_ROLES_H_
#define RINGSIDE_EXPERIMENTS_CLI_PS_ROLES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/job_env.h"
#include "common/ringside.pb.h"
#include "common/rpc_security.h"
#include "ddp_ring/store.h"

namespace ringside {

// Hosts shard `shard` on `listen` until every worker said goodbye (blocks). `security`
// is the security the shard listens with (empty token: unauthenticated).
absl::Status RunPsServerRole(const RunConfig& config, int shard, const std::string& listen,
                             const RpcSecurity& security);

// Trains as worker `worker_id` against the shards at `servers` (host:port of shard
// 0..S-1; blocks); worker 0 prints the result. `security` is the security the worker
// connects with (and, colocated, worker 0's shards listen with; empty token:
// unauthenticated).
absl::Status RunPsWorkerRole(const RunConfig& config, int worker_id,
                             const std::vector<std::string>& servers,
                             const RpcSecurity& security);

// The shards' addresses of a launched PS job started without --ps_servers, through
// the job's store `job`. Protocol: each process that hosts shards (shard rank s, or
// worker 0 for all of them when colocated) picks a free port on its reachable address
// (ddp_ring/job_store.h) and publishes "ps/shard/<s>" = "host:port"; then every
// process reads all of them. Blocks up to `timeout`; DeadlineExceeded names the shards
// that never published.
absl::StatusOr<std::vector<std::string>> DiscoverPsServers(const JobEnv& env,
                                                          const RunConfig& config, Store* job,
                                                          absl::Duration timeout);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_PS_ROLES_H_
