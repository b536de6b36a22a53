#include "experiments/cli/job_flags.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/dataset.h"
#include "common/model.h"
#include "common/ops_factory.h"
#include "common/ps_placement.h"
#include "common/rpc_security.h"
#include "common/run_config.h"
#include "common/status_macros.h"
#include "ddp_ring/process_group_factory.h"
#include "experiments/cli/command.h"
#include "ps_server/ps_server.h"

namespace ringside {
namespace {

// Teaching bugs, canonical (sorted, each once) so that every rank's list compares
// equal; ValidateRunConfig checks the names.
std::string CanonicalBugs(const std::string& list) {
  std::vector<std::string> bugs = absl::StrSplit(list, ',', absl::SkipWhitespace());
  for (std::string& b : bugs) b = std::string(absl::StripAsciiWhitespace(b));
  std::sort(bugs.begin(), bugs.end());
  bugs.erase(std::unique(bugs.begin(), bugs.end()), bugs.end());
  return absl::StrJoin(bugs, ",");
}

// The RunConfig fields every strategy shares, and the strategy's own fields that are
// not typed in the JobSpec (WriteTypedFields adds those). DDP's backend and
// all-reduce keep the flags' spellings (their names), so that ValidateRunConfig names
// what was given.
RunConfig BaseConfig(const JobFlags& f, JobStrategy strategy) {
  RunConfig c;
  c.set_strategy(JobStrategyName(strategy));
  c.set_model(f.model);
  c.set_dataset(f.dataset);
  c.set_epochs(f.epochs);
  c.set_max_steps(f.steps);
  c.set_batch(f.batch);
  c.set_lr(static_cast<float>(f.lr));
  c.set_momentum(static_cast<float>(f.momentum));
  c.set_weight_decay(static_cast<float>(f.weight_decay));
  c.set_nesterov(f.nesterov);
  c.set_seed(f.seed);
  c.set_threads(f.threads);
  c.set_device(f.device);
  c.set_precision(f.precision);
  c.set_drop_last(f.drop_last);
  c.set_grad_accum(f.grad_accum);
  c.set_prefetch(f.prefetch);
  // Any strategy, so that ValidateRunConfig names what --compress needs.
  c.set_compress(f.compress == "none" ? "" : f.compress);
  if (strategy == JobStrategy::kDdp) {
    c.set_backend(f.backend);
    c.set_bucket_cap_bytes(static_cast<int64_t>(f.bucket_cap_mb * (1 << 20)));
    c.set_first_bucket_bytes(static_cast<int64_t>(f.first_bucket_mb * (1 << 20)));
    c.set_overlap(f.overlap);
    c.set_allreduce(f.allreduce);
  }
  if (strategy == JobStrategy::kDp) c.set_dp_interpreter_lock(f.dp_interpreter_lock);
  if (strategy == JobStrategy::kPs) {
    c.set_ps_chunk_bytes(int64_t{f.ps_chunk_kb} * 1024);
    c.set_ps_min_workers(f.ps_min_workers);  // Elastic PS (issue 23).
    // Unset for the default (TCP), so configurations built elsewhere compare equal;
    // with --tls_* and no --ps_transport, gRPC's streams, the encrypted data plane.
    const bool tls = !f.tls_cert.empty() || !f.tls_key.empty() || !f.tls_ca.empty();
    SetPsTransport(f.ps_transport.empty() && tls ? kPsTransportGrpc : f.ps_transport, &c);
    // Likewise unset for the default placement.
    if (!f.ps_placement.empty() && f.ps_placement != kPsPlacementBalanced) c.set_ps_placement(f.ps_placement);
    // And for the default mode.
    if (!f.ps_mode.empty() && f.ps_mode != kPsModeOptimizer) c.set_ps_mode(f.ps_mode);
  }
  c.set_bugs(CanonicalBugs(f.bug));
  // Numerical safety (issue 23); ValidateRunConfig checks the value. The default is
  // left unset (empty means stop), so configurations built elsewhere compare equal.
  if (f.nan_policy != kNanPolicyStop) c.set_nan_policy(f.nan_policy);
  return c;
}

RunOptions RunOptionsOf(const JobFlags& f, JobStrategy strategy) {
  RunOptions o;
  o.config = BaseConfig(f, strategy);
  o.out_dir = f.out;
  o.resume = f.resume;
  o.checkpoint_every = f.checkpoint_every;
  o.keep_checkpoints = f.keep_checkpoints;
  o.eval_batch = f.eval_batch;
  return o;
}

// A CUDA device in a build without CUDA, refused before any worker or rank starts.
absl::Status CheckDeviceBuiltFor(const RunConfig& c) {
  RINGSIDE_ASSIGN_OR_RETURN(DeviceSpec device, ParseDevice(c.device()));
  return CheckDeviceBuilt(device.kind);
}

// --timeout_s of a job with peers.
absl::Status SetTimeout(const JobFlags& f, JobSpec* job) {
  if (f.timeout_s < 1) return absl::InvalidArgumentError("--timeout_s must be >= 1");
  job->timeout = absl::Seconds(f.timeout_s);
  return absl::OkStatus();
}

// InvalidArgument "--NAME=V is outside [0, --LIMIT_NAME=L)" unless 0 <= V < L.
absl::Status CheckIndexFlag(const char* name, int value, const char* limit_name, int limit) {
  if (value >= 0 && value < limit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("--%s=%d is outside [0, --%s=%d)", name, value, limit_name, limit));
}

// Every PS process's checks, before anything is started or loaded: the layout, the
// sync mode, the chunk size, the configuration, the device, the timeout.
// A whole-tensor placement needs a tensor for every shard: checked before any process
// starts, on the model built for Fashion-MNIST's shape (the tensors' count does not
// depend on the input's shape; where the model does not build so, the shards check).
absl::Status CheckPlacementFits(const RunConfig& config) {
  RINGSIDE_ASSIGN_OR_RETURN(const PsPlacement placement, ParsePsPlacement(config.ps_placement()));
  if (placement == PsPlacement::kBalanced) return absl::OkStatus();
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 0));
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(config.model(), Shape{1, 28, 28}, 10, ops.get());
  if (!model.ok()) return absl::OkStatus();
  std::vector<int64_t> tensors;
  for (const ParamRange& t : (*model)->TensorRanges()) tensors.push_back(t.size);
  return PsPartition::Create(tensors, PsLayout::Of(config).shards(), placement).status();
}

