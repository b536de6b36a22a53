// The process plans of a training job run on this one machine (`ringside train
// --strategy=ps|ddp` outside a launched job, and `--strategy=single` on an emulated
// node): which processes, in which roles, with which labels, on which emulated nodes.
// Each process re-runs this binary with the same flags and finds its role from the job
// environment the launcher sets. Each process gets one BLAS thread (launcher.h),
// quietly, unless --threads or OMP_NUM_THREADS / OPENBLAS_NUM_THREADS choose otherwise.
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_LOCAL_JOB_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_LOCAL_JOB_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/ps_layout.h"
#include "common/rpc_security.h"
#include "experiments/launch/job_spec.h"

namespace ringside {

// What every local job plan needs from the command line.
struct LocalJobOptions {
  // This binary's flags (argv[1..]), passed on to every process unchanged.
  std::vector<std::string> self_args;
  // The emulated nodes (job_spec.h): links, CPU share, ranks per node, slow node.
  EmulationSpec emulation;
  // This process's security (--token_file, RINGSIDE_TOKEN): its token is passed on to
  // every process of the job (LaunchOptions::security); empty token: a fresh one.
  RpcSecurity security;
};

// PS: the processes of `layout` (common/ps_layout.h: S shard processes, labels "shard
// s", then N workers, "worker w"; colocated, only the workers, worker 0 hosting every
// shard). Nodes: PlanPsNodes (shard i and worker i paired, ranks_per_node per node); a
// node holding a shard has the role "master". Adds --ps_servers=HOST:PORT,...
// (distinct free ports, on the node of each shard's host) to every process's flags.
// Bad placement flags are InvalidArgument (one line) before anything starts. Blocks
// until the job ends; Launch's errors.
absl::Status LaunchLocalPsJob(const PsLayout& layout, const LocalJobOptions& options);

// DDP: `workers` ranks ("rank r", nodes of role "worker", ranks_per_node consecutive
// ranks per node), rank 0 hosting the store on a free port (on its node's address
// under emulation). Blocks until the job ends.
absl::Status LaunchLocalDdpJob(int workers, const LocalJobOptions& options);

// `train --strategy=single` on one emulated node: re-runs this binary with the same
// flags as a one-process launched job inside a cgroup with the node_cpus share ("auto":
// the whole machine), its output passed through unprefixed. The network is not used
// (one process sends nothing). ranks_per_node must be 1, no slow node given and
// node_cpus enabled (InvalidArgument, one line, otherwise). Blocks until it ends; the
// node is removed after it (end, failure, SIGINT; after SIGKILL by the next start).
absl::Status LaunchLocalSingleJob(const LocalJobOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_LOCAL_JOB_H_
