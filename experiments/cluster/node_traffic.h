// Bytes through each node's NIC per step when several devices share a node (closed
// forms, docs/cost_model.md "Nodes with several devices"). N ranks, g per node, n = N/g
// nodes, M bytes of gradients. Pure functions.
#ifndef RINGSIDE_EXPERIMENTS_CLUSTER_NODE_TRAFFIC_H_
#define RINGSIDE_EXPERIMENTS_CLUSTER_NODE_TRAFFIC_H_

namespace ringside {

// A ring laid out node by node (ranks g*k .. g*k+g-1 on node k): only one ring edge
// leaves and one enters each node, so each NIC carries what one rank sends,
// 2(N-1)/N x M each way, not g times it. 0 when all ranks share one node.
double RingNicBytesPerStep(int ranks, int ranks_per_node, double model_bytes);

// The same ring's traffic on the intra-node path of one node, each way: the other
// g - 1 edges, (g - 1) x 2(N-1)/N x M (all of it when n = 1: g x ...).
double RingIntraNodeBytesPerStep(int ranks, int ranks_per_node, double model_bytes);

// Hierarchical all-reduce (reduce-scatter inside, all-reduce across n nodes, all-gather
// inside): each NIC carries 2(n-1)/n x M each way (the g ranks M/g each).
double HierarchicalNicBytesPerStep(int ranks, int ranks_per_node, double model_bytes);

// PS: a node of g workers pushes and pulls g x M each way through its NIC.
double PsWorkerNicBytesPerStep(int ranks_per_node, double model_bytes);

// PS: a server node holding S_node of S equal shards receives and sends
// N x M x S_node / S each way.
double PsServerNicBytesPerStep(int workers, int shards, int shards_on_node, double model_bytes);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLUSTER_NODE_TRAFFIC_H_
