// `ringside train`: one training job. --strategy=single and dp (DataParallel: replica
// threads of this one process, never launched) run here; ps and ddp launch
// the job's processes on this machine (launch/local_job.h), or, inside a launched job
// (RANK etc. set by `ringside launch` or torchrun), play this process's role.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/rpc_security.h"
#include "common/status_macros.h"
#include "ddp_ring/ddp_ring.h"
#include "experiments/cli/command.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/job_flags.h"
#include "experiments/cli/ps_roles.h"
#include "experiments/cli/verbs.h"
#include "experiments/cluster/cluster.h"
#include "experiments/launch/launch.h"
#include "experiments/launch/job_spec.h"
#include "experiments/launch/local_job.h"
#include "experiments/netem/netem.h"
#include "experiments/train_command.h"
#include "ps_server/ps_server.h"

namespace ringside {
namespace {

// The local job of `job` (its token passed on to the processes, its nodes).
LocalJobOptions LocalJob(const CommandArgs& args, const JobSpec& job) {
  LocalJobOptions o;
  o.self_args = args.self_args;
  o.security = job.security;
  o.emulation = job.emulation;
  return o;
}

// --cluster: the local job's links become the cluster's NIC / d (and each node's
// loopback its intra-node path's, where the share drives it), d measured here on one
// device's share of a node of the job's CPU share (cluster/host_dilation.h; "auto"
// resolved over `plan`'s nodes as the launch will). Says the dilation on stderr.
absl::Status ShapeLinksForCluster(const JobSpec& job, const NodePlan& plan, LocalJobOptions* local) {
  const RunConfig& c = job.run.config;
  RINGSIDE_ASSIGN_OR_RETURN(double cpus,
                            ResolveNodeCpus(local->emulation.node_cpus, plan.num_nodes(), MachineCpus()));
  RINGSIDE_ASSIGN_OR_RETURN(MeasuredDilation m,
                            MeasureDilation(job.cluster, c.model(), c.batch(), c.threads(), cpus, stderr));
  RINGSIDE_ASSIGN_OR_RETURN(local->emulation.network, ParseNetworkProfile(DilatedNetworkProfile(m.dilation)));
  absl::FPrintF(stderr, "ringside: %s\n", DescribeDilation(m.profile, m.dilation));
  return absl::OkStatus();
}

// The job's node plan, as the launch will make it (launch/node_plan.h).
absl::StatusOr<NodePlan> JobPlan(const JobSpec& job, const LocalJobOptions& local) {
  const EmulationSpec& e = local.emulation;
  if (job.strategy == JobStrategy::kPs) {
    return PlanPsNodes(job.ps, e.ranks_per_node, e.slow_node);
  }
  return PlanDdpNodes(job.workers, e.ranks_per_node, e.slow_node);
}

// --cluster's nodes: a device is a rank, so a node holds the profile's devices_per_node
// ranks. A usage error, one line naming both numbers, when --ranks_per_node says
// otherwise or the job's processes do not fill whole nodes; checked before anything
// (cgroup, namespace, output) is made.
absl::Status SetClusterRanksPerNode(const CommandArgs& args, const JobSpec& job, LocalJobOptions* local) {
  RINGSIDE_ASSIGN_OR_RETURN(ClusterProfile profile, LoadClusterProfile(job.cluster));
  const bool ps = job.strategy == JobStrategy::kPs;
  // One device per node: a PS's packing (--ranks_per_node=2 puts shard i beside worker
  // i) is placement, not devices, and stays as given (as in compare).
  if (ps && profile.devices_per_node <= 1) return absl::OkStatus();
  const int processes = ps ? job.ps.num_processes() : job.workers;
  std::string what;
  if (!ps) {
    what = absl::StrFormat("the %d ranks of --workers=%d", processes, processes);
  } else if (job.ps.colocated()) {
    what = absl::StrFormat("the %d workers of --workers=%d", processes, job.ps.workers());
  } else {
    what = absl::StrFormat("the %d processes of --ps_shards=%d and --workers=%d", processes,
                           job.ps.dedicated_shards(), job.ps.workers());
  }
  const int requested = args.flags_given.count("ranks_per_node") > 0 ? local->emulation.ranks_per_node : 0;
  absl::StatusOr<int> k = ClusterRanksPerNode(profile, processes, what, requested, "--ranks_per_node");
  if (!k.ok()) return AsUsageError(k.status());
  local->emulation.ranks_per_node = *k;
  return absl::OkStatus();
}

// LocalJob, with the nodes and links of --cluster.
absl::StatusOr<LocalJobOptions> LocalJobOnCluster(const CommandArgs& args, const JobSpec& job) {
  LocalJobOptions local = LocalJob(args, job);
  if (job.cluster.empty()) return local;
  RINGSIDE_RETURN_IF_ERROR(SetClusterRanksPerNode(args, job, &local));
  RINGSIDE_ASSIGN_OR_RETURN(NodePlan plan, JobPlan(job, local));
  RINGSIDE_RETURN_IF_ERROR(ShapeLinksForCluster(job, plan, &local));
  return local;
}

// PS inside a launched job: this process's role in the layout (common/ps_layout.h).
// The shards' addresses come from --ps_servers, or, without it, from the job's store
// (DiscoverPsServers), which rank 0 hosts or torchrun's agent does.
absl::Status RunPsRank(const JobSpec& job) {
  RINGSIDE_ASSIGN_OR_RETURN(JobEnv env, ReadJobEnv());
  const PsLayout& ps = job.ps;
  if (env.world_size != ps.num_processes()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s started %d processes; a PS job of --workers=%d%s needs %d", env.launcher,
        env.world_size, ps.workers(),
        ps.colocated() ? " (colocated shards)" : absl::StrFormat(" and --ps_shards=%d", ps.dedicated_shards()),
        ps.num_processes()));
  }
  std::vector<std::string> servers = job.ps_process.servers;
  std::unique_ptr<Store> store;  // Held until this role ends: rank 0 may host it.
  std::vector<ReservedPort> reserved;  // This rank's shards' ports, until the role ends.
  if (servers.empty()) {
    RINGSIDE_ASSIGN_OR_RETURN(store, JoinJobStore(env, job.security, job.timeout));
    std::unique_ptr<Store> prefixed = NewPrefixStore(absl::StrCat("ringside/", env.run_id), store.get());
    RINGSIDE_ASSIGN_OR_RETURN(servers, DiscoverPsServers(env, ps, prefixed.get(), job.timeout, &reserved));
  }
  if (ps.IsShardProcess(env.rank)) return RunPsServerRole(job, env.rank, servers[env.rank]);
  return RunPsWorkerRole(job, ps.WorkerOf(env.rank), servers);
}

