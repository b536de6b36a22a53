#include "ps_worker/ps_worker.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/common.h"
#include "common/ps_placement.h"
#include "common/socket_io.h"
#include "ps_server/server_role.h"

namespace ringside {

absl::StatusOr<std::vector<std::unique_ptr<ShardClient>>> RegisterWithShards(
    const RunConfig& config, int worker_id, const Model& model,
    const std::vector<std::string>& servers,
    const std::vector<std::shared_ptr<grpc::Channel>>& channels, absl::Duration timeout,
    const std::string& token) {
  const int num_shards = static_cast<int>(servers.size());
  if (channels.size() != servers.size()) {
    return absl::InvalidArgumentError(absl::StrCat(channels.size(), " channels for ",
                                                   num_shards, " shard addresses"));
  }
  RINGSIDE_RETURN_IF_ERROR(ValidateSharding(model.num_params(), num_shards));
  ps::RegisterRequest request;
  for (const ParamRange& t : model.TensorRanges()) request.add_tensor_sizes(t.size);
  request.set_worker_id(worker_id);
  request.set_num_workers(config.world_size());
  *request.mutable_config() = config;
  request.set_model(config.model());
  request.set_num_params(model.num_params());
  std::vector<std::unique_ptr<ShardClient>> clients;
  for (int s = 0; s < num_shards; ++s) {
    auto client = std::make_unique<ShardClient>(
        channels[s], absl::StrCat("shard ", s, " at ", servers[s]), worker_id, timeout);
    // Elastic PS: a worker started again soon after it was lost may find a shard that
    // has not noticed the loss yet (it drops the worker within --timeout_s): retried
    // until then.
    const absl::Time until = absl::Now() + timeout;
    absl::Status registered = client->Register(request).status();
    while (absl::IsAlreadyExists(registered) && config.ps_min_workers() > 0 &&
           absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(200));
      registered = client->Register(request).status();
    }
    RINGSIDE_RETURN_IF_ERROR(registered);
    if (client->layout().shard() != s) {
      return absl::FailedPreconditionError(absl::StrCat(servers[s], " serves shard ",
                                                        client->layout().shard(), ", expected ", s));
    }
    if (client->layout().data_port() != 0) {
      // The data plane on TCP, to the host the shard's service answers on.
      // Push-pulls in the job's --compress format (the shard compared the configuration).
      RINGSIDE_ASSIGN_OR_RETURN(const WireFormat wire, ParseCompression(config.compress()));
      RINGSIDE_RETURN_IF_ERROR(client->ConnectDataPlane(HostOf(servers[s]), token, wire));
    }
    clients.push_back(std::move(client));
  }
  return clients;
}

