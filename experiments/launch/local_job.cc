#include "experiments/launch/local_job.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "experiments/launch/launcher.h"
#include "experiments/launch/network_placement.h"
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
  RINGSIDE_ASSIGN_OR_RETURN(std::string self, SelfExePath());
  lo.command.push_back(self);
  lo.command.insert(lo.command.end(), options.self_args.begin(), options.self_args.end());
  return lo;
}

}  // namespace

absl::Status LaunchLocalPsJob(const RunConfig& c, const LocalJobOptions& options) {
  const int shards = c.ps_shards();
  const bool colocated = c.ps_colocated();
  RINGSIDE_ASSIGN_OR_RETURN(
      LaunchOptions lo, SelfLaunch(c.world_size() + (colocated ? 0 : shards), options));
  // Emulated links: every process on its own node; the shards' nodes (or worker 0's,
  // colocated) have the role "master" for per-role overrides.
  std::vector<std::string> roles;
  for (int s = 0; s < (colocated ? 0 : shards); ++s) roles.push_back("master");
  for (int w = 0; w < c.world_size(); ++w) roles.push_back(colocated && w == 0 ? "master" : "worker");
  ScopedSignalCatcher signals;  // An interrupt must not skip the nodes' teardown.
  RINGSIDE_ASSIGN_OR_RETURN(EmulatedNodes nodes,
                            PlaceRanksOnNodes(options.network, options.node_cpus, roles, &lo));
  if (signals.caught() != 0) return absl::CancelledError("interrupted while setting up the nodes");
  const EmulatedNetwork* net = nodes.network.get();
  std::string servers;
  for (int s = 0; s < shards; ++s) {
    RINGSIDE_ASSIGN_OR_RETURN(int port, PickFreePort());
    // The node that hosts shard s: its own, or worker 0's when colocated.
    const std::string host = net == nullptr ? "127.0.0.1" : net->address(colocated ? 0 : s);
    absl::StrAppend(&servers, s > 0 ? "," : "", host, ":", port);
    if (!colocated) lo.labels.push_back(absl::StrCat("shard ", s));
  }
  for (int w = 0; w < c.world_size(); ++w) lo.labels.push_back(absl::StrCat("worker ", w));
  lo.command.push_back(absl::StrCat("--ps_servers=", servers));
  return Launch(lo);
}

absl::Status LaunchLocalDdpJob(int workers, const LocalJobOptions& options) {
  if (workers < 1) return absl::InvalidArgumentError(absl::StrCat("--workers must be >= 1, got ", workers));
  RINGSIDE_ASSIGN_OR_RETURN(LaunchOptions lo, SelfLaunch(workers, options));
  // Emulated nodes: every rank on its own node; rank 0's node hosts the store.
  ScopedSignalCatcher signals;  // An interrupt must not skip the nodes' teardown.
  RINGSIDE_ASSIGN_OR_RETURN(
      EmulatedNodes nodes,
      PlaceRanksOnNodes(options.network, options.node_cpus,
                        std::vector<std::string>(workers, "worker"), &lo));
  if (signals.caught() != 0) return absl::CancelledError("interrupted while setting up the nodes");
  const EmulatedNetwork* net = nodes.network.get();
  if (net != nullptr) {
    RINGSIDE_ASSIGN_OR_RETURN(lo.master_port, PickFreePort());  // Free in rank 0's namespace.
    lo.master_addr = net->address(0);
    for (int r = 0; r < workers; ++r) {
      lo.rank_env.push_back({absl::StrCat("RINGSIDE_HOSTNAME=", net->address(r))});
    }
  }
  return Launch(lo);
}

}  // namespace ringside
