#include "experiments/launch/job_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

constexpr JobStrategy kStrategies[] = {JobStrategy::kSingle, JobStrategy::kDp, JobStrategy::kPs, JobStrategy::kDdp};
constexpr Backend kBackends[] = {Backend::kGloo, Backend::kNccl};

}  // namespace

absl::StatusOr<JobStrategy> ParseJobStrategy(absl::string_view name) {
  for (JobStrategy s : kStrategies) {
    if (name == JobStrategyName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown strategy '%s' (expected single, dp, ps or ddp)", name));
}

const char* JobStrategyName(JobStrategy strategy) {
  switch (strategy) {
    case JobStrategy::kSingle: return "single";
    case JobStrategy::kDp: return "dp";
    case JobStrategy::kPs: return "ps";
    case JobStrategy::kDdp: return "ddp";
  }
  return "?";
}

bool IsMultiProcess(JobStrategy strategy) {
  return strategy == JobStrategy::kPs || strategy == JobStrategy::kDdp;
}

absl::optional<Backend> BackendNamed(absl::string_view name) {
  for (Backend b : kBackends) {
    if (name == BackendName(b)) return b;
  }
  return absl::nullopt;
}

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kGloo: return "gloo";
    case Backend::kNccl: return "nccl";
  }
  return "?";
}

absl::StatusOr<EmulationSpec> ParseEmulationSpec(absl::string_view network,
                                                 absl::string_view node_cpus,
                                                 int ranks_per_node,
                                                 absl::string_view slow_node) {
  EmulationSpec e;
  // The order a local job met them in before they were parsed here: the slow node
  // for the plan, then the links and the shares for the nodes.
  RINGSIDE_ASSIGN_OR_RETURN(e.slow_node, ParseSlowNode(slow_node));
  RINGSIDE_ASSIGN_OR_RETURN(e.network, ParseNetworkProfile(network));
  RINGSIDE_ASSIGN_OR_RETURN(e.node_cpus, ParseNodeCpus(node_cpus));
  e.ranks_per_node = ranks_per_node;
  e.network_given = !network.empty();
  e.node_cpus_given = !node_cpus.empty();
  e.slow_node_given = !slow_node.empty();
  return e;
}

void WriteTypedFields(const JobSpec& spec, RunConfig* config) {
  config->set_strategy(JobStrategyName(spec.strategy));
  switch (spec.strategy) {
    case JobStrategy::kSingle:
      break;
    case JobStrategy::kDp:
      config->set_world_size(spec.workers);
      break;
    case JobStrategy::kPs:
      config->set_world_size(spec.ps.workers());
      config->set_ps_shards(spec.ps.dedicated_shards());
      config->set_ps_colocated(spec.ps.colocated());
      config->set_ps_worker_summers(spec.ps.worker_summers());
      config->set_ps_sync(SyncModeName(spec.sync.mode));
      config->set_ps_staleness(spec.sync.staleness);
      break;
    case JobStrategy::kDdp:
      // The backend and the all-reduce travel as the flags spell them, which are
      // their names (BackendName, AllReduceAlgorithmName): the command line writes
      // them before it checks them, so that the configuration's checks name them.
      break;
  }
}

}  // namespace ringside
