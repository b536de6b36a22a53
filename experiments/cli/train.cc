// `ringside train`: one training job. --strategy=single and dp (DataParallel: replica
// threads of this one process, never launched) run here; ps and ddp launch
// the job's processes on this machine (launch/local_job.h), or, inside a launched job
// (RANK etc. set by `ringside launch` or torchrun), play this process's role.
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/rpc_security.h"
#include "common/status_macros.h"
#include "ddp_ring/ddp_ring.h"
#include "experiments/cli/command.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/ps_roles.h"
#include "experiments/cli/verbs.h"
#include "experiments/cluster/cluster.h"
#include "experiments/launch/launch.h"
#include "experiments/launch/local_job.h"
#include "experiments/netem/netem.h"
#include "experiments/train_command.h"
#include "ps_server/ps_server.h"

namespace ringside {
namespace {

// `security`: this process's (the job's token, passed on to the processes).
LocalJobOptions LocalJob(const CommandArgs& args, const RpcSecurity& security) {
  LocalJobOptions o;
  o.self_args = args.self_args;
  o.security = security;
  o.network = absl::GetFlag(FLAGS_network);
  o.node_cpus = absl::GetFlag(FLAGS_node_cpus);
  o.ranks_per_node = absl::GetFlag(FLAGS_ranks_per_node);
  o.slow_node = absl::GetFlag(FLAGS_slow_node);
  return o;
}

// --cluster: the local job's links become the cluster's NIC / d (and each node's
// loopback its intra-node path's, where the share drives it), d measured here on one
// device's share of a node of the job's CPU share (cluster/host_dilation.h; "auto"
// resolved over `plan`'s nodes as the launch will). Says the dilation on stderr. `job`
// unchanged without --cluster.
absl::Status ShapeLinksForCluster(const RunConfig& c, const NodePlan& plan, LocalJobOptions* job) {
  const std::string cluster = absl::GetFlag(FLAGS_cluster);
  if (cluster.empty()) return absl::OkStatus();
  RINGSIDE_ASSIGN_OR_RETURN(NodeCpuSpec spec, ParseNodeCpus(job->node_cpus));
  RINGSIDE_ASSIGN_OR_RETURN(double cpus, ResolveNodeCpus(spec, plan.num_nodes(), MachineCpus()));
  RINGSIDE_ASSIGN_OR_RETURN(MeasuredDilation m,
                            MeasureDilation(cluster, c.model(), c.batch(), c.threads(), cpus, stderr));
  job->network = DilatedNetworkProfile(m.dilation);
  absl::FPrintF(stderr, "ringside: %s\n", DescribeDilation(m.profile, m.dilation));
  return absl::OkStatus();
}

// The job's node plan, as the launch will make it (launch/node_plan.h).
absl::StatusOr<NodePlan> JobPlan(const RunConfig& c, const LocalJobOptions& job) {
  RINGSIDE_ASSIGN_OR_RETURN(SlowNodeSpec slow, ParseSlowNode(job.slow_node));
  if (c.strategy() == "ps") {
    return PlanPsNodes(c.ps_shards(), c.world_size(), c.ps_colocated(), job.ranks_per_node, slow);
  }
  return PlanDdpNodes(absl::GetFlag(FLAGS_workers), job.ranks_per_node, slow);
}

// --cluster's nodes: a device is a rank, so a node holds the profile's devices_per_node
// ranks. A usage error, one line naming both numbers, when --ranks_per_node says
// otherwise or the job's processes do not fill whole nodes; checked before anything
// (cgroup, namespace, output) is made.
absl::Status SetClusterRanksPerNode(const CommandArgs& args, const RunConfig& c, LocalJobOptions* job) {
  RINGSIDE_ASSIGN_OR_RETURN(ClusterProfile profile, LoadClusterProfile(absl::GetFlag(FLAGS_cluster)));
  // One device per node: a PS's packing (--ranks_per_node=2 puts shard i beside worker
  // i) is placement, not devices, and stays as given (as in compare).
  if (c.strategy() == "ps" && profile.devices_per_node <= 1) return absl::OkStatus();
  int processes = 0;
  std::string what;
  if (c.strategy() == "ps") {
    const int shards = c.ps_colocated() ? 0 : c.ps_shards();
    processes = c.world_size() + shards;
    what = c.ps_colocated() ? absl::StrFormat("the %d workers of --workers=%d", processes, c.world_size())
                            : absl::StrFormat("the %d processes of --ps_shards=%d and --workers=%d", processes,
                                              shards, c.world_size());
  } else {
    processes = absl::GetFlag(FLAGS_workers);
    what = absl::StrFormat("the %d ranks of --workers=%d", processes, processes);
  }
  const int requested = args.flags_given.count("ranks_per_node") > 0 ? job->ranks_per_node : 0;
  absl::StatusOr<int> k = ClusterRanksPerNode(profile, processes, what, requested, "--ranks_per_node");
  if (!k.ok()) return AsUsageError(k.status());
  job->ranks_per_node = *k;
  return absl::OkStatus();
}

// LocalJob, with the nodes and links of --cluster.
absl::StatusOr<LocalJobOptions> LocalJobOnCluster(const CommandArgs& args, const RpcSecurity& security,
                                                  const RunConfig& c) {
  LocalJobOptions job = LocalJob(args, security);
  if (absl::GetFlag(FLAGS_cluster).empty()) return job;
  RINGSIDE_RETURN_IF_ERROR(SetClusterRanksPerNode(args, c, &job));
  RINGSIDE_ASSIGN_OR_RETURN(NodePlan plan, JobPlan(c, job));
  RINGSIDE_RETURN_IF_ERROR(ShapeLinksForCluster(c, plan, &job));
  return job;
}

// PS: the shards are ranks 0..S-1 unless colocated, the workers the rest. Inside a
// launched job the shards' addresses come from --ps_servers, or, without it, from the
// job's store (DiscoverPsServers), which rank 0 hosts or torchrun's agent does. Every
// server and client of this process uses `security`.
absl::Status RunPs(const CommandArgs& args, const RpcSecurity& security) {
  const RunConfig c = RunConfigFromFlags();
  RINGSIDE_RETURN_IF_ERROR(CheckPsFlags(c));
  if (!InLaunchedJob()) {
    RINGSIDE_ASSIGN_OR_RETURN(LocalJobOptions job, LocalJobOnCluster(args, security, c));
    return LaunchLocalPsJob(c, job);
  }
  RINGSIDE_ASSIGN_OR_RETURN(JobEnv env, ReadJobEnv());
  const int shards = c.ps_shards();
  const int processes = c.world_size() + (c.ps_colocated() ? 0 : shards);
  if (env.world_size != processes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s started %d processes; a PS job of --workers=%d%s needs %d", env.launcher,
        env.world_size, c.world_size(),
        c.ps_colocated() ? " (colocated shards)" : absl::StrFormat(" and --ps_shards=%d", shards),
        processes));
  }
  std::vector<std::string> servers;
  std::unique_ptr<Store> store;  // Held until this role ends: rank 0 may host it.
  if (const std::string list = absl::GetFlag(FLAGS_ps_servers); !list.empty()) {
    RINGSIDE_ASSIGN_OR_RETURN(servers, ParseServerList(list));
    if (static_cast<int>(servers.size()) != shards) {
      return absl::InvalidArgumentError("--ps_servers does not list --ps_shards addresses");
    }
  } else {
    const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
    RINGSIDE_ASSIGN_OR_RETURN(store, JoinJobStore(env, security, timeout));
    std::unique_ptr<Store> job = NewPrefixStore(absl::StrCat("ringside/", env.run_id), store.get());
    RINGSIDE_ASSIGN_OR_RETURN(servers, DiscoverPsServers(env, c, job.get(), timeout));
  }
  if (!c.ps_colocated() && env.rank < shards) {
    return RunPsServerRole(c, env.rank, servers[env.rank], security);
  }
  return RunPsWorkerRole(c, env.rank - (c.ps_colocated() ? 0 : shards), servers, security);
}

