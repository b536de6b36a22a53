#include "experiments/cluster/node_traffic.h"

#include <algorithm>

namespace ringside {

double RingNicBytesPerStep(int ranks, int ranks_per_node, double model_bytes) {
  if (ranks <= 1 || ranks_per_node >= ranks) return 0;
  const double n = ranks;
  return 2 * (n - 1) / n * model_bytes;
}

double RingIntraNodeBytesPerStep(int ranks, int ranks_per_node, double model_bytes) {
  if (ranks <= 1 || ranks_per_node <= 1) return 0;
  const double n = ranks;
  // Edges inside one node: g - 1 of its g outgoing edges, all g when the ring closes
  // inside the node.
  const int inside = ranks_per_node >= ranks ? ranks : ranks_per_node - 1;
  return inside * 2 * (n - 1) / n * model_bytes;
}

double HierarchicalNicBytesPerStep(int ranks, int ranks_per_node, double model_bytes) {
  const int nodes = std::max(1, ranks / std::max(1, ranks_per_node));
  if (nodes <= 1) return 0;
  const double n = nodes;
  return 2 * (n - 1) / n * model_bytes;
}

double PsWorkerNicBytesPerStep(int ranks_per_node, double model_bytes) {
  return std::max(1, ranks_per_node) * model_bytes;
}

double PsServerNicBytesPerStep(int workers, int shards, int shards_on_node, double model_bytes) {
  if (shards < 1) return 0;
  return static_cast<double>(workers) * model_bytes * shards_on_node / shards;
}

}  // namespace ringside
