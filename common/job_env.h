// The job environment contract: where this process stands in a launched job, as its
// launcher tells it through environment variables. Read by every distributed role:
// DDP ranks, PS shards and workers, benches.
//
// Launchers understood, first match wins (an inner launcher's variables come before
// those it inherited from an outer one, e.g. mpirun inside a Slurm allocation):
//   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE       `ringside launch`, torchrun
//   OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}    Open MPI's mpirun
//   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS MPICH's Hydra (mpiexec)
//   PMIX_RANK (+ WORLD_SIZE, which PMIx does not export) PMIx launchers (prun, ...)
//   SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURM_NTASKS, SLURM_LOCALID,
//   SLURM_STEP_TASKS_PER_NODE or SLURM_NTASKS_PER_NODE at SLURM_NODEID
//                                                        srun (a job step: SLURM_STEP_ID
//                                                        set; a batch script's own
//                                                        SLURM_PROCID does not count)
// Where the store is (rank 0's host): MASTER_ADDR and MASTER_PORT from the environment
// when set. Otherwise, under srun only, the first host of SLURM_STEP_NODELIST (or
// SLURM_JOB_NODELIST; task 0 runs there under Slurm's default block distribution) and
// port 20000 + SLURM_JOB_ID % 20000 (so two ringside steps running at once in one
// allocation need MASTER_PORT exported); under the others an error names what to
// export.
// The run id (the job's key space in the store): RINGSIDE_RUN_ID, else
// TORCHELASTIC_RUN_ID (torchrun), else "slurm-<SLURM_JOB_ID>.<SLURM_STEP_ID>", else
// PMIX_NAMESPACE, else "default".
#ifndef RINGSIDE_COMMON_JOB_ENV_H_
#define RINGSIDE_COMMON_JOB_ENV_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringside {

// The job-placement variables of one process.
struct JobEnv {
  int rank = 0;              // This process in [0, world_size).
  int world_size = 1;        // Processes in the job.
  int local_rank = 0;        // This process on its node (default: rank).
  int local_world_size = 1;  // Processes on this node (default: world_size).
  std::string master_addr;   // The host of the job's store (rank 0 or torchrun's agent).
  int master_port = 0;
  std::string run_id;        // The job's key space in the store (see above).
  // Who placed this process, for messages: "ringside launch", "torchrun",
  // "RANK/WORLD_SIZE", "Open MPI", "MPICH (Hydra)", "PMIx" or "Slurm (srun)".
  std::string launcher;
  // torchrun's static rendezvous: its agent already hosts a c10d TCPStore at
  // MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), which ranks join
  // instead of hosting their own (ddp_ring/job_store.h).
  bool agent_store = false;
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT: torchrun's restarts so far.
};

// Reads this process's place from the variables above. InvalidArgument, one line
// naming the variable, if one is missing, not an integer or out of range (e.g.
// "MASTER_ADDR is not set (Open MPI does not say where rank 0 runs: export
// MASTER_ADDR and MASTER_PORT)"). Thread-compatible (reads the environment only).
absl::StatusOr<JobEnv> ReadJobEnv();

// True if this process is one of a launched job's: RANK is set, or one of the other
// launchers above placed it in a job of more than one process (a single-task srun or
// mpirun runs ringside as if started by hand, so that it launches its own ranks).
bool InLaunchedJob();

}  // namespace ringside

#endif  // RINGSIDE_COMMON_JOB_ENV_H_
