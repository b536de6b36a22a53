// The process plans of a training job run on this one machine (`ringside train
// --strategy=ps|ddp` outside a launched job): which processes, in which roles, with
// which labels, on which emulated nodes. Each process re-runs this binary with the
// same flags and finds its role from the job environment the launcher sets. Each
// process gets one BLAS thread (launcher.h), quietly, unless --threads or
// OMP_NUM_THREADS / OPENBLAS_NUM_THREADS choose otherwise.
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_LOCAL_JOB_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_LOCAL_JOB_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/ringside.pb.h"

namespace ringside {

// What every local job plan needs from the command line.
struct LocalJobOptions {
  // This binary's flags (argv[1..]), passed on to every process unchanged.
  std::vector<std::string> self_args;
  // Emulated links ("" for loopback): netem/network_emulator.h's profile.
  std::string network;
  // CPU share per emulated node ("" for none, "auto", or CPUs per node):
  // netem/cpu_share.h's --node_cpus.
  std::string node_cpus;
};

// PS: S shard processes (local ranks 0..S-1, labels "shard s", nodes of role "master")
// then N workers ("worker w"); colocated, only the N workers, worker 0 hosting every
// shard on a "master" node. Adds --ps_servers=HOST:PORT,... (free ports, on each
// shard's node) to every process's flags. `config` holds the PS fields (world_size =
// workers). Blocks until the job ends; Launch's errors.
absl::Status LaunchLocalPsJob(const RunConfig& config, const LocalJobOptions& options);

// DDP: `workers` ranks ("rank r", nodes of role "worker"), rank 0 hosting the store on
// a free port (on its own node under emulation). Blocks until the job ends.
absl::Status LaunchLocalDdpJob(int workers, const LocalJobOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_LOCAL_JOB_H_
