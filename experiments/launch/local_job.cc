#include "experiments/launch/local_job.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc_security.h"
#include "common/status_macros.h"
#include "experiments/launch/launcher.h"
#include "experiments/launch/network_placement.h"
#include "experiments/launch/node_plan.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

// Launch options for `nproc` copies of this binary with `options.self_args`.
absl::StatusOr<LaunchOptions> SelfLaunch(int nproc, const LocalJobOptions& options) {
  LaunchOptions lo;
  lo.nproc_per_node = nproc;
  lo.master_addr = "127.0.0.1";
  lo.master_port = 0;  // A free port, never a fixed one.
  // One BLAS thread per process unless --threads or the environment says otherwise;
  // `train` keeps its output to the job's own lines.
  lo.announce_blas_threads = false;
  // The token this process was given (--token_file, RINGSIDE_TOKEN), else a fresh one.
  lo.security = options.security;
  RINGSIDE_ASSIGN_OR_RETURN(std::string self, SelfExePath());
  lo.command.push_back(self);
  lo.command.insert(lo.command.end(), options.self_args.begin(), options.self_args.end());
  return lo;
}

}  // namespace

absl::Status LaunchLocalPsJob(const PsLayout& layout, const LocalJobOptions& options) {
  const EmulationSpec& e = options.emulation;
  RINGSIDE_ASSIGN_OR_RETURN(NodePlan plan, PlanPsNodes(layout, e.ranks_per_node, e.slow_node));
  RINGSIDE_ASSIGN_OR_RETURN(LaunchOptions lo, SelfLaunch(layout.num_processes(), options));
  lo.labels = plan.labels;
  ScopedSignalCatcher signals;  // An interrupt must not skip the nodes' teardown.
  RINGSIDE_ASSIGN_OR_RETURN(EmulatedNodes nodes, PlaceRanksOnNodes(e.network, e.node_cpus, plan, &lo));
  if (signals.caught() != 0) return absl::CancelledError("interrupted while setting up the nodes");
  std::string servers;
  // Held until the job ends, so that nothing else takes a port before its shard
  // listens; shards of one node share its address, and held ports are distinct.
  std::vector<ReservedPort> ports;
  for (int s = 0; s < layout.shards(); ++s) {
    RINGSIDE_ASSIGN_OR_RETURN(ReservedPort port, ReserveFreePort());
    const std::string host = nodes.address_of(layout.RankHostingShard(s));
    absl::StrAppend(&servers, s > 0 ? "," : "", host, ":", port.port());
    ports.push_back(std::move(port));
  }
  lo.command.push_back(absl::StrCat("--ps_servers=", servers));
  return Launch(lo);
}

absl::Status LaunchLocalDdpJob(int workers, const LocalJobOptions& options) {
  if (workers < 1) return absl::InvalidArgumentError(absl::StrCat("--workers must be >= 1, got ", workers));
  const EmulationSpec& e = options.emulation;
  RINGSIDE_ASSIGN_OR_RETURN(NodePlan plan, PlanDdpNodes(workers, e.ranks_per_node, e.slow_node));
  RINGSIDE_ASSIGN_OR_RETURN(LaunchOptions lo, SelfLaunch(workers, options));
  // Rank 0's node hosts the store.
  ScopedSignalCatcher signals;  // An interrupt must not skip the nodes' teardown.
  RINGSIDE_ASSIGN_OR_RETURN(EmulatedNodes nodes, PlaceRanksOnNodes(e.network, e.node_cpus, plan, &lo));
  if (signals.caught() != 0) return absl::CancelledError("interrupted while setting up the nodes");
  std::optional<ReservedPort> master_port;  // Held until the job ends.
  if (nodes.network != nullptr) {
    RINGSIDE_ASSIGN_OR_RETURN(master_port, ReserveFreePort());  // Free in rank 0's namespace.
    lo.master_port = master_port->port();
    lo.master_addr = nodes.address_of(0);
    // Ranks of one node share its address; each binds its own free port there.
    for (int r = 0; r < workers; ++r) {
      lo.rank_env.push_back({absl::StrCat("RINGSIDE_HOSTNAME=", nodes.address_of(r))});
    }
  }
  return Launch(lo);
}

absl::Status LaunchLocalSingleJob(const LocalJobOptions& options) {
  const EmulationSpec& e = options.emulation;
  if (e.ranks_per_node != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ranks_per_node=", e.ranks_per_node,
        ": --strategy=single is one process on one node (use --ranks_per_node=1)"));
  }
  if (e.slow_node.enabled) {
    return absl::InvalidArgumentError(
        "--slow_node needs --strategy=ps or ddp (a single process has no other nodes to be "
        "slower than)");
  }
  if (!e.node_cpus.enabled) {
    return absl::InvalidArgumentError("--strategy=single runs on an emulated node only with --node_cpus");
  }
  RINGSIDE_ASSIGN_OR_RETURN(NodePlan plan, PlanDdpNodes(1, 1, e.slow_node));
  plan.labels = {"single"};
  RINGSIDE_ASSIGN_OR_RETURN(LaunchOptions lo, SelfLaunch(1, options));
  lo.labels = {"single"};
  lo.prefix_output = false;  // The single job's own lines, as without emulation.
  ScopedSignalCatcher signals;  // An interrupt must not skip the node's teardown.
  RINGSIDE_ASSIGN_OR_RETURN(EmulatedNodes node,
                            PlaceRanksOnNodes(NetworkProfile(), e.node_cpus, plan, &lo));
  if (signals.caught() != 0) return absl::CancelledError("interrupted while setting up the node");
  return Launch(lo);
}

}  // namespace ringside
