// experiments/netem/: an emulated cluster network on one machine. Door of the folder.
//   bandwidth.h         the one grammar for link rates (flags, specs) and their formats
//   network_emulator.h  `--network=bw=1gbit,delay=0.5ms`: a network namespace per node,
//                       veth + tc-shaped links to a software switch (docs/network.md)
//   cpu_share.h         `--node_cpus=C|auto`: a cgroup with a CPU quota per node
// Placing a job's ranks on the nodes is launch/'s job (launch/network_placement.h).
#ifndef RINGSIDE_EXPERIMENTS_NETEM_NETEM_H_
#define RINGSIDE_EXPERIMENTS_NETEM_NETEM_H_

#include "experiments/netem/bandwidth.h"
#include "experiments/netem/cpu_share.h"
#include "experiments/netem/network_emulator.h"

#endif  // RINGSIDE_EXPERIMENTS_NETEM_NETEM_H_