// DDP: this process is one rank; its store server and client use the job's security.
absl::Status RunDdpRank(const JobSpec& job) {
  RINGSIDE_ASSIGN_OR_RETURN(JobEnv env, ReadJobEnv());
  DdpWorkerOptions o;
  o.run = job.run;
  o.backend = BackendName(job.backend);
  o.reducer.bucket_cap_bytes = job.run.config.bucket_cap_bytes();
  o.reducer.first_bucket_bytes = job.run.config.first_bucket_bytes();
  o.reducer.overlap = job.run.config.overlap();
  RINGSIDE_ASSIGN_OR_RETURN(const Compression compression, ParseCompressionSpec(job.run.config.compress()));
  o.reducer.wire = compression.wire;
  if (compression.lossy()) {
    o.reducer.lossy = compression;
    o.reducer.lossy_seed = job.run.config.seed();  // The same on every rank (they agree on the config).
  }
  o.algorithm = job.allreduce;
  o.timeout = job.timeout;
  o.security = job.security;
  RINGSIDE_ASSIGN_OR_RETURN(TrainResult r, RunDdpWorker(env, o));
  if (env.rank == 0) {
    absl::PrintF("steps: %d, %.0f samples/s (all ranks)\n", r.steps, r.job_samples_per_sec);
    absl::PrintF("test loss: %.4f\n", r.test_loss);
    absl::PrintF("test accuracy: %.4f\n", r.test_accuracy);
  }
  return absl::OkStatus();
}

// A local PS or DDP job: its processes on this machine (on the cluster's links with
// --cluster), then one timeline of all their traces, after a failure too.
absl::Status RunLocalJob(const CommandArgs& args, const JobSpec& job) {
  absl::Status status = [&]() -> absl::Status {
    RINGSIDE_ASSIGN_OR_RETURN(LocalJobOptions local, LocalJobOnCluster(args, job));
    if (job.strategy == JobStrategy::kPs) return LaunchLocalPsJob(job.ps, local);
    return LaunchLocalDdpJob(job.workers, local);
  }();
  MergeRunTimeline(job.run.out_dir);
  return status;
}

}  // namespace

// The verb's one reading of the flags: the JobSpec (job_flags.h), checked; then the
// role this process plays in it.
absl::Status RunTrainVerb(const CommandArgs& args) {
  RINGSIDE_ASSIGN_OR_RETURN(const JobSpec job, JobSpecFromFlags(JobVerb::kTrain));
  const bool launched = InLaunchedJob();
  if (IsMultiProcess(job.strategy) && !launched) return RunLocalJob(args, job);
  if (job.strategy == JobStrategy::kPs) return RunPsRank(job);
  if (job.strategy == JobStrategy::kDdp) return RunDdpRank(job);
  // Single on an emulated node: this binary again, inside the node (local_job.h); in
  // the launched copy InLaunchedJob() holds and it trains here.
  const EmulationSpec& e = job.emulation;
  if (job.strategy == JobStrategy::kSingle && !launched &&
      (e.node_cpus.enabled || e.ranks_per_node != 1 || e.slow_node_given)) {
    return LaunchLocalSingleJob(LocalJob(args, job));  // Refuses the placement flags single cannot use.
  }
  // Single, and dp (one process whatever --workers says: its replicas are threads).
  return RunTrainCommand(job);
}

}  // namespace ringside
