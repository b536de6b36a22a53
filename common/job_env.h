// The job environment contract: where this process stands in a launched job, as
// torchrun (and `ringside launch`, which follows it) tells it through environment
// variables. Read by every distributed role: DDP ranks, PS shards and workers, benches.
#ifndef RINGSIDE_COMMON_JOB_ENV_H_
#define RINGSIDE_COMMON_JOB_ENV_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringside {

// The job-placement variables of one process.
struct JobEnv {
  int rank = 0;              // RANK: this process in [0, world_size).
  int world_size = 1;        // WORLD_SIZE: processes in the job.
  int local_rank = 0;        // LOCAL_RANK: this process on its node (default: rank).
  int local_world_size = 1;  // LOCAL_WORLD_SIZE (default: world_size).
  std::string master_addr;   // MASTER_ADDR: the host of rank 0 (the store).
  int master_port = 0;       // MASTER_PORT.
  std::string run_id;        // RINGSIDE_RUN_ID, or "default": the job's key space.
};

// Reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (required), LOCAL_RANK,
// LOCAL_WORLD_SIZE and RINGSIDE_RUN_ID (optional) from this process's environment.
// InvalidArgument naming the variable if one is missing or bad. Thread-compatible
// (reads the environment only).
absl::StatusOr<JobEnv> ReadJobEnv();

// True if RANK is set (this process is one of a launched job's).
bool InLaunchedJob();

}  // namespace ringside

#endif  // RINGSIDE_COMMON_JOB_ENV_H_
