// The job's store, as every distributed role of a launched job joins it (DDP ranks,
// PS roles, the all-reduce bench): the one place that decides who hosts it.
#ifndef RINGSIDE_DDP_RING_JOB_STORE_H_
#define RINGSIDE_DDP_RING_JOB_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/job_env.h"
#include "common/rpc_security.h"
#include "ddp_ring/store.h"

namespace ringside {

// Joins the store of the job `env` describes:
//   - torchrun's static rendezvous (env.agent_store): torchrun's agent already hosts a
//     c10d TCPStore at MASTER_ADDR:MASTER_PORT; every rank connects to it
//     (ConnectTorchStore), under the key prefix torch's own workers use there,
//     "/worker/attempt_<restart_count>", so a restarted group never reads the keys of
//     the one before;
//   - otherwise (`ringside launch`, torchrun --standalone or --rdzv_backend=c10d,
//     Slurm, MPI): rank 0 hosts ringside's StoreServer at MASTER_ADDR:MASTER_PORT and
//     every rank, rank 0 too, connects to it.
// `security` is the security rank 0's StoreServer listens with and every rank's client
// connects with (empty token: unauthenticated, which rank 0 warns about on stderr);
// torchrun's agent store has none. Waits up to `timeout` for the store to come up. The
// returned store owns rank 0's server, so rank 0 must keep it until the other ranks
// are done with it. Errors name the rank and the address (e.g. "rank 0: hosting the
// store: ... 127.0.0.1:29500").
// The deadline of one store call (beyond what a blocking wait asks for) in a job whose
// peers time out after `timeout`: timeout / 4, clamped to [1 s, 10 s]. A healthy store
// answers in milliseconds; a stopped (SIGSTOP) or wedged store host is then noticed,
// and named, well within 2 x timeout of the failure that made a rank look.
absl::Duration StoreRpcTimeout(absl::Duration timeout);

absl::StatusOr<std::unique_ptr<Store>> JoinJobStore(const JobEnv& env,
                                                    const RpcSecurity& security,
                                                    absl::Duration timeout);

// This process's address as the job's other processes reach it (to listen on and to
// publish): RINGSIDE_HOSTNAME if set; loopback when the store is on loopback (a
// single-node job); else this host's name.
std::string ReachableAddress(const JobEnv& env);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_JOB_STORE_H_