absl::Status SetPsJob(const JobFlags& f, JobSpec* job) {
  if (f.workers < 1) return absl::InvalidArgumentError(absl::StrFormat("--workers must be >= 1, got %d", f.workers));
  // With a summer in each worker the dedicated servers may be none (BytePS's k = 0).
  const int min_shards = f.ps_worker_summers ? 0 : 1;
  if (f.ps_shards < min_shards) {
    return absl::InvalidArgumentError(absl::StrFormat("--ps_shards must be >= %d, got %d", min_shards, f.ps_shards));
  }
  RINGSIDE_ASSIGN_OR_RETURN(job->sync, ParseSyncPolicy(f.ps_sync));
  if (f.ps_chunk_kb < 1 || f.ps_chunk_kb > 65536) {
    return absl::InvalidArgumentError(absl::StrFormat("--ps_chunk_kb must be in [1, 65536], got %d", f.ps_chunk_kb));
  }
  job->ps = PsLayout(f.ps_shards, f.workers, f.ps_colocated, f.ps_worker_summers);
  WriteTypedFields(*job, &job->run.config);
  RINGSIDE_RETURN_IF_ERROR(ValidateRunConfig(job->run.config));
  // (Partial TLS flags are refused for what they are, by LoadRpcSecurity.)
  if (PsTransportOf(job->run.config) == kPsTransportTcp && !f.tls_cert.empty() &&
      !f.tls_key.empty() && !f.tls_ca.empty()) {
    return absl::InvalidArgumentError(
        "--ps_transport=tcp does not encrypt its data plane yet: for TLS use "
        "--ps_transport=grpc");
  }
  RINGSIDE_RETURN_IF_ERROR(CheckDeviceBuiltFor(job->run.config));
  RINGSIDE_RETURN_IF_ERROR(CheckPlacementFits(job->run.config));
  return SetTimeout(f, job);
}

