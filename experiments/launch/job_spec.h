// One training job, described once: what the command line asked for, parsed and
// checked there (experiments/cli/job_flags.h) and handed to every role function below
// it. Nothing below the command line reads a flag or parses a job's text again.
//
// The RunConfig (common/ringside.proto) stays what the job's processes compare on the
// wire (the shards at registration, DDP ranks through the store): its string fields
// are written from the typed ones here (WriteTypedFields) and read back only where a
// configuration arrives: ParseJobStrategy, PsLayout::Of, SyncPolicyOf (ps_server/
// server_role.h), BackendNamed, ParseAllReduceAlgorithm.
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_JOB_SPEC_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_JOB_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "common/ps_layout.h"
#include "common/ringside.pb.h"
#include "common/rpc_security.h"
#include "common/run_config.h"
#include "ddp_ring/allreduce_algorithm.h"
#include "experiments/netem/netem.h"
#include "ps_server/consistency_policy.h"

namespace ringside {

enum class JobStrategy {
  kSingle,  // One process.
  kDp,      // DataParallel: replica threads of one process.
  kPs,      // Parameter server: shard and worker processes.
  kDdp,     // DDP ring: one process per rank.
};

// "single", "dp", "ps", "ddp". InvalidArgument "unknown strategy 'foo' (expected
// single, dp, ps or ddp)" otherwise.
absl::StatusOr<JobStrategy> ParseJobStrategy(absl::string_view name);
const char* JobStrategyName(JobStrategy strategy);
// ps and ddp: a job of several processes (launched, with peers, a token, a timeout).
bool IsMultiProcess(JobStrategy strategy);

// The DDP process-group backend.
enum class Backend { kGloo, kNccl };
// "gloo" or "nccl"; nullopt otherwise (ddp_ring's CheckProcessGroupBackend says why).
absl::optional<Backend> BackendNamed(absl::string_view name);
const char* BackendName(Backend backend);

// The emulated nodes of a local job (--network, --node_cpus, --ranks_per_node,
// --slow_node), parsed. Disabled parts emulate nothing.
struct EmulationSpec {
  NetworkProfile network;  // Each node's shaped link; disabled: the host's loopback.
  NodeCpuSpec node_cpus;   // Each node's CPU share; disabled: the whole machine.
  int ranks_per_node = 1;  // Processes per node (launch/node_plan.h).
  SlowNodeSpec slow_node;  // The node whose share is a fraction of the others'.
  // Whether --network, --node_cpus and --slow_node were given at all (a value, even
  // "none"): a job that names one asks for emulated nodes, and a job that cannot have
  // them (single: --slow_node) is refused for naming it.
  bool network_given = false;
  bool node_cpus_given = false;
  bool slow_node_given = false;

  // Whether any emulation flag was given (what makes `launch` and `train
  // --strategy=single` place processes on nodes).
  bool requested() const {
    return network_given || node_cpus_given || ranks_per_node != 1 || slow_node_given;
  }
};

// Parses the four flags' texts (netem/'s grammars). InvalidArgument, one line naming
// the text, for a bad one, checked in the order --slow_node, --network, --node_cpus.
// --ranks_per_node is taken as is (launch/node_plan.h checks it against the job).
absl::StatusOr<EmulationSpec> ParseEmulationSpec(absl::string_view network,
                                                 absl::string_view node_cpus,
                                                 int ranks_per_node,
                                                 absl::string_view slow_node);

// This process's part of a PS job where the command line names it: ps-server's shard
// and address, ps-worker's id, and the shards' addresses where they are given
// (ps-worker; a local job's processes) rather than found through the job's store.
struct PsProcessSpec {
  int shard = 0;                     // ps-server: --shard.
  std::string listen;                // ps-server: --listen, host:port.
  int worker_id = 0;                 // ps-worker: --worker_id.
  std::vector<std::string> servers;  // --ps_servers: host:port of shard 0..S-1, or none.
};

// A training job. Strategy-specific fields hold their defaults for other strategies.
struct JobSpec {
  JobStrategy strategy = JobStrategy::kSingle;
  // run.config: the RunConfig every process must share (the wire form; its strategy,
  // PS and backend fields agree with the typed fields below: WriteTypedFields).
  RunOptions run;
  int workers = 1;    // --workers: ps and ddp workers (ranks), dp replicas.
  PsLayout ps;        // ps: shards, workers, colocated.
  SyncPolicy sync;    // ps: --ps_sync.
  Backend backend = Backend::kGloo;                           // ddp: --backend.
  AllReduceAlgorithm allreduce = AllReduceAlgorithm::kAuto;   // ddp (gloo): --allreduce.
  // ps, ddp: how long a process waits on its peers (--timeout_s).
  absl::Duration timeout = kDefaultPeerTimeout;
  // ps, ddp: the job's token and TLS (--token_file, RINGSIDE_TOKEN, --tls_*); empty
  // token: a local job generates one, a launched process runs unauthenticated.
  RpcSecurity security;
  PsProcessSpec ps_process;  // ps: this process's part, where the command line names it.
  EmulationSpec emulation;   // A local job's nodes (not used inside a launched process).
  std::string cluster;      // --cluster: a preset or profile file; "" for none.
};

// Writes `spec`'s typed fields into `config`: strategy; ps: world_size (the workers),
// ps_shards, ps_colocated, ps_sync (the mode's name) and ps_staleness; dp: world_size.
// Other fields are left as they are (ddp's backend and allreduce hold the flags'
// spellings, BackendName's and AllReduceAlgorithmName's). The readers named at the
// top of this file give each typed field back.
void WriteTypedFields(const JobSpec& spec, RunConfig* config);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_JOB_SPEC_H_
