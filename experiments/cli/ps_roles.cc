#include "experiments/cli/ps_roles.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "ddp_ring/job_store.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/job_flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/sys/sys.h"
#include "ps_server/ps_server.h"
#include "ps_worker/ps_worker.h"

namespace ringside {

absl::Status RunPsWorkerRole(const JobSpec& job, int worker_id,
                             const std::vector<std::string>& servers) {
  PsWorkerOptions o;
  o.run = job.run;
  o.worker_id = worker_id;
  o.servers = servers;
  o.timeout = job.timeout;
  o.security = job.security;
  absl::StatusOr<TrainResult> r = RunPsWorker(o);
  if (!r.ok()) return r.status();
  if (worker_id == 0) {
    absl::PrintF("steps: %d, %.0f samples/s (all workers)\n", r->steps, r->job_samples_per_sec);
    absl::PrintF("test loss: %.4f\n", r->test_loss);
    absl::PrintF("test accuracy: %.4f\n", r->test_accuracy);
  }
  return absl::OkStatus();
}

absl::Status RunPsServerRole(const JobSpec& job, int shard, const std::string& listen) {
  PsServerRoleOptions o;
  o.config = job.run.config;
  o.shard = shard;
  o.address = listen;
  o.timeout = job.timeout;
  o.out_dir = job.run.out_dir;
  o.resume = job.run.resume;
  o.security = job.security;
  return RunPsServer(o);
}

// `ringside ps-server` and `ringside ps-worker`: one role by hand. The verbs' one
// reading of the flags: the JobSpec, with this process's part (job_flags.h).
absl::Status RunPsServerVerb(const CommandArgs& args) {
  RINGSIDE_ASSIGN_OR_RETURN(const JobSpec job, JobSpecFromFlags(JobVerb::kPsServer));
  return RunPsServerRole(job, job.ps_process.shard, job.ps_process.listen);
}

absl::Status RunPsWorkerVerb(const CommandArgs& args) {
  RINGSIDE_ASSIGN_OR_RETURN(const JobSpec job, JobSpecFromFlags(JobVerb::kPsWorker));
  return RunPsWorkerRole(job, job.ps_process.worker_id, job.ps_process.servers);
}

absl::StatusOr<std::vector<std::string>> DiscoverPsServers(const JobEnv& env,
                                                          const PsLayout& layout, Store* job,
                                                          absl::Duration timeout,
                                                          std::vector<ReservedPort>* reserved) {
  auto key = [](int s) { return absl::StrCat("ps/shard/", s); };
  const std::string host = ReachableAddress(env);
  for (int s : layout.ShardsHostedBy(env.rank)) {
    RINGSIDE_ASSIGN_OR_RETURN(ReservedPort port, ReserveFreePort());
    RINGSIDE_RETURN_IF_ERROR(job->Set(key(s), absl::StrCat(host, ":", port.port())));
    reserved->push_back(std::move(port));
  }
  std::vector<std::string> servers;
  const absl::Time deadline = absl::Now() + timeout;
  for (int s = 0; s < layout.shards(); ++s) {
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