// ps-server's shard, ps-worker's id and shards' addresses.
absl::Status SetPsProcess(const JobFlags& f, JobVerb verb, JobSpec* job) {
  const PsLayout& ps = job->ps;
  if (verb == JobVerb::kPsServer) {
    job->ps_process.shard = f.shard;
    job->ps_process.listen = f.listen;
    // The workers host their own summers: a ps-server hosts a dedicated shard.
    return CheckIndexFlag("shard", f.shard, "ps_shards", ps.dedicated_shards());
  }
  RINGSIDE_RETURN_IF_ERROR(CheckIndexFlag("worker_id", f.worker_id, "workers", ps.workers()));
  job->ps_process.worker_id = f.worker_id;
  RINGSIDE_ASSIGN_OR_RETURN(job->ps_process.servers, ParseServerList(f.ps_servers));
  if (static_cast<int>(job->ps_process.servers.size()) != ps.shards()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--ps_servers lists %d addresses for --ps_shards=%d%s", job->ps_process.servers.size(),
                        ps.dedicated_shards(),
                        ps.worker_summers() ? absl::StrFormat(" and %d workers' summers", ps.workers()) : ""));
  }
  return absl::OkStatus();
}

// DataParallel is one process: nothing to place on emulated nodes.
absl::Status CheckNoNodes(const JobFlags& f) {
  const bool used[] = {!f.network.empty(), !f.node_cpus.empty(), f.ranks_per_node != 1,
                       !f.slow_node.empty()};
  const char* names[] = {"--network", "--node_cpus", "--ranks_per_node", "--slow_node"};
  for (int i = 0; i < 4; ++i) {
    if (used[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          names[i], " is not supported with --strategy=dp: DataParallel is one process "
          "(threads), with no nodes to emulate; use --strategy=ddp or ps"));
    }
  }
  return absl::OkStatus();
}

// --cluster: its NIC, dilated, sets the links between a local job's nodes.
absl::Status CheckCluster(const JobFlags& f, JobStrategy strategy) {
  if (f.cluster.empty()) return absl::OkStatus();
  if (!IsMultiProcess(strategy)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--cluster shapes the links between a job's nodes: --strategy=%s has none (ps or ddp)", f.strategy));
  }
  if (!f.network.empty()) {
    return absl::InvalidArgumentError("--cluster and --network exclude each other: the cluster's NIC sets the links");
  }
  if (f.node_cpus.empty()) {
    return absl::InvalidArgumentError(
        "--cluster needs --node_cpus (the dilation is measured on a node's CPU share: a number or auto)");
  }
  return absl::OkStatus();
}

// DDP's own checks, after the configuration's.
absl::Status SetDdpJob(const JobFlags& f, JobSpec* job) {
  if (f.workers < 1) return absl::InvalidArgumentError(absl::StrFormat("--workers must be >= 1, got %d", f.workers));
  RINGSIDE_RETURN_IF_ERROR(CheckProcessGroupBackend(f.backend));
  job->backend = BackendNamed(f.backend).value_or(Backend::kGloo);  // Checked just above.
  RINGSIDE_RETURN_IF_ERROR(CheckDeviceBuiltFor(job->run.config));
  RINGSIDE_ASSIGN_OR_RETURN(job->allreduce, ParseAllReduceAlgorithm(f.allreduce));
  return SetTimeout(f, job);
}