namespace {

// Checks that o.servers lists one address per shard of `layout`, then fills
// `channels` (one per shard, in shard order) and `hosted`. The shards this worker
// hosts (colocated worker 0, the master: every shard; with worker summers, its own
// summer) are started here, in this process, and reached through in-process
// channels; the others through channels to their addresses (not connected yet).
// Blocks while a hosted shard starts. Errors are prefixed with `me`; on error the
// shards started so far are left in `hosted` (the caller's to destroy).
absl::Status ReachShards(const PsWorkerOptions& o, const PsLayout& layout,
                         const std::string& me, std::vector<HostedShard>* hosted,
                         std::vector<std::shared_ptr<grpc::Channel>>* channels) {
  const RunConfig& config = o.run.config;
  const int num_shards = static_cast<int>(o.servers.size());
  if (num_shards != layout.shards()) {
    return absl::InvalidArgumentError(absl::StrCat(me, ": --ps_servers lists ", num_shards,
                                                   " addresses for ", layout.shards(), " shards (--ps_shards=",
                                                   config.ps_shards(),
                                                   layout.worker_summers() ? " and a summer in each worker)" : ")"));
  }
  const int my_rank = layout.RankOfWorker(o.worker_id);
  for (int s = 0; s < num_shards; ++s) {
    if (layout.RankHostingShard(s) != my_rank) {
      channels->push_back(NewPsChannel(o.servers[s], o.security, o.timeout));
      continue;
    }
    absl::StatusOr<HostedShard> h = HostShard(config, s, o.servers[s], o.timeout, o.run.out_dir,
                                              o.run.resume, o.security);
    if (!h.ok()) return Annotate(h.status(), me);
    channels->push_back(h->server->InProcessChannel());
    hosted->push_back(std::move(*h));
  }
  return absl::OkStatus();
}

// The PsStrategy's options for worker `worker_id` of the job `config` describes.
// InvalidArgument (ParsePsPlacement's) on an unknown --ps_placement. Does not block.
absl::StatusOr<PsStrategyOptions> StrategyOptionsFor(const RunConfig& config, int worker_id,
                                                     const SyncPolicy& sync,
                                                     const PsLayout& layout) {
  PsStrategyOptions sopts;
  sopts.worker_id = worker_id;
  sopts.num_workers = config.world_size();
  sopts.has_momentum = config.momentum() != 0;
  // Under SSP and ASP the release of a step's parameters is the consistency point that
  // the staleness bound speaks of: FinishStep waits for it, so a step starts only once
  // the worker may run it.
  sopts.params_arrive_late = sync.mode == SyncMode::kBsp;
  RINGSIDE_ASSIGN_OR_RETURN(sopts.placement, ParsePsPlacement(config.ps_placement()));
  sopts.summation = config.ps_mode() == kPsModeSummation;
  if (layout.worker_summers()) sopts.shard_weights = layout.ShardWeights();
  sopts.hyper = SgdHyperFor(config);
  return sopts;
}

// Worker 0's one-line description of the job on stderr: workers, shards and where
// they run, consistency, model, chunking, placement and each shard's share of the
// parameters (what its link carries of every step).
void PrintJobSummary(const RunConfig& config, const PsLayout& layout, const SyncPolicy& sync,
                     const PsStrategyOptions& sopts, const PsStrategy& strategy,
                     const Model& model) {
  const int num_shards = layout.shards();
  std::string shares;
  for (const auto& c : strategy.clients()) {
    absl::StrAppend(&shares, shares.empty() ? "" : " / ",
                    absl::StrFormat("%.0f%%", 100.0 * c->layout().size() / model.num_params()));
  }
  absl::FPrintF(stderr,
                "ps: %d workers, %d %s%s, %s, model %s (%d parameters, %.1f MB) in "
                "%d-KiB chunks, placement %s (shards hold %s)\n",
                config.world_size(), num_shards,
                sopts.summation ? "summation server(s)" : "shard(s)",
                config.ps_colocated() ? " in worker 0"
                : layout.worker_summers()
                    ? absl::StrFormat(" (%d dedicated, one in each worker)", layout.dedicated_shards())
                    : "",
                SyncPolicyText(sync),
                config.model(), model.num_params(),
                model.num_params() * 4 / 1e6, config.ps_chunk_bytes() / 1024,
                PsPlacementName(sopts.placement), shares);
}

}  // namespace

absl::StatusOr<TrainResult> RunPsWorker(const PsWorkerOptions& o) {
  const RunConfig& config = o.run.config;
  const std::string me = absl::StrCat("worker ", o.worker_id);
  // The caller checked the configuration (ValidateRunConfig, once, where the job was
  // described); the shards compare it at registration.
  RINGSIDE_ASSIGN_OR_RETURN(const SyncPolicy sync, SyncPolicyOf(config));
  const PsLayout layout = PsLayout::Of(config);
  std::vector<HostedShard> hosted;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  RINGSIDE_RETURN_IF_ERROR(ReachShards(o, layout, me, &hosted, &channels));

  RINGSIDE_ASSIGN_OR_RETURN(Replica replica, NewReplica(config));
  absl::StatusOr<std::vector<std::unique_ptr<ShardClient>>> clients = RegisterWithShards(
      config, o.worker_id, *replica.model, o.servers, channels, o.timeout, o.security.token);
  if (!clients.ok()) return Annotate(clients.status(), me);
  RINGSIDE_ASSIGN_OR_RETURN(const PsStrategyOptions sopts,
                            StrategyOptionsFor(config, o.worker_id, sync, layout));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<PsStrategy> strategy,
                            PsStrategy::Create(std::move(*clients), replica.model.get(),
                                               replica.ops.get(), sopts));
  if (o.worker_id == 0) PrintJobSummary(config, layout, sync, sopts, *strategy, *replica.model);

  // The strategy's lifecycle: start parameters from the shards, training, goodbye.
  absl::StatusOr<TrainResult> result =
      TrainReplica(o.run, o.worker_id, config.world_size(), &replica, strategy.get());
  absl::Status status = Annotate(result.status(), me);
  if (!status.ok()) strategy->ReportFailure(status);
  if (!hosted.empty()) {
    // The master stays up until every worker has said goodbye (or the job aborted).
    for (HostedShard& h : hosted) {
      absl::Status s = status.ok() ? h.server->Wait() : h.server->shard()->health();
      if (status.ok() && !s.ok()) status = s;
    }
    // Give the others a moment to hear an abort before the servers go.
    if (!status.ok()) absl::SleepFor(AbortGrace(o.timeout));
  }
  if (!status.ok()) return status;
  return result;
}

}  // namespace ringside
