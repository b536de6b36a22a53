// experiments/launch/: starting a job's processes. Door of the folder.
//   launcher.h           `ringside launch`: torchrun-style, N processes with the job
//                        variables (RANK, WORLD_SIZE, MASTER_ADDR, ...), prefixed output,
//                        one failure stops all (or restarts the group)
//   node_rendezvous.h    the launchers of several nodes agreeing on each round of a
//                        job with restarts (node 0's launcher hosts their store)
//   job_spec.h           JobSpec: one training job, typed (strategy, sync mode, backend,
//                        timeout, security, PS layout, emulated nodes), parsed once by
//                        the command line
//   local_job.h          the PS and DDP process plans of `ringside train` on one machine
//   node_plan.h          which process runs on which emulated node (--ranks_per_node,
//                        --slow_node); pure
//   network_placement.h  building those nodes (netem/): cgroup and namespace per node
// The job variables a launched process reads: common/job_env.h (JobEnv).
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_LAUNCH_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_LAUNCH_H_

#include "experiments/launch/job_spec.h"
#include "experiments/launch/launcher.h"
#include "experiments/launch/local_job.h"
#include "experiments/launch/network_placement.h"
#include "experiments/launch/node_plan.h"
#include "experiments/launch/node_rendezvous.h"

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_LAUNCH_H_
