// The parameter server's two roles as this process plays them, shared by `ringside
// ps-server` / `ps-worker` (one role by hand, e.g. across machines) and by a PS job's
// processes under `ringside train --strategy=ps`.
#ifndef RINGSIDE_EXPERIMENTS_CLI_PS_ROLES_H_
#define RINGSIDE_EXPERIMENTS_CLI_PS_ROLES_H_

#include <string>

#include "absl/status/status.h"
#include "common/ringside.pb.h"

namespace ringside {

// Hosts shard `shard` on `listen` until every worker said goodbye (blocks).
absl::Status RunPsServerRole(const RunConfig& config, int shard, const std::string& listen);

// Trains as worker `worker_id` against --ps_servers (blocks); worker 0 prints the
// result.
absl::Status RunPsWorkerRole(const RunConfig& config, int worker_id);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_PS_ROLES_H_
