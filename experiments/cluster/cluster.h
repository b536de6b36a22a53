// experiments/cluster/: the target cluster an experiment stands for. Door of the folder.
//   profile.h       a cluster profile (cluster.proto, presets/*.textproto): the device's
//                   step, devices per node, NIC and intra-node paths; `--cluster`
//   dilation.h      time-dilated emulation: d = host step / target step, links B / d
//   host_dilation.h the dilation for a job, this host's step measured on a node's share
//   node_layout.h   devices per node as ranks per node: a device's CPU share, the
//                   refusals when a job's ranks do not fill whole nodes
//   node_traffic.h  bytes through each NIC when several devices share a node
// Emulation (netem/) applies what dilation.h computes; the cost model and `simulate`
// (costmodel/) read the same profile; reports (report/) state it.
#ifndef RINGSIDE_EXPERIMENTS_CLUSTER_CLUSTER_H_
#define RINGSIDE_EXPERIMENTS_CLUSTER_CLUSTER_H_

#include "experiments/cluster/dilation.h"
#include "experiments/cluster/host_dilation.h"
#include "experiments/cluster/node_layout.h"
#include "experiments/cluster/node_traffic.h"
#include "experiments/cluster/profile.h"

#endif  // RINGSIDE_EXPERIMENTS_CLUSTER_CLUSTER_H_
