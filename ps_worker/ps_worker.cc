#include "ps_worker/ps_worker.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/common.h"
#include "ps_server/server_role.h"

namespace ringside {

absl::StatusOr<PsResult> RunPsWorker(const PsWorkerOptions& o) {
  const RunConfig& config = o.config;
  const std::string me = absl::StrCat("worker ", o.worker_id);
  const int num_shards = static_cast<int>(o.servers.size());
  if (num_shards != config.ps_shards()) {
    return absl::InvalidArgumentError(absl::StrCat(me, ": --ps_servers lists ", num_shards,
                                                   " addresses for --ps_shards=", config.ps_shards()));
  }
  // Colocated: worker 0 is the master (every shard lives in this process).
  std::vector<HostedShard> hosted;
  if (config.ps_colocated() && o.worker_id == 0) {
    for (int s = 0; s < num_shards; ++s) {
      absl::StatusOr<HostedShard> h = HostShard(config, s, o.servers[s], o.timeout, o.out_dir);
      if (!h.ok()) return Annotate(h.status(), me);
      hosted.push_back(std::move(*h));
    }
  }

  std::unique_ptr<Ops> ops = NewCpuOps(config.threads());
  RINGSIDE_ASSIGN_OR_RETURN(DatasetSplits data, LoadDataset(config.dataset()));
  const Dataset& train = *data.train;
  RINGSIDE_ASSIGN_OR_RETURN(
      std::unique_ptr<Model> model,
      Model::Create(config.model(), Shape{train.channels(), train.height(), train.width()},
                    train.num_classes(), ops.get()));
  if (absl::Status s = ValidateSharding(model->num_params(), num_shards); !s.ok()) {
    return Annotate(s, me);
  }

  // Protocol step 0: register with every shard (they check id, model and config).
  ps::RegisterRequest request;
  request.set_worker_id(o.worker_id);
  request.set_num_workers(config.world_size());
  request.set_config_hash(ConfigHash(config));
  request.set_model(config.model());
  request.set_num_params(model->num_params());
  std::vector<std::unique_ptr<ShardClient>> clients;
  for (int s = 0; s < num_shards; ++s) {
    std::shared_ptr<grpc::Channel> channel =
        hosted.empty() ? NewPsChannel(o.servers[s]) : hosted[s].server->InProcessChannel();
    auto client = std::make_unique<ShardClient>(
        channel, absl::StrCat("shard ", s, " at ", o.servers[s]), o.worker_id, o.timeout);
    if (absl::Status st = client->Register(request).status(); !st.ok()) return Annotate(st, me);
    if (client->layout().shard() != s) {
      return absl::FailedPreconditionError(absl::StrCat(me, ": ", o.servers[s], " serves shard ",
                                                        client->layout().shard(), ", expected ", s));
    }
    clients.push_back(std::move(client));
  }
  PsStrategyOptions sopts;
  sopts.worker_id = o.worker_id;
  sopts.num_workers = config.world_size();
  sopts.has_momentum = config.momentum() != 0;
  // Under SSP and ASP the release of a step's parameters is the consistency point that
  // the staleness bound speaks of: FinishStep waits for it, so a step starts only once
  // the worker may run it.
  sopts.params_arrive_late = config.ps_sync() == "bsp";
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<PsStrategy> strategy,
                            PsStrategy::Create(std::move(clients), model.get(), sopts));
  if (o.worker_id == 0) {
    absl::FPrintF(stderr,
                  "ps: %d workers, %d shard(s)%s, %s, model %s (%d parameters, %.1f MB) in "
                  "%d-KiB chunks\n",
                  config.world_size(), num_shards, config.ps_colocated() ? " in worker 0" : "",
                  config.ps_sync() == "ssp" ? absl::StrCat("ssp:", config.ps_staleness())
                                            : config.ps_sync(),
                  config.model(), model->num_params(), model->num_params() * 4 / 1e6,
                  config.ps_chunk_bytes() / 1024);
  }

  TrainerOptions topts;
  topts.config = config;
  topts.rank = o.worker_id;
  topts.world_size = config.world_size();
  topts.out_dir = o.out_dir;
  topts.resume = o.resume;
  topts.checkpoint_every = o.checkpoint_every;
  topts.write_checkpoints = true;  // The trainer lets rank 0 write.
  topts.eval_batch = o.eval_batch;
  topts.progress = o.worker_id == 0 ? stderr : nullptr;
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                            Trainer::Create(topts, model.get(), ops.get(), &data, strategy.get()));
  absl::Status status = Annotate(strategy->Start(trainer->step()), me);
  absl::StatusOr<TrainResult> result = absl::InternalError("not run");
  if (status.ok()) {
    result = trainer->Run();
    status = Annotate(result.status(), me);
  }
  if (status.ok()) status = Annotate(strategy->Finish(), absl::StrCat(me, ": finishing"));
  if (!hosted.empty()) {
    // The master stays up until every worker has said goodbye (or the job aborted).
    for (HostedShard& h : hosted) {
      absl::Status s = status.ok() ? h.server->Wait() : h.server->shard()->health();
      if (status.ok() && !s.ok()) status = s;
    }
    // Give the others a moment to hear an abort before the servers go.
    if (!status.ok()) absl::SleepFor(std::min(o.timeout, absl::Seconds(2)));
  }
  if (!status.ok()) return status;
  PsResult out;
  out.steps = result->steps;
  out.samples_per_sec = result->samples_per_sec * config.world_size();
  out.test_loss = result->test_loss;
  out.test_accuracy = result->test_accuracy;
  return out;
}

}  // namespace ringside
