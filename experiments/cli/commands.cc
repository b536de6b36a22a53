// The command table: every verb, its summary, usage lines, flags and entry point.
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "experiments/cli/command.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"

namespace ringside {
namespace {

// Flag groups shared by several verbs (string literals, concatenated below).
// What a job's RunConfig is made of (job_flags.h): every process of a job must be given
// the same. `train`, `ps-server` and `ps-worker` check them as they start
// (JobSpecFromFlags), not in the table: they are parsed once.
#define RINGSIDE_RUN_CONFIG_FLAGS                                                          \
  "model dataset epochs steps batch lr momentum weight_decay nesterov seed threads "      \
  "device precision drop_last grad_accum prefetch bug "                                \
  /* Numerical safety (issue 23). */ "nan_policy "
// What a job's RunOptions add.
#define RINGSIDE_RUN_OPTION_FLAGS "out resume checkpoint_every keep_checkpoints eval_batch "
#define RINGSIDE_PS_FLAGS "workers ps_shards ps_sync ps_chunk_kb ps_colocated ps_worker_summers ps_transport ps_placement ps_mode timeout_s " \
  RINGSIDE_SECURITY_FLAGS /* Elastic PS (issue 23). */ "ps_min_workers "
#define RINGSIDE_DDP_FLAGS "backend bucket_cap_mb first_bucket_mb overlap allreduce compress "
// The PS roles' own: the TCP data plane's push-pulls compress too (train has it above).
#define RINGSIDE_PS_ROLE_FLAGS "compress "

// Security (docs/security.md): every verb that starts or calls a shard or the store.
#define RINGSIDE_SECURITY_FLAGS "token_file tls_cert tls_key tls_ca "


absl::Status CheckBench(const CommandArgs& args) {
  const std::string& which = args.positional[0];
  if (which == "step" || which == "allreduce" || which == "pushpull" || which == "pushpull-server" ||
      which == "pushpull-beside") {
    return absl::OkStatus();
  }
  return UsageError(absl::StrCat("unknown benchmark '", which, "' (expected step, allreduce or pushpull)"));
}

absl::Status CheckCompare(const CommandArgs&) {
  if (absl::GetFlag(FLAGS_spec).empty()) return UsageError("compare needs --spec=FILE");
  if (absl::GetFlag(FLAGS_out).empty()) return UsageError("compare needs --out=DIR");
  return absl::OkStatus();
}

absl::Status CheckSimulate(const CommandArgs&) {
  const bool cluster = !absl::GetFlag(FLAGS_cluster).empty();
  const bool calibration = !absl::GetFlag(FLAGS_calibration).empty();
  if (cluster == calibration) {
    return UsageError(cluster ? "simulate: give --cluster or --calibration, not both (a cluster is predicted "
                                "from its profile alone)"
                              : "simulate needs --cluster=NAME|FILE (a described cluster) or "
                                "--calibration=FILE (from `ringside calibrate`)");
  }
  return absl::OkStatus();
}

absl::Status CheckHelp(const CommandArgs& args) {
  if (args.positional.empty() || FindCommand(args.positional[0]) != nullptr) return absl::OkStatus();
  return UsageError(absl::StrCat("unknown command '", args.positional[0], "'"));
}

}  // namespace

// Over 80 lines: a table (one entry per verb), not logic.
absl::Span<const Command> Commands() {
  static const Command kCommands[] = {
      {"demo", "single vs PS vs DDP on 1, 2 and 4 workers, with a report (the README's demo)",
       "  ringside demo [--out=runs/demo] [--cluster=gige-cpu] [--node_cpus=auto]\n",
       "out cluster node_cpus", "", "", 0, 0, false, nullptr, RunDemoVerb},
      {"train", "train one model: one process, DataParallel threads, a parameter server job or a DDP ring",
       "  ringside train --strategy=single --model=mlp:784-256-256-10 --dataset=fashion-mnist\n"
       "                 --epochs=5 --batch=128 --lr=0.02 --momentum=0.9 --out=DIR [--resume]\n"
       "  ringside train --strategy=dp --workers=R [--dp_interpreter_lock] ...\n"
       "                 (one process, R replica threads; --batch per replica, global R x batch)\n"
       "  ringside train --strategy=ddp --workers=2 --backend=gloo ...    (launches the ranks)\n"
       "  ringside train --strategy=ps --workers=N --ps_shards=S --ps_sync=bsp|ssp:K|asp\n"
       "                 [--ps_colocated] ...          (launches S shards and N workers here)\n"
       "  emulated nodes (root): [--network=bw=1gbit,delay=0.5ms] [--node_cpus=C|auto]\n"
       "                 [--ranks_per_node=K] [--slow_node=R:F]   (single: --node_cpus only)\n"
       "                 [--cluster=NAME|FILE]   (ps, ddp: links = the cluster's NIC / dilation)\n",
       "strategy " RINGSIDE_RUN_CONFIG_FLAGS RINGSIDE_RUN_OPTION_FLAGS RINGSIDE_PS_FLAGS
           RINGSIDE_DDP_FLAGS "network cluster node_cpus ranks_per_node slow_node ps_servers "
           "dp_interpreter_lock",
       "", "", 0, 0, false, nullptr, RunTrainVerb},
      {"ps-server", "host one parameter-server shard by hand (train --strategy=ps does this for you)",
       "  ringside ps-server --shard=I --listen=HOST:PORT --workers=N --ps_shards=S ...\n",
       // The same training flags as the workers' (those only workers use are ignored).
       "shard listen " RINGSIDE_PS_FLAGS RINGSIDE_PS_ROLE_FLAGS RINGSIDE_RUN_CONFIG_FLAGS RINGSIDE_RUN_OPTION_FLAGS, "", "", 0, 0,
       false,
       nullptr, RunPsServerVerb},
      {"ps-worker", "run one parameter-server worker by hand, against running shards",
       "  ringside ps-worker --worker_id=I --ps_servers=H0:P0,H1:P1,... --workers=N ...\n",
       "worker_id ps_servers " RINGSIDE_PS_FLAGS RINGSIDE_PS_ROLE_FLAGS RINGSIDE_RUN_CONFIG_FLAGS RINGSIDE_RUN_OPTION_FLAGS,
       "", "", 0, 0, false, nullptr, RunPsWorkerVerb},
      {"launch", "start a program's ranks on this node, torchrun-style (RANK, WORLD_SIZE, ...)",
       "  ringside launch --nproc_per_node=N [--nnodes=N --node_rank=R] [--rdzv_endpoint=HOST:PORT\n"
       "                  | --master_addr --master_port | --standalone] [--max_restarts=K]\n"
       "                  [--network=PROFILE --node_cpus=C|auto --ranks_per_node=K\n"
       "                   --slow_node=R:F]   (emulated nodes here; --nnodes=1 only)\n"
       "                  PROGRAM ARGS...    (or -- PROGRAM ARGS...; torchrun's --nproc-per-node too)\n",
       "nproc_per_node nnodes node_rank master_addr master_port standalone rdzv_backend "
       "rdzv_endpoint rdzv_id max_restarts network node_cpus ranks_per_node slow_node "
       RINGSIDE_SECURITY_FLAGS,
       "", "a command (PROGRAM ARGS...)", 1, -1, true, nullptr, RunLaunchVerb},
      {"compare", "run an experiment matrix (a spec) cell by cell, resuming if interrupted",
       "  ringside compare --spec=experiments/matrix/specs/quick.textproto --out=runs/quick\n",
       "spec out", "", "", 0, 0, false, CheckCompare, RunCompareVerb},
      {"report", "write report.md and a self-contained report.html of a compare directory",
       "  ringside report runs/quick\n", "", "", "a directory written by compare (DIR)", 1, 1, false,
       nullptr, RunReportVerb},
      {"calibrate", "measure the cost model's constants on this machine",
       "  ringside calibrate --model=mlp:784-256-256-10 --batch=128 --out=calibration.json\n"
       "                     [--calibration_repeats=3]   (each constant the median of 3 rounds)\n"
       "                     [--node_cpus=C]   (compute measured on an emulated node of C CPUs; root)\n"
       "                     [--cluster=NAME|FILE]   (with --node_cpus: the PS CPU phase through its dilated links)\n",
       "model batch threads steps calibration_repeats out node_cpus cluster", "", "", 0, 0, false, nullptr,
       RunCalibrateVerb},
      {"simulate", "predict step times far past this machine: for a described cluster, or from a calibration",
       "  ringside simulate --cluster=NAME|FILE --model=resnet-50|vgg-16|bert-large|SPEC --batch=B\n"
       "                    [--workers=8,32,100] [--shards=1,2,N [--colocated]] [--step_ms=MS]\n"
       "  ringside simulate --cluster=FILE --model_mb=528 [--layers_mb=a,b,...] --step_ms=489\n"
       "                    [--link_latency=25us] [--bucket_mb=25] [--links=25gbit]\n"
       "  ringside simulate --calibration=calibration.json --links=1gbit,10gbit [--max_workers=1024]\n"
       "                    [--model=SPEC --batch=B]   (refused unless the calibration's)\n"
       "                    [--wire_only] [--node_cpus=C [--slow_node=R:F]]   (emulated nodes of C CPUs)\n"
       "                    [--ps_transport=tcp|grpc]   (the PS rows on that path; default tcp)\n"
       "  either: [--ps_placement=balanced|tensor_round_robin|tensor_greedy]   (the PS rows' tensors)\n"
       "          [--ps_mode=optimizer|summation [--ps_worker_summers]]   (BytePS's summation servers)\n"
       "          [--ps_chunk_kb=K]   (the PS streams' chunk size; default 1024)\n"
       "          [--compress=none|fp16|bf16]   (the DDP rows' gradients on the wire)\n",
       "cluster calibration model=simulate_model batch=simulate_batch model_mb layers_mb step_ms "
       "workers=simulate_workers max_workers shards=simulate_shards colocated links link_latency "
       "bucket_mb wire_only node_cpus=simulate_node_cpus slow_node=simulate_slow_node ps_transport ps_placement ps_mode ps_worker_summers ps_chunk_kb compress",
       "", "", 0, 0, false, CheckSimulate, RunSimulateVerb},
      {"bench",
       "the measurements of docs/benchmarks.md:",
       "  ringside bench step --model=mlp:784-512-512-10 --batch=128 --threads=1 [--steps=200]\n"
       "                     [--device=cuda[:K] --precision=fp32|tf32|bf16]\n"
       "  ringside bench allreduce --workers=2 [--allreduce=ring|halving-doubling | --backend=nccl]\n"
       "  ringside bench pushpull --sizes_mb=1,4,16,64,256 --repeats=20 [--pin_cpus=0,1]\n"
       "                         [--ps_transport=tcp|grpc]\n",
       "model batch threads device precision warmup steps repeats workers backend allreduce timeout_s "
       "gap_us sizes_mb "
       "pin_cpus ps_chunk_kb ps_transport",
       // pushpull-server: the push-pull sweep's own child; pushpull-beside: calibrate's
       // on a shaped link (with pushpull-server on the other end).
       "size_bytes pin_cpu listen ps_servers", "a benchmark (step, allreduce or pushpull)", 1, 1, false, CheckBench,
       RunBenchVerb},
      {"timeline", "merge a run's per-process traces into one Perfetto timeline (and viewer)",
       "  ringside timeline --run=DIR [--out=FILE]   (default DIR/timeline.json; train does this)\n",
       "run out", "", "", 0, 0, false, nullptr, RunTimelineVerb},
      {"collective", "run one collective on N ranks (threads, Gloo) and print every buffer",
       "  ringside collective OP --ranks=N --elements=E [--root=R]\n"
       "      OP: broadcast scatter gather reduce all-gather all-reduce reduce-scatter all-to-all\n",
       "ranks elements root timeout_s", "", "a collective (OP)", 1, 1, false, nullptr, RunCollectiveVerb},
      {"explain", "step through the ring all-reduce or a parameter server's step, with values",
       "  ringside explain ring --ranks=N --elements=E [--seed=S] [--frames=ring.svg|ring.html]\n"
       "  ringside explain ps --workers=N --shards=S [--model=SPEC] [--frames=ps.svg|ps.html]\n",
       "ranks elements seed workers shards model batch ps_chunk_kb frames", "", "what to explain (ring or ps)", 1, 1, false,
       nullptr, RunExplainVerb},
      {"lab", "the labs of docs/labs/: run one small and check that its effect shows",
       "  ringside lab list\n"
       "  ringside lab check N [--out=DIR] [--node_cpus=C]\n",
       "out node_cpus", "", "list, or check and a lab number", 1, 2, false, nullptr, RunLabVerb},
      {"help", "this list, or one verb's usage and flags", "  ringside help [VERB]\n", "", "", "", 0, 1,
       false, CheckHelp, RunHelpVerb},
      {"version", "the version and build (CPU or CUDA)", "  ringside version   (or ringside --version)\n",
       "", "", "", 0, 0, false, nullptr, RunVersionVerb},
  };
  return kCommands;
}

#undef RINGSIDE_RUN_CONFIG_FLAGS
#undef RINGSIDE_RUN_OPTION_FLAGS
#undef RINGSIDE_PS_FLAGS
#undef RINGSIDE_SECURITY_FLAGS
#undef RINGSIDE_DDP_FLAGS
#undef RINGSIDE_PS_ROLE_FLAGS

absl::Span<const FlagHelpOverride> FlagHelpOverrides() {
  // Only where the verb's meaning differs from the flag's own description (flags.cc).
  static const FlagHelpOverride kOverrides[] = {
      {"demo", "out", "directory of the demo's cells, calibration and report (\"\": runs/demo)"},
      {"compare", "out",
       "the matrix's directory (required): each cell's records, traces and log in "
       "DIR/cells/<cell>/, and DIR/summary.csv; cells already done there are kept"},
      {"calibrate", "model", "the model whose forward, backward and SGD are timed; its parameter bytes are M"},
      {"calibrate", "batch",
       "per-worker batch the compute is timed at (recorded: simulate and report refuse the "
       "calibration for another)"},
      {"calibrate", "threads", "OpenBLAS threads of the compute phase (0: 1); recorded"},
      {"calibrate", "steps", "timed training steps in each repeat of the compute phase (0: 30)"},
      {"calibrate", "out", "the calibration file to write, JSON (\"\": calibration.json)"},
      {"calibrate", "node_cpus",
       "time compute, SGD, gamma and the PS's transfer CPU on an emulated node of C CPUs (a "
       "cgroup; root); the file records C, from which simulate scales"},
      {"calibrate", "cluster",
       "with --node_cpus: the PS's transfer CPU measured through a link shaped to this cluster's NIC "
       "over the dilation (a shard on a second emulated node), as the cells' nodes move their bytes"},
      // simulate: its shared flags are aliases of simulate_* flags (the command table
      // above), whose own descriptions are simulate's words.
      {"bench", "model", "bench step: the model to time"},
      {"bench", "batch", "bench step: samples per step"},
      {"bench", "threads", "bench step: OpenBLAS threads (0: 1)"},
      {"bench", "steps", "bench step: timed steps per round (0: 200)"},
      {"bench", "workers", "bench allreduce: ranks, processes of this machine on loopback"},
      {"bench", "backend", "bench allreduce: gloo (CPU) or nccl (GPU)"},
      {"bench", "allreduce",
       "bench allreduce (gloo): auto (recursive-doubling at 2 ranks, else ring), ring, "
       "halving-doubling or recursive-doubling"},
      {"bench", "timeout_s",
       "bench allreduce: seconds a rank may wait on the others (rendezvous, an all-reduce) "
       "before the bench fails"},
      {"bench", "ps_chunk_kb", "bench pushpull: chunk size of the push-pull's tensor streams in KiB"},
      {"bench", "ps_transport",
       "bench pushpull: what carries the tensors: tcp (the TCP data plane, the default) or grpc"},
      {"timeline", "out", "the merged timeline's file (\"\": RUN/timeline.json); its viewer beside it (.html)"},
      {"collective", "timeout_s", "seconds a rank may wait on the others before the collective fails"},
      {"explain", "seed", "explain ring: random values from this seed (not given: small integers)"},
      {"explain", "workers", "explain ps: workers"},
      {"explain", "model", "explain ps: the model whose parameters the shards split (and the real run trains)"},
      {"explain", "batch", "explain ps: per-worker batch of the real run's steps"},
      {"explain", "ps_chunk_kb", "explain ps: chunk size of the tensor streams in KiB"},
      {"lab", "out", "directory of the lab's jobs, one subdirectory each, emptied on every check (\"\": runs/labN)"},
      {"lab", "node_cpus",
       "labs 4-7: the CPU share of every emulated node (\"\": the lab's own, 0.3 or 0.4); the links follow it "
       "(the lab cluster's NIC / the dilation)"},
  };
  return kOverrides;
}

absl::string_view FlagHelpFor(const Command& command, absl::string_view flag) {
  for (const FlagHelpOverride& o : FlagHelpOverrides()) {
    if (command.name == absl::string_view(o.verb) && flag == o.flag) return o.help;
  }
  return "";
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

namespace {

// (shown name, registry name) of every entry of the verb's flag lists.
std::vector<std::pair<std::string, std::string>> FlagEntries(const Command& command, bool hidden) {
  std::vector<std::pair<std::string, std::string>> entries;
  auto add = [&entries](const char* list) {
    for (absl::string_view entry : absl::StrSplit(list, ' ', absl::SkipEmpty())) {
      const size_t eq = entry.find('=');
      if (eq == absl::string_view::npos) {
        entries.emplace_back(std::string(entry), std::string(entry));
      } else {
        entries.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
      }
    }
  };
  add(command.flags);
  if (hidden) add(command.hidden_flags);
  return entries;
}

}  // namespace

std::vector<std::string> CommandFlagNames(const Command& command, bool hidden) {
  std::vector<std::string> names;
  for (auto& [shown, flag] : FlagEntries(command, hidden)) names.push_back(std::move(shown));
  return names;
}

absl::CommandLineFlag* CommandFlag(const Command& command, absl::string_view name, bool hidden) {
  for (const auto& [shown, flag] : FlagEntries(command, hidden)) {
    if (shown == name) return absl::FindCommandLineFlag(flag);
  }
  return nullptr;
}

// A usage error carries this payload (its value is unused).
constexpr char kUsagePayload[] = "ringside/usage-error";

absl::Status UsageError(absl::string_view message) {
  return AsUsageError(absl::InvalidArgumentError(message));
}

absl::Status AsUsageError(absl::Status status) {
  if (!status.ok()) status.SetPayload(kUsagePayload, absl::Cord("1"));
  return status;
}

bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsagePayload).has_value();
}

}  // namespace ringside
