#include "experiments/launch/node_plan.h"

#include <cmath>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/ps_layout.h"

namespace ringside {
namespace {

// Fills everything but roles and the slow node from the processes' placement order
// (`order[i]` is the local rank placed i-th) and their labels.
absl::StatusOr<NodePlan> Place(const std::vector<int>& order, std::vector<std::string> labels,
                               int ranks_per_node, absl::string_view what) {
  const int n = static_cast<int>(order.size());
  if (ranks_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ranks_per_node must be >= 1, got ", ranks_per_node));
  }
  if (n % ranks_per_node != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ranks_per_node=", ranks_per_node, " does not divide the ", n, " ", what,
        " into whole nodes"));
  }
  NodePlan plan;
  plan.ranks_per_node = ranks_per_node;
  plan.labels = std::move(labels);
  plan.node_of.assign(n, 0);
  plan.members.assign(n / ranks_per_node, {});
  for (int i = 0; i < n; ++i) {
    plan.node_of[order[i]] = i / ranks_per_node;
    plan.members[i / ranks_per_node].push_back(order[i]);
  }
  return plan;
}

void MarkSlow(const SlowNodeSpec& slow, int local_rank, NodePlan* plan) {
  if (!slow.enabled) return;
  plan->slow_node = plan->node_of[local_rank];
  plan->slow_factor = slow.factor;
  plan->slow_label = plan->labels[local_rank];
}

}  // namespace

std::string NodePlan::Summary() const {
  std::vector<std::string> nodes;
  for (int node = 0; node < num_nodes(); ++node) {
    std::vector<std::string> names;
    for (int lr : members[node]) names.push_back(labels[lr]);
    nodes.push_back(absl::StrCat("node ", node, " = ", absl::StrJoin(names, " + ")));
  }
  return absl::StrCat("nodes: ", absl::StrJoin(nodes, ", "));
}

absl::StatusOr<NodePlan> PlanDdpNodes(int world, int ranks_per_node, const SlowNodeSpec& slow) {
  if (world < 1) return absl::InvalidArgumentError(absl::StrCat("--workers must be >= 1, got ", world));
  if (slow.enabled && slow.rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat("--slow_node=", slow.rank, ":", slow.factor,
                                                   ": there is no rank ", slow.rank, " (ranks 0 to ",
                                                   world - 1, ")"));
  }
  std::vector<int> order;
  std::vector<std::string> labels;
  for (int r = 0; r < world; ++r) {
    order.push_back(r);
    labels.push_back(absl::StrCat("rank ", r));
  }
  absl::StatusOr<NodePlan> plan = Place(order, std::move(labels), ranks_per_node, "ranks");
  if (!plan.ok()) return plan;
  plan->roles.assign(plan->num_nodes(), "worker");
  MarkSlow(slow, slow.rank, &*plan);
  return plan;
}

absl::StatusOr<NodePlan> PlanPsNodes(const PsLayout& layout, int ranks_per_node, const SlowNodeSpec& slow) {
  const int shards = layout.dedicated_shards(), workers = layout.workers();
  if (shards < (layout.worker_summers() ? 0 : 1) || workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a PS job needs --ps_shards >= 1 and --workers >= 1, got ", shards, " and ", workers));
  }
  if (slow.enabled && slow.rank >= workers) {
    return absl::InvalidArgumentError(absl::StrCat("--slow_node=", slow.rank, ":", slow.factor,
                                                   ": there is no worker ", slow.rank,
                                                   " (workers 0 to ", workers - 1, ")"));
  }
  std::vector<std::string> labels;
  for (int r = 0; r < layout.num_processes(); ++r) {
    labels.push_back(layout.IsShardProcess(r) ? absl::StrCat("shard ", r)
                                              : absl::StrCat("worker ", layout.WorkerOf(r)));
  }
  // Shard process i and worker i paired up, then the rest.
  std::vector<int> order;
  for (int i = 0; i < std::max(layout.shard_processes(), workers); ++i) {
    if (layout.IsShardProcess(i)) order.push_back(i);
    if (i < workers) order.push_back(layout.RankOfWorker(i));
  }
  absl::StatusOr<NodePlan> plan =
      Place(order, std::move(labels), ranks_per_node,
            layout.shard_processes() == 0
                ? "workers"
                : absl::StrCat("processes (", shards, " shards + ", workers, " workers)"));
  if (!plan.ok()) return plan;
  plan->roles.assign(plan->num_nodes(), "worker");
  // The servers' nodes (not the workers' beside their own summers).
  for (int s = 0; s < shards; ++s) plan->roles[plan->node_of[layout.RankHostingShard(s)]] = "master";
  MarkSlow(slow, layout.RankOfWorker(slow.rank), &*plan);
  return plan;
}

}  // namespace ringside
