// The command table: every verb, its usage lines and its entry point.
#include "absl/strings/str_cat.h"
#include "experiments/cli/command.h"
#include "experiments/cli/verbs.h"

namespace ringside {

absl::Span<const Command> Commands() {
  static constexpr Command kCommands[] = {
      {"demo",
       "  ringside demo [--out=runs/demo]   (single vs PS vs DDP on 1, 2, 4 workers, with a report)\n",
       RunDemoVerb},
      {"train",
       "  ringside train --strategy=single --model=mlp:784-256-256-10 --dataset=fashion-mnist\n"
       "                 --epochs=5 --batch=128 --lr=0.02 --momentum=0.9 --out=DIR [--resume]\n"
       "  ringside train --strategy=ddp --workers=2 --backend=gloo ...    (launches the ranks)\n"
       "  ringside train --strategy=ps --workers=N --ps_shards=S --ps_sync=bsp|ssp:K|asp\n"
       "                 [--ps_colocated] ...          (launches S shards and N workers here)\n",
       RunTrainVerb},
      {"ps-server", "  ringside ps-server --shard=I --listen=HOST:PORT --workers=N --ps_shards=S ...\n",
       RunPsServerVerb},
      {"ps-worker", "  ringside ps-worker --worker_id=I --ps_servers=H0:P0,H1:P1,... --workers=N ...\n",
       RunPsWorkerVerb},
      {"launch",
       "  ringside launch --nproc_per_node=N [--nnodes --node_rank --master_addr --master_port]\n"
       "                  -- PROGRAM ARGS...        (torchrun-style; sets RANK, WORLD_SIZE, ...)\n",
       RunLaunchVerb},
      {"compare", "  ringside compare --spec=experiments/matrix/specs/quick.textproto --out=runs/quick\n",
       RunCompareVerb},
      {"report", "  ringside report runs/quick        (report.md and a self-contained report.html)\n",
       RunReportVerb},
      {"calibrate", "  ringside calibrate --model=mlp:784-256-256-10 --batch=128 --out=calibration.json\n",
       RunCalibrateVerb},
      {"simulate",
       "  ringside simulate --calibration=calibration.json --links=1gbit,10gbit [--max_workers=1024]\n",
       RunSimulateVerb},
      {"bench",
       "  ringside bench step --model=mlp:784-512-512-10 --batch=128 --threads=1 [--steps=200]\n"
       "  ringside bench allreduce --workers=2 [--allreduce=ring|halving-doubling]\n"
       "  ringside bench pushpull --sizes_mb=1,4,16,64,256 --repeats=20 [--pin_cpus=0,1]\n",
       RunBenchVerb},
  };
  return kCommands;
}

std::string UsageText() {
  std::string text = "ringside: parameter server vs DDP ring, measured.\n";
  for (const Command& c : Commands()) absl::StrAppend(&text, c.usage);
  return text;
}

absl::Status ExpectPositional(const CommandArgs& args, size_t max) {
  if (args.positional.size() > max) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args.positional[max], "'"));
  }
  return absl::OkStatus();
}

}  // namespace ringside
