// How a cluster's devices sit on a job's emulated nodes: a device is a rank (one
// process), and a profile's devices_per_node ranks share one node: its CPU share, its
// NIC (the node's veth) and its loopback (the intra-node path). docs/cluster.md,
// "Devices per node". Pure: nothing is measured or created here.
#ifndef RINGSIDE_EXPERIMENTS_CLUSTER_NODE_LAYOUT_H_
#define RINGSIDE_EXPERIMENTS_CLUSTER_NODE_LAYOUT_H_

#include <string>

#include "absl/status/statusor.h"
#include "experiments/cluster/profile.h"

namespace ringside {

// The precision a CPU share travels with (`--node_cpus` as decimal text): shares are
// rounded down to it, so that K of them never ask for more than the node holds.
inline constexpr double kCpuShareResolution = 1e-4;

// One device's CPU share on a node of `node_cpus` holding `devices_per_node` ranks
// that compute at once (BSP): node_cpus / devices_per_node, rounded down to
// kCpuShareResolution (`node_cpus` itself for one device per node). The host step of a dilation is measured on it, the single
// baseline of a matrix runs on it, and the cost model computes each rank on it
// (node_cpus / ranks_per_node). 0 when node_cpus is 0 (no share: the machine).
double DeviceCpus(double node_cpus, int devices_per_node);

// The ranks per node of a job on `profile`: its devices_per_node. `processes` counts
// the job's processes, described by `processes_text` ("3 DDP ranks", "5 PS processes
// (1 shard + 4 workers)"); `requested` is a ranks_per_node the user gave, 0 for none,
// named `requested_name` ("--ranks_per_node", "strategy ddp's ranks_per_node").
// InvalidArgument, one line naming both numbers, when `requested` differs from the
// profile's devices per node or `processes` is not a multiple of it.
absl::StatusOr<int> ClusterRanksPerNode(const ClusterProfile& profile, int processes,
                                        const std::string& processes_text, int requested,
                                        const std::string& requested_name);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLUSTER_NODE_LAYOUT_H_
