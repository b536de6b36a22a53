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
#include "common/ringside.pb.h"
#include "common/rpc_security.h"

namespace ringside {

// What every local job plan needs from the command line.
struct LocalJobOptions {
  // This binary's flags (argv[1..]), passed on to every process unchanged.
  std::vector<std::string> self_args;
  // Emulated links ("" for loopback): netem/network_emulator.h's profile.
  std::string network;
  // CPU share per emulated node ("" for none, "auto", or CPUs per node):
  // netem/cpu_share.h's --node_cpus. "auto": the machine's CPUs / the job's nodes.
  std::string node_cpus;
  // Processes per emulated node (node_plan.h): they share its CPU share and link.
  int ranks_per_node = 1;
  // "" or "R:F": the node of DDP rank R (PS: worker R) gets F x the others' CPU share
  // (node_plan.h's ParseSlowNode); needs node_cpus.
  std::string slow_node;
  // This process's security (--token_file, RINGSIDE_TOKEN): its token is passed on to
  // every process of the job (LaunchOptions::security); empty token: a fresh one.
  RpcSecurity security;
};

// PS: S shard processes (local ranks 0..S-1, labels "shard s") then N workers
// ("worker w"); colocated, only the N workers, worker 0 hosting every shard. Nodes:
// PlanPsNodes (shard i and worker i paired, ranks_per_node per node); a node holding a
// shard has the role "master". Adds --ps_servers=HOST:PORT,... (distinct free ports,
// on each shard's node) to every process's flags. `config` holds the PS fields
// (world_size = workers). Bad placement flags are InvalidArgument (one line) before
// anything starts. Blocks until the job ends; Launch's errors.
absl::Status LaunchLocalPsJob(const RunConfig& config, const LocalJobOptions& options);

// DDP: `workers` ranks ("rank r", nodes of role "worker", ranks_per_node consecutive
// ranks per node), rank 0 hosting the store on a free port (on its node's address
// under emulation). Blocks until the job ends.
absl::Status LaunchLocalDdpJob(int workers, const LocalJobOptions& options);

// `train --strategy=single` on one emulated node: re-runs this binary with the same
// flags as a one-process launched job inside a cgroup with the node_cpus share ("auto":
// the whole machine), its output passed through unprefixed. `network` is not used (one
// process sends nothing). ranks_per_node must be 1, slow_node empty and node_cpus set
// (InvalidArgument, one line, otherwise). Blocks until it ends; the node is removed
// after it (end, failure, SIGINT; after SIGKILL by the next start).
absl::Status LaunchLocalSingleJob(const LocalJobOptions& options);

// True if `options` asks for a CPU share (node_cpus set and not "none"): what makes
// `train --strategy=single` use LaunchLocalSingleJob.
bool WantsEmulatedNode(const LocalJobOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_LOCAL_JOB_H_
