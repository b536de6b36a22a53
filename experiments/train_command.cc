#include "experiments/train_command.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/common.h"

namespace ringside {

absl::Status RunTrainCommand(const TrainCommandOptions& options) {
  const RunConfig& c = options.config;
  if (c.strategy() != "single") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown strategy '", c.strategy(), "' (expected single or ddp)"));
  }
  // Cheap checks first, so bad flags fail before the dataset is loaded.
  if (c.batch() < 1) return absl::InvalidArgumentError(absl::StrCat("--batch must be >= 1, got ", c.batch()));
  if (c.epochs() < 1) return absl::InvalidArgumentError(absl::StrCat("--epochs must be >= 1, got ", c.epochs()));
  if (!(c.lr() >= 0)) return absl::InvalidArgumentError(absl::StrCat("--lr must be >= 0, got ", c.lr()));
  if (c.grad_accum() < 1) return absl::InvalidArgumentError(absl::StrCat("--grad_accum must be >= 1, got ", c.grad_accum()));
  if (c.threads() < 0) return absl::InvalidArgumentError(absl::StrCat("--threads must be >= 0, got ", c.threads()));

  const DeviceInfo device = DetectDevices();
  // The CUDA backend is not part of this build yet: train on the CPU either way.
  std::unique_ptr<Ops> ops = NewCpuOps(c.threads());
  absl::FPrintF(stderr, "device: cpu (%s), OpenBLAS threads: %s\n",
                device.gpu_count > 0 ? absl::StrCat(device.gpu_count, " GPU(s) present, CUDA backend not built")
                                     : device.detail,
                c.threads() > 0 ? absl::StrCat(c.threads()) : "library default");

  const int64_t load_start = NowMicros();
  absl::StatusOr<DatasetSplits> data = LoadDataset(c.dataset());
  if (!data.ok()) return data.status();
  const Dataset& train = *data->train;
  absl::FPrintF(stderr, "dataset: %s: %d train, %d test samples of %dx%dx%d, %d classes (%.1f s)\n",
                c.dataset(), train.size(), data->test->size(), train.channels(), train.height(),
                train.width(), train.num_classes(), (NowMicros() - load_start) / 1e6);

  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(
      c.model(), Shape{train.channels(), train.height(), train.width()}, train.num_classes(),
      ops.get());
  if (!model.ok()) return model.status();
  absl::FPrintF(stderr, "model: %s, %d parameters\n", c.model(), (*model)->num_params());

  SgdHyper hyper;
  hyper.lr = c.lr();
  hyper.momentum = c.momentum();
  hyper.weight_decay = c.weight_decay();
  hyper.nesterov = c.nesterov();
  absl::StatusOr<std::unique_ptr<LocalSgdStrategy>> strategy =
      LocalSgdStrategy::Create(hyper, model->get(), ops.get());
  if (!strategy.ok()) return strategy.status();

  TrainerOptions topts;
  topts.config = c;
  topts.config.set_world_size(1);
  topts.out_dir = options.out_dir;
  topts.resume = options.resume;
  topts.checkpoint_every = options.checkpoint_every;
  topts.eval_batch = options.eval_batch;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(topts, model->get(), ops.get(), &*data, strategy->get());
  if (!trainer.ok()) return trainer.status();
  absl::StatusOr<TrainResult> result = (*trainer)->Run();
  if (!result.ok()) return result.status();

  absl::PrintF("steps: %d (%d this run), %.1f s, %.0f samples/s\n", result->steps,
               result->steps_this_run, result->seconds, result->samples_per_sec);
  absl::PrintF("test loss: %.4f\n", result->test_loss);
  absl::PrintF("test accuracy: %.4f\n", result->test_accuracy);
  if (!options.out_dir.empty()) {
    absl::PrintF("outputs: %s/{%s,%s,%s}\n", options.out_dir, kMetricsFile, kTraceFile,
                 kCheckpointFile);
  }
  return absl::OkStatus();
}

}  // namespace ringside
