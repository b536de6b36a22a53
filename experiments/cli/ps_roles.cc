#include "experiments/cli/ps_roles.h"

#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "ddp_ring/job_store.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/sys/sys.h"
#include "ps_server/ps_server.h"
#include "ps_worker/ps_worker.h"

namespace ringside {

absl::Status RunPsWorkerRole(const RunConfig& c, int worker_id,
                             const std::vector<std::string>& servers,
                             const RpcSecurity& security) {
  PsWorkerOptions o;
  o.run = RunOptionsFromFlags();
  o.run.config = c;
  o.worker_id = worker_id;
  if (worker_id < 0 || worker_id >= c.world_size()) {
    return absl::InvalidArgumentError(absl::StrFormat("--worker_id=%d is outside [0, --workers=%d)", worker_id, c.world_size()));
  }
  o.servers = servers;
  o.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  o.security = security;
  absl::StatusOr<TrainResult> r = RunPsWorker(o);
  if (!r.ok()) return r.status();
  if (worker_id == 0) {
    absl::PrintF("steps: %d, %.0f samples/s (all workers)\n", r->steps, r->job_samples_per_sec);
    absl::PrintF("test loss: %.4f\n", r->test_loss);
    absl::PrintF("test accuracy: %.4f\n", r->test_accuracy);
  }
  return absl::OkStatus();
}

absl::Status RunPsServerRole(const RunConfig& c, int shard, const std::string& listen,
                             const RpcSecurity& security) {
  PsServerRoleOptions o;
  o.config = c;
  o.shard = shard;
  o.address = listen;
  o.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  o.out_dir = absl::GetFlag(FLAGS_out);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.security = security;
  return RunPsServer(o);
}

// `ringside ps-server` and `ringside ps-worker`: one role by hand.
absl::Status RunPsServerVerb(const CommandArgs& args) {
  RINGSIDE_ASSIGN_OR_RETURN(const RpcSecurity security, RpcSecurityFromFlags());
  absl::SetFlag(&FLAGS_strategy, "ps");
  const RunConfig c = RunConfigFromFlags();
  RINGSIDE_RETURN_IF_ERROR(CheckPsFlags(c));
  return RunPsServerRole(c, absl::GetFlag(FLAGS_shard), absl::GetFlag(FLAGS_listen), security);
}

absl::Status RunPsWorkerVerb(const CommandArgs& args) {
  RINGSIDE_ASSIGN_OR_RETURN(const RpcSecurity security, RpcSecurityFromFlags());
  absl::SetFlag(&FLAGS_strategy, "ps");
  const RunConfig c = RunConfigFromFlags();
  RINGSIDE_RETURN_IF_ERROR(CheckPsFlags(c));
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<std::string> servers,
                            ParseServerList(absl::GetFlag(FLAGS_ps_servers)));
  return RunPsWorkerRole(c, absl::GetFlag(FLAGS_worker_id), servers, security);
}

absl::StatusOr<std::vector<std::string>> DiscoverPsServers(const JobEnv& env,
                                                          const RunConfig& c, Store* job,
                                                          absl::Duration timeout) {
  const int shards = c.ps_shards();
  auto key = [](int s) { return absl::StrCat("ps/shard/", s); };
  std::vector<int> mine;  // The shards this process hosts.
  if (c.ps_colocated() && env.rank == 0) {
    for (int s = 0; s < shards; ++s) mine.push_back(s);
  } else if (!c.ps_colocated() && env.rank < shards) {
    mine.push_back(env.rank);
  }
  const std::string host = ReachableAddress(env);
  for (int s : mine) {
    RINGSIDE_ASSIGN_OR_RETURN(int port, PickFreePort());
    RINGSIDE_RETURN_IF_ERROR(job->Set(key(s), absl::StrCat(host, ":", port)));
  }
  std::vector<std::string> servers;
  const absl::Time deadline = absl::Now() + timeout;
  for (int s = 0; s < shards; ++s) {
    absl::StatusOr<std::string> address = job->Get(key(s), deadline - absl::Now());
    if (!address.ok()) {
      return Annotate(address.status(), absl::StrCat("rank ", env.rank, ": shard ", s,
                                                     " never published its address"));
    }
    servers.push_back(*std::move(address));
  }
  return servers;
}

}  // namespace ringside
