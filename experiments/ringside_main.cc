// ringside: the one user-facing binary.
//   ringside train --strategy=single --model=... --dataset=... --epochs=N ...
//   ringside bench step --model=... --batch=B --threads=T
// Errors print one line "ringside: error: ..." and exit 1.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "experiments/experiments.h"

ABSL_FLAG(std::string, strategy, "single", "single (this build); ps and ddp come later");
ABSL_FLAG(std::string, model, "mlp:784-256-256-10", "mlp:W0-W1-...-Wn or cnn:lenet");
ABSL_FLAG(std::string, dataset, "fashion-mnist",
          "fashion-mnist, synthetic[:train=N,test=M,shape=CxHxW,classes=K,seed=S] or a "
          "directory of MNIST-format IDX files");
ABSL_FLAG(int32_t, epochs, 5, "epochs to train");
ABSL_FLAG(int64_t, steps, 0, "stop after this many steps in total (0: no limit)");
ABSL_FLAG(int32_t, batch, 128, "batch size per worker");
ABSL_FLAG(double, lr, 0.02, "SGD learning rate");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum");
ABSL_FLAG(double, weight_decay, 0.0, "SGD weight decay");
ABSL_FLAG(bool, nesterov, false, "Nesterov momentum");
ABSL_FLAG(uint64_t, seed, 1, "seed for initialisation and data order");
ABSL_FLAG(int32_t, threads, 0, "OpenBLAS threads per process (0: library default)");
ABSL_FLAG(bool, drop_last, false, "drop the tail of the shuffled data instead of padding");
ABSL_FLAG(std::string, out, "", "output directory: metrics.jsonl, trace.json, checkpoint.bin");
ABSL_FLAG(bool, resume, false, "continue from OUT/checkpoint.bin");
ABSL_FLAG(int64_t, checkpoint_every, 0, "also checkpoint every N steps");
ABSL_FLAG(int32_t, eval_batch, 1000, "batch size for evaluation");
ABSL_FLAG(int32_t, warmup, 20, "bench: untimed warm-up steps");
ABSL_FLAG(int32_t, repeats, 1, "bench: measurements to print");

namespace {

constexpr char kUsage[] =
    "ringside: parameter server vs DDP ring, measured.\n"
    "  ringside train --strategy=single --model=mlp:784-256-256-10 --dataset=fashion-mnist\n"
    "                 --epochs=5 --batch=128 --lr=0.02 --momentum=0.9 --out=DIR [--resume]\n"
    "  ringside bench step --model=mlp:784-512-512-10 --batch=128 --threads=1 [--steps=200]\n";

absl::Status Dispatch(const std::vector<char*>& args) {
  if (args.size() < 2) {
    return absl::InvalidArgumentError("missing command (train, bench step); see --help");
  }
  const std::string command = args[1];
  if (command == "train") {
    if (args.size() > 2) {
      return absl::InvalidArgumentError(absl::StrFormat("unexpected argument '%s'", args[2]));
    }
    ringside::TrainCommandOptions o;
    ringside::RunConfig& c = o.config;
    c.set_strategy(absl::GetFlag(FLAGS_strategy));
    c.set_model(absl::GetFlag(FLAGS_model));
    c.set_dataset(absl::GetFlag(FLAGS_dataset));
    c.set_epochs(absl::GetFlag(FLAGS_epochs));
    c.set_max_steps(absl::GetFlag(FLAGS_steps));
    c.set_batch(absl::GetFlag(FLAGS_batch));
    c.set_lr(static_cast<float>(absl::GetFlag(FLAGS_lr)));
    c.set_momentum(static_cast<float>(absl::GetFlag(FLAGS_momentum)));
    c.set_weight_decay(static_cast<float>(absl::GetFlag(FLAGS_weight_decay)));
    c.set_nesterov(absl::GetFlag(FLAGS_nesterov));
    c.set_seed(absl::GetFlag(FLAGS_seed));
    c.set_threads(absl::GetFlag(FLAGS_threads));
    c.set_drop_last(absl::GetFlag(FLAGS_drop_last));
    o.out_dir = absl::GetFlag(FLAGS_out);
    o.resume = absl::GetFlag(FLAGS_resume);
    o.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
    o.eval_batch = absl::GetFlag(FLAGS_eval_batch);
    return ringside::RunTrainCommand(o);
  }
  if (command == "bench") {
    if (args.size() != 3 || std::string(args[2]) != "step") {
      return absl::InvalidArgumentError("usage: ringside bench step [--model --batch --threads --steps]");
    }
    ringside::StepBenchOptions o;
    o.model = absl::GetFlag(FLAGS_model);
    o.batch = absl::GetFlag(FLAGS_batch);
    o.threads = absl::GetFlag(FLAGS_threads) > 0 ? absl::GetFlag(FLAGS_threads) : 1;
    o.warmup = absl::GetFlag(FLAGS_warmup);
    o.steps = absl::GetFlag(FLAGS_steps) > 0 ? static_cast<int>(absl::GetFlag(FLAGS_steps)) : 200;
    o.repeats = absl::GetFlag(FLAGS_repeats);
    return ringside::RunStepBench(o);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown command '%s' (expected train or bench)", command));
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  absl::Status status = Dispatch(args);
  if (!status.ok()) {
    absl::FPrintF(stderr, "ringside: error: %s\n", status.message());
    return 1;
  }
  return 0;
}