// DDP: a local job of --workers ranks, on the cluster's links with --cluster.
absl::Status RunLocalDdp(const CommandArgs& args, const RpcSecurity& security) {
  RINGSIDE_ASSIGN_OR_RETURN(LocalJobOptions job, LocalJobOnCluster(args, security, RunConfigFromFlags()));
  return LaunchLocalDdpJob(absl::GetFlag(FLAGS_workers), job);
}

// DDP: this process is one rank; its store server and client use `security`.
absl::Status RunDdpRank(const RunConfig& c, const RpcSecurity& security) {
  RINGSIDE_ASSIGN_OR_RETURN(JobEnv env, ReadJobEnv());
  DdpWorkerOptions o;
  o.run = RunOptionsFromFlags();
  o.run.config = c;
  o.backend = c.backend();
  o.reducer.bucket_cap_bytes = c.bucket_cap_bytes();
  o.reducer.first_bucket_bytes = c.first_bucket_bytes();
  o.reducer.overlap = c.overlap();
  RINGSIDE_ASSIGN_OR_RETURN(o.algorithm, ParseAllReduceAlgorithm(c.allreduce()));
  const int timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (timeout_s < 1) return absl::InvalidArgumentError("--timeout_s must be >= 1");
  o.timeout = absl::Seconds(timeout_s);
  o.security = security;
  RINGSIDE_ASSIGN_OR_RETURN(TrainResult r, RunDdpWorker(env, o));
  if (env.rank == 0) {
    absl::PrintF("steps: %d, %.0f samples/s (all ranks)\n", r.steps, r.job_samples_per_sec);
    absl::PrintF("test loss: %.4f\n", r.test_loss);
    absl::PrintF("test accuracy: %.4f\n", r.test_accuracy);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTrainVerb(const CommandArgs& args) {
  const std::string strategy = absl::GetFlag(FLAGS_strategy);
  // The job's token and TLS (ps and ddp only; none otherwise): a launched rank's
  // servers and clients use them; a local job's launcher passes the token on (or
  // generates one).
  RpcSecurity security;
  if (strategy == "ps" || strategy == "ddp") {
    RINGSIDE_ASSIGN_OR_RETURN(security, RpcSecurityFromFlags());
  }
  if ((strategy == "ps" || strategy == "ddp") && !InLaunchedJob()) {
    // A local job: one timeline of all its processes' traces, after a failure too.
    const absl::Status job = strategy == "ps" ? RunPs(args, security) : RunLocalDdp(args, security);
    MergeRunTimeline(absl::GetFlag(FLAGS_out));
    return job;
  }
  if (strategy == "ps") return RunPs(args, security);
  if (strategy == "ddp") {
    if (!InLaunchedJob()) return RunLocalDdp(args, security);
    return RunDdpRank(RunConfigFromFlags(), security);
  }
  // Single on an emulated node: this binary again, inside the node (local_job.h); in
  // the launched copy InLaunchedJob() holds and it trains here.
  if (strategy == "single" && !InLaunchedJob()) {
    const LocalJobOptions job = LocalJob(args, security);
    if (WantsEmulatedNode(job) || job.ranks_per_node != 1 || !job.slow_node.empty()) {
      return LaunchLocalSingleJob(job);  // Refuses the placement flags single cannot use.
    }
  }
  // Single, and dp (one process whatever --workers says: its replicas are threads).
  return RunTrainCommand(RunOptionsFromFlags());
}

}  // namespace ringside
