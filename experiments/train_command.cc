#include "experiments/train_command.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/common.h"
#include "common/data_parallel.h"

namespace ringside {
namespace {

// What --threads=0 means here: OpenBLAS reads OPENBLAS_NUM_THREADS, then
// OMP_NUM_THREADS (which `ringside launch` and torchrun set), else uses every core.
std::string LibraryDefaultThreads() {
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return absl::StrCat("library default (", name, "=", value, ")");
  }
  return "library default";
}

// What the replica runs on, its data and its model, to stderr.
void PrintReplicaSetup(const RunConfig& c, const Replica& replica, bool dp) {
  const Ops& ops = *replica.ops;
  if (ops.kind() == DeviceKind::kCpu) {
    const DeviceInfo device = DetectDevices();
    std::string gpus = device.detail;
    if (device.gpu_count > 0) {
      gpus = absl::StrCat(device.gpu_count, " GPU(s) present",
                          BuiltWithCuda() ? ", unused (--device=cuda trains there)"
                                          : ", unused (this build has no CUDA: --config=cuda)");
    }
    absl::FPrintF(stderr, "device: cpu (%s), OpenBLAS threads: %s%s\n", gpus,
                  c.threads() > 0 ? absl::StrCat(c.threads()) : LibraryDefaultThreads(),
                  dp ? " (process-wide: each replica's GEMMs may use that many)" : "");
  } else {
    absl::FPrintF(stderr, "device: %s (%s), GEMM precision %s\n", ops.name(),
                  DetectDevices().detail, c.precision().empty() ? "fp32" : c.precision());
  }
  const Dataset& train = *replica.data.train;
  absl::FPrintF(stderr, "dataset: %s: %d train, %d test samples of %dx%dx%d, %d classes (%.1f s)\n",
                c.dataset(), train.size(), replica.data.test->size(), train.channels(),
                train.height(), train.width(), train.num_classes(), replica.load_seconds);
  absl::FPrintF(stderr, "model: %s, %d parameters\n", c.model(), replica.model->num_params());
}

}  // namespace

absl::Status RunTrainCommand(const JobSpec& job) {
  const RunOptions& options = job.run;
  const RunConfig& c = options.config;
  const bool dp = job.strategy == JobStrategy::kDp;
  if (job.strategy != JobStrategy::kSingle && !dp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy=", JobStrategyName(job.strategy), " runs several processes, not one"));
  }

  absl::StatusOr<Replica> replica = NewReplica(c);
  if (!replica.ok()) return replica.status();
  PrintReplicaSetup(c, *replica, dp);

  // Single: one replica steps itself. DP: the master (this replica) and world_size - 1
  // more on threads (data_parallel.h); the trainer sees one process with the global
  // batch.
  std::unique_ptr<StepStrategy> strategy;
  DataParallelStrategy* data_parallel = nullptr;
  if (dp) {
    absl::StatusOr<std::unique_ptr<DataParallelStrategy>> s =
        DataParallelStrategy::Create(c, &*replica);
    if (!s.ok()) return s.status();
    data_parallel = s->get();
    strategy = *std::move(s);
    absl::FPrintF(stderr,
                  "dp: %d replicas (threads of this process), batch %d per replica, global "
                  "batch %d; interpreter lock: %s\n",
                  c.world_size(), c.batch(), c.batch() * c.world_size(),
                  c.dp_interpreter_lock()
                      ? "ON (emulated: one mutex around every op of every replica)"
                      : "off");
  } else {
    absl::StatusOr<std::unique_ptr<LocalSgdStrategy>> s =
        LocalSgdStrategy::Create(replica->hyper, replica->model.get(), replica->ops.get());
    if (!s.ok()) return s.status();
    strategy = *std::move(s);
  }
  absl::StatusOr<TrainResult> result =
      dp ? TrainDataParallel(options, &*replica, data_parallel)
         : TrainReplica(options, /*rank=*/0, /*world_size=*/1, &*replica, strategy.get());
  if (!result.ok()) return result.status();

  absl::PrintF("steps: %d (%d this run), %.1f s, %.0f samples/s\n", result->steps,
               result->steps_this_run, result->seconds, result->samples_per_sec);
  absl::PrintF("test loss: %.4f\n", result->test_loss);
  absl::PrintF("test accuracy: %.4f\n", result->test_accuracy);
  if (dp) {
    // Where DP's time goes: the master's phases, median per step; the step's mean.
    const DataParallelPhases p = data_parallel->phases();
    absl::PrintF(
        "dp phases (ms per step, median of %d): replicate %.3f, scatter %.3f, apply %.3f "
        "(master forward %.3f, backward %.3f), reduce %.3f, update %.3f; step %.3f (mean)\n",
        p.steps, p.replicate_ms, p.scatter_ms, p.apply_ms, p.forward_ms, p.backward_ms,
        p.reduce_ms, p.update_ms,
        result->steps_this_run > 0 ? result->seconds * 1e3 / result->steps_this_run : 0.0);
    if (data_parallel->interpreter_lock()) {
      absl::PrintF(
          "interpreter lock (emulated): ON, the replicas waited %.3f ms per step for it "
          "(records labelled emulated)\n",
          p.lock_wait_ms);
    }
  }
  if (!options.out_dir.empty()) {
    absl::PrintF("outputs: %s/{%s,%s,%s}\n", options.out_dir,
                 OutputFileName(OutputFile::kMetrics, OutputOwner::kSingle, 0),
                 OutputFileName(OutputFile::kTrace, OutputOwner::kSingle, 0), kCheckpointFile);
  }
  return absl::OkStatus();
}

}  // namespace ringside
