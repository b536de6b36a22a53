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
#include "common/ps_layout.h"
#include "ddp_ring/store.h"
#include "experiments/launch/job_spec.h"
#include "experiments/sys/sys.h"

namespace ringside {

// Hosts shard `shard` of `job` on `listen` until every worker said goodbye (blocks),
// with the job's security (empty token: unauthenticated), timeout and outputs.
absl::Status RunPsServerRole(const JobSpec& job, int shard, const std::string& listen);

// Trains as worker `worker_id` of `job` against the shards at `servers` (host:port of
// shard 0..S-1; blocks); worker 0 prints the result. The worker connects with the
// job's security (and, colocated, worker 0's shards listen with it).
absl::Status RunPsWorkerRole(const JobSpec& job, int worker_id,
                             const std::vector<std::string>& servers);

// The shards' addresses of a launched PS job started without --ps_servers, through
// the job's store `job`. Protocol: each process that hosts shards (`layout`'s
// ShardsHostedBy its rank) reserves a free port on its reachable address
// (ddp_ring/job_store.h; the reservations go to `reserved`, for the caller to hold
// until its shards listen) and publishes "ps/shard/<s>" = "host:port"; then every
// process reads all of them. Blocks up to `timeout`; DeadlineExceeded names the shards
// that never published.
absl::StatusOr<std::vector<std::string>> DiscoverPsServers(const JobEnv& env,
                                                          const PsLayout& layout, Store* job,
                                                          absl::Duration timeout,
                                                          std::vector<ReservedPort>* reserved);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_PS_ROLES_H_