// `train`'s checks, in their order: the dataset, --cluster, then the strategy's (PS:
// SetPsJob; the others: the configuration, then their own flags).
absl::Status SetTrainJob(const JobFlags& f, JobSpec* job) {
  // Sizes that could never be allocated are bad flags, refused before anything starts.
  RINGSIDE_RETURN_IF_ERROR(CheckDatasetSpec(f.dataset));
  RINGSIDE_RETURN_IF_ERROR(CheckCluster(f, job->strategy));
  job->cluster = f.cluster;
  if (job->strategy == JobStrategy::kPs) return SetPsJob(f, job);
  WriteTypedFields(*job, &job->run.config);
  RINGSIDE_RETURN_IF_ERROR(ValidateRunConfig(job->run.config));  // dp: --workers, --grad_accum, --device.
  if (job->strategy == JobStrategy::kDp) RINGSIDE_RETURN_IF_ERROR(CheckNoNodes(f));
  if (f.ps_min_workers != 0) {  // Elastic PS (issue 23).
    return absl::InvalidArgumentError("--ps_min_workers needs --strategy=ps");
  }
  if (!f.ps_transport.empty()) {
    return absl::InvalidArgumentError("--ps_transport needs --strategy=ps");
  }
  if (!f.ps_placement.empty() && f.ps_placement != kPsPlacementBalanced) {
    return absl::InvalidArgumentError("--ps_placement needs --strategy=ps");
  }
  if (!f.ps_mode.empty() && f.ps_mode != kPsModeOptimizer) {
    return absl::InvalidArgumentError("--ps_mode needs --strategy=ps");
  }
  if (f.ps_worker_summers) return absl::InvalidArgumentError("--ps_worker_summers needs --strategy=ps");
  if (job->strategy != JobStrategy::kDp && f.dp_interpreter_lock) {
    return absl::InvalidArgumentError("--dp_interpreter_lock needs --strategy=dp");
  }
  if (job->strategy == JobStrategy::kDdp) return SetDdpJob(f, job);
  return absl::OkStatus();
}

// What is read once the flags passed: the job's token and TLS (ps and ddp), then
// either the local job's nodes or, in a launched PS job, the shards' addresses.
absl::Status LoadJobFiles(const JobFlags& f, JobVerb verb, bool launch_here, JobSpec* job) {
  if (!IsMultiProcess(job->strategy)) {
    // Single on an emulated node: --network is not used (one process sends nothing).
    if (launch_here) {
      RINGSIDE_ASSIGN_OR_RETURN(job->emulation,
                                ParseEmulationSpec("", f.node_cpus, f.ranks_per_node, f.slow_node));
    }
    return absl::OkStatus();
  }
  RINGSIDE_ASSIGN_OR_RETURN(job->security,
                            LoadRpcSecurity(f.token_file, f.tls_cert, f.tls_key, f.tls_ca));
  if (verb != JobVerb::kTrain) return absl::OkStatus();
  if (launch_here) {
    RINGSIDE_ASSIGN_OR_RETURN(job->emulation,
                              ParseEmulationSpec(f.network, f.node_cpus, f.ranks_per_node, f.slow_node));
  } else if (job->strategy == JobStrategy::kPs && !f.ps_servers.empty()) {
    RINGSIDE_ASSIGN_OR_RETURN(job->ps_process.servers, ParseServerList(f.ps_servers));
    if (static_cast<int>(job->ps_process.servers.size()) != job->ps.shards()) {
      return absl::InvalidArgumentError("--ps_servers does not list --ps_shards addresses");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobSpec> ParseJobSpec(const JobFlags& f, JobVerb verb, bool launch_here) {
  JobSpec job;
  if (verb == JobVerb::kTrain) {
    absl::StatusOr<JobStrategy> strategy = ParseJobStrategy(f.strategy);
    if (!strategy.ok()) return AsUsageError(strategy.status());
    job.strategy = *strategy;
  } else {
    job.strategy = JobStrategy::kPs;  // ps-server and ps-worker play a PS job's roles.
  }
  job.workers = f.workers;
  job.run = RunOptionsOf(f, job.strategy);
  if (verb == JobVerb::kTrain) {
    RINGSIDE_RETURN_IF_ERROR(AsUsageError(SetTrainJob(f, &job)));
  } else {
    RINGSIDE_RETURN_IF_ERROR(AsUsageError(SetPsJob(f, &job)));
    RINGSIDE_RETURN_IF_ERROR(AsUsageError(SetPsProcess(f, verb, &job)));
  }
  RINGSIDE_RETURN_IF_ERROR(LoadJobFiles(f, verb, launch_here, &job));
  return job;
}

}  // namespace ringside
