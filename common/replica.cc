#include "common/replica.h"

#include <cstdio>

#include "common/device.h"
#include "common/job_env.h"
#include "common/ops_factory.h"
#include "common/status_macros.h"

namespace ringside {

namespace {

// The backend config.device() names. Plain "cuda" picks GPU LOCAL_RANK modulo the GPU
// count inside a launched job (one rank per GPU, as torchrun's users expect), GPU 0
// otherwise.
// The ops of `config`'s device; for a GPU, also which one and whether this node's ranks
// share it (into `replica`).
absl::StatusOr<std::unique_ptr<Ops>> OpsFor(const RunConfig& config, Replica* replica) {
  RINGSIDE_ASSIGN_OR_RETURN(DeviceSpec device, ParseDevice(config.device()));
  RINGSIDE_ASSIGN_OR_RETURN(GemmPrecision precision, ParseGemmPrecision(config.precision()));
  if (device.kind == DeviceKind::kCpu) return NewOps("cpu", 0, config.threads(), precision);
  int local_rank = 0, local_world_size = 1;
  if (InLaunchedJob()) {
    RINGSIDE_ASSIGN_OR_RETURN(JobEnv env, ReadJobEnv());
    local_rank = env.local_rank;
    local_world_size = env.local_world_size;
  }
  const int gpus = DetectDevices().gpu_count;
  replica->cuda_device = CudaDeviceFor(device.index, local_rank, gpus);
  replica->shares_gpu = RanksShareGpu(device.index, local_world_size, gpus);
  return NewOps("cuda", replica->cuda_device, config.threads(), precision);
}

}  // namespace

absl::StatusOr<Replica> NewReplica(const RunConfig& config) {
  Replica replica;
  RINGSIDE_ASSIGN_OR_RETURN(replica.ops, OpsFor(config, &replica));
  const int64_t load_start = NowMicros();
  RINGSIDE_ASSIGN_OR_RETURN(replica.data, LoadDataset(config.dataset()));
  replica.load_seconds = (NowMicros() - load_start) / 1e6;
  const Dataset& train = *replica.data.train;
  RINGSIDE_ASSIGN_OR_RETURN(
      replica.model,
      Model::Create(config.model(), Shape{train.channels(), train.height(), train.width()},
                    train.num_classes(), replica.ops.get()));
  replica.hyper = SgdHyperFor(config);
  return replica;
}

TrainerOptions TrainerOptionsFor(const RunOptions& run, int rank, int world_size,
                                 bool emulated) {
  TrainerOptions o;
  o.emulated = emulated;
  o.config = run.config;
  o.config.set_world_size(world_size);
  o.rank = rank;
  o.world_size = world_size;
  o.out_dir = run.out_dir;
  o.resume = run.resume;
  o.checkpoint_every = run.checkpoint_every;
  o.keep_checkpoints = run.keep_checkpoints;
  o.write_checkpoints = true;  // The trainer lets rank 0 write.
  o.eval_batch = run.eval_batch;
  o.progress = rank == 0 ? stderr : nullptr;
  return o;
}

absl::StatusOr<TrainResult> TrainReplica(const RunOptions& run, int rank, int world_size,
                                         Replica* replica, StepStrategy* strategy) {
  RINGSIDE_ASSIGN_OR_RETURN(
      std::unique_ptr<Trainer> trainer,
      Trainer::Create(TrainerOptionsFor(run, rank, world_size, replica->shares_gpu),
                      replica->model.get(),
                      replica->ops.get(), &replica->data, strategy));
  return trainer->Run();
}

}  // namespace ringside
