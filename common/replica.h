// One model replica, set up the same way for every strategy (single, DDP, PS): the ops
// backend from the factory, the dataset, the model and the SGD settings the RunConfig
// names; and the training of it through the shared Trainer with a strategy.
//
//   RINGSIDE_RETURN_IF_ERROR(ValidateRunConfig(run.config));   // before anything loads
//   RINGSIDE_ASSIGN_OR_RETURN(Replica replica, NewReplica(run.config));
//   ... build the strategy over replica.model (and its process group / shards) ...
//   RINGSIDE_ASSIGN_OR_RETURN(TrainResult r, TrainReplica(run, rank, world, &replica, s));
#ifndef RINGSIDE_COMMON_REPLICA_H_
#define RINGSIDE_COMMON_REPLICA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/dataset.h"
#include "common/model.h"
#include "common/ops.h"
#include "common/run_config.h"
#include "common/sgd.h"
#include "common/trainer.h"

namespace ringside {

// Owns everything one process trains with. Movable; `model` lives in `ops`'s memory
// and is declared after it, so it is destroyed first.
struct Replica {
  std::unique_ptr<Ops> ops;
  DatasetSplits data;
  std::unique_ptr<Model> model;  // Parameters not initialised yet (the Trainer does it).
  SgdHyper hyper;                // From the configuration (SgdHyperFor).
  int cuda_device = -1;          // The GPU `ops` computes on; -1 on the CPU.
  // Other ranks of this node's job compute on the same GPU (RanksShareGpu): the run
  // is an emulation, labelled so in every metrics record (StepMetrics.emulated).
  bool shares_gpu = false;
  double load_seconds = 0;       // Time spent loading the dataset.
};

// Builds the ops (config.device(): "cpu", "cuda" = the GPU of LOCAL_RANK in a launched
// job, else GPU 0, or "cuda:K"; config.precision(), config.threads()), loads
// config.dataset() and
// builds config.model() for its input shape and classes. The dataset's or the model's
// error (NotFound, InvalidArgument, ...) as is.
absl::StatusOr<Replica> NewReplica(const RunConfig& config);

// Trainer options of rank `rank` of `world_size` processes running `run`: progress
// lines from rank 0 only, checkpoints written by rank 0; `emulated` labels the records
// (Replica::shares_gpu).
TrainerOptions TrainerOptionsFor(const RunOptions& run, int rank, int world_size,
                                 bool emulated = false);

// Trains `replica` with `strategy` (borrowed) through the Trainer: restores or
// initialises the parameters, then runs the strategy's whole lifecycle (Start, the
// steps, Finish; see StepStrategy). Blocks until done; the first error.
absl::StatusOr<TrainResult> TrainReplica(const RunOptions& run, int rank, int world_size,
                                         Replica* replica, StepStrategy* strategy);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_REPLICA_H_
