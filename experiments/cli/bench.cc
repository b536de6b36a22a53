// `ringside bench step|allreduce|pushpull`: the measurements of docs/benchmarks.md
// (experiments/bench/). `bench pushpull-server` is the push-pull sweep's own child;
// `bench pushpull-beside` is calibrate's on a shaped link.
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "ddp_ring/ddp_ring.h"
#include "experiments/bench/bench.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/launch/local_job.h"

namespace ringside {
namespace {

absl::Status RunAllReduce(const CommandArgs& args) {
  // Refused before any rank starts (e.g. nccl in a build without CUDA).
  RINGSIDE_RETURN_IF_ERROR(AsUsageError(CheckProcessGroupBackend(absl::GetFlag(FLAGS_backend))));
  if (!InLaunchedJob()) {
    // --workers ranks of this very command, on loopback: the DDP job plan.
    LocalJobOptions job;
    job.self_args = args.self_args;
    return LaunchLocalDdpJob(absl::GetFlag(FLAGS_workers), job);
  }
  AllReduceBenchOptions o;
  o.backend = absl::GetFlag(FLAGS_backend);
  // GPUs have the memory for the sizes where NCCL's bandwidth levels off.
  if (o.backend == "nccl") o.max_bytes = int64_t{256} << 20;
  RINGSIDE_ASSIGN_OR_RETURN(o.algorithm, ParseAllReduceAlgorithm(absl::GetFlag(FLAGS_allreduce)));
  o.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  if (absl::GetFlag(FLAGS_gap_us) < 0) return absl::InvalidArgumentError("--gap_us must be >= 0");
  o.gap = absl::Microseconds(absl::GetFlag(FLAGS_gap_us));
  return RunAllReduceBench(o);
}

absl::Status RunPushPull() {
  PushPullBenchOptions o;
  o.chunk_bytes = int64_t{absl::GetFlag(FLAGS_ps_chunk_kb)} * 1024;
  RINGSIDE_ASSIGN_OR_RETURN(o.transport, ParsePsTransport(absl::GetFlag(FLAGS_ps_transport)));
  o.warmup = 3;
  o.iters = absl::GetFlag(FLAGS_repeats) > 1 ? absl::GetFlag(FLAGS_repeats) : 10;
  o.raw_tcp = true;  // Each transport beside raw TCP, in the same run (issue #35).
  if (!absl::GetFlag(FLAGS_pin_cpus).empty()) {
    RINGSIDE_ASSIGN_OR_RETURN(std::vector<int> cpus,
                              ParseCpuList(absl::GetFlag(FLAGS_pin_cpus), 2, "--pin_cpus"));
    o.worker_cpu = cpus[0];
    o.server_cpu = cpus[1];
  }
  std::vector<int64_t> sizes;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_sizes_mb), ',', absl::SkipEmpty())) {
    double mb = 0;
    if (!absl::SimpleAtod(part, &mb) || mb <= 0 || mb > 4096) {
      return absl::InvalidArgumentError(absl::StrFormat("--sizes_mb: bad size '%s'", part));
    }
    sizes.push_back(static_cast<int64_t>(mb * (1 << 20)) / 4 * 4);
  }
  PrintPushPullHeader(stdout);
  return RunPushPullSweep(o, sizes, [](const PushPullRow& row) { PrintPushPullRow(row, stdout); })
      .status();
}

absl::Status RunPushPullServer() {
  PushPullBenchOptions o;
  o.chunk_bytes = int64_t{absl::GetFlag(FLAGS_ps_chunk_kb)} * 1024;
  o.bytes = absl::GetFlag(FLAGS_size_bytes);
  o.server_cpu = absl::GetFlag(FLAGS_pin_cpu);
  RINGSIDE_ASSIGN_OR_RETURN(o.transport, ParsePsTransport(absl::GetFlag(FLAGS_ps_transport)));
  return RunPushPullBenchServer(o, absl::GetFlag(FLAGS_listen));
}

// The step bench's model, batch, threads (0: 1), warm-up and steps (0: default_steps)
// from the command line.
StepBenchOptions StepOptionsFromFlags(int default_steps) {
  StepBenchOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.batch = absl::GetFlag(FLAGS_batch);
  o.threads = absl::GetFlag(FLAGS_threads) > 0 ? absl::GetFlag(FLAGS_threads) : 1;
  o.warmup = absl::GetFlag(FLAGS_warmup);
  o.steps = absl::GetFlag(FLAGS_steps) > 0 ? static_cast<int>(absl::GetFlag(FLAGS_steps)) : default_steps;
  return o;
}

// calibrate's PS CPU phase through a shaped link (calibrate.cc): on the node (its
// cgroup and network namespace), the model's steps with one worker's push-pulls against
// the shard at --ps_servers (`bench pushpull-server` in another node) back to back
// beside them. One line on stdout for calibrate to read (FormatPushPullsBeside).
absl::Status RunPushPullBeside() {
  PushPullBenchOptions po;
  po.server = absl::GetFlag(FLAGS_ps_servers);
  po.bytes = absl::GetFlag(FLAGS_size_bytes);
  po.chunk_bytes = int64_t{absl::GetFlag(FLAGS_ps_chunk_kb)} * 1024;
  RINGSIDE_ASSIGN_OR_RETURN(po.transport, ParsePsTransport(absl::GetFlag(FLAGS_ps_transport)));
  if (po.server.empty() || po.bytes < 4) {
    return absl::InvalidArgumentError("bench pushpull-beside needs --ps_servers=HOST:PORT and --size_bytes >= 4");
  }
  StepBenchOptions so = StepOptionsFromFlags(/*default_steps=*/5);
  so.measure_floor = false;
  absl::StatusOr<StepBenchResult> step;
  RINGSIDE_ASSIGN_OR_RETURN(PushPullLoad load, PushPullsBeside(po, [&]() {
                              step = MeasureStepBench(so);
                              return step.status();
                            }));
  absl::PrintF("%s\n", FormatPushPullsBeside(load, step->rounds.front().mean_step_ms));
  return absl::OkStatus();
}

absl::Status RunStep() {
  StepBenchOptions o = StepOptionsFromFlags(/*default_steps=*/200);
  o.repeats = absl::GetFlag(FLAGS_repeats);
  RINGSIDE_ASSIGN_OR_RETURN(o.device, ParseDevice(absl::GetFlag(FLAGS_device)));
  RINGSIDE_ASSIGN_OR_RETURN(o.precision, ParseGemmPrecision(absl::GetFlag(FLAGS_precision)));
  return RunStepBench(o);
}

}  // namespace

absl::Status RunBenchVerb(const CommandArgs& args) {
  const std::string which = args.positional.size() == 1 ? args.positional[0] : "";
  if (which == "allreduce") return RunAllReduce(args);
  if (which == "pushpull") return RunPushPull();
  if (which == "pushpull-server") return RunPushPullServer();
  if (which == "pushpull-beside") return RunPushPullBeside();
  if (which == "step") return RunStep();
  return absl::InvalidArgumentError(
      "usage: ringside bench step|allreduce|pushpull [--model --batch --threads --steps | --workers | --sizes_mb --repeats --pin_cpus]");
}

}  // namespace ringside
