// Which emulated node each process of a local job runs on (`--ranks_per_node=K`) and
// which node is slowed (`--slow_node=R:F`). Pure: nothing is created here;
// network_placement.h builds the nodes a plan describes.
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_NODE_PLAN_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_NODE_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ps_layout.h"
#include "experiments/netem/cpu_share.h"  // SlowNodeSpec, ParseSlowNode.

namespace ringside {

// The placement of a local job's processes. "Local rank" is the launcher's order of
// the processes (launcher.h): PS shards 0..S-1 then workers; DDP ranks 0..N-1.
struct NodePlan {
  int ranks_per_node = 1;
  // node_of[local rank]: the node it runs on.
  std::vector<int> node_of;
  // members[node]: its local ranks, in placement order.
  std::vector<std::vector<int>> members;
  // labels[local rank]: "shard 0", "worker 1", "rank 2".
  std::vector<std::string> labels;
  // roles[node]: "master" if it holds a PS shard (or, colocated, worker 0, which hosts
  // the shards), else "worker" (netem's per-role link overrides).
  std::vector<std::string> roles;
  // The slowed node (-1: none), its factor, and whom --slow_node named ("worker 1").
  int slow_node = -1;
  double slow_factor = 1.0;
  std::string slow_label;

  int num_nodes() const { return static_cast<int>(members.size()); }
  // One line: "nodes: node 0 = shard 0 + worker 0, node 1 = shard 1 + worker 1".
  std::string Summary() const;
};

// DDP (and `ringside launch`): `world` ranks, K consecutive ranks per node (rank r on
// node r / K). InvalidArgument (one line) for world < 1, K < 1, world % K != 0, or a
// slow rank outside [0, world).
absl::StatusOr<NodePlan> PlanDdpNodes(int world, int ranks_per_node, const SlowNodeSpec& slow);

// PS (common/ps_layout.h): S shard processes (local ranks 0..S-1) and N workers
// (S..S+N-1), or, colocated, only the workers (worker 0 hosts every shard); workers'
// summers live in their workers. The processes are put on nodes in the order shard 0,
// worker 0, shard 1, worker 1, ... (paired while both remain, then the rest), K per
// node: with S == N and K == 2, shard i and worker i share node i. InvalidArgument (one
// line) for S < 1 (0 with worker summers) or N < 1, K < 1, processes % K != 0, or a
// slow worker outside [0, N).
absl::StatusOr<NodePlan> PlanPsNodes(const PsLayout& layout, int ranks_per_node, const SlowNodeSpec& slow);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_NODE_PLAN_H_
