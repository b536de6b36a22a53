// ringside: the one user-facing binary.
//   ringside train --strategy=single --model=... --dataset=... --epochs=N ...
//   ringside bench step --model=... --batch=B --threads=T
// Errors print one line "ringside: error: ..." and exit 1.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "grpc/support/log.h"
#include "ddp_ring/ddp_ring.h"
#include "experiments/calibrate_command.h"
#include "experiments/compare_command.h"
#include "experiments/demo_command.h"
#include "experiments/emulated_launch.h"
#include "experiments/experiments.h"
#include "experiments/report_command.h"
#include "experiments/simulate_command.h"
#include "ps_server/ps_server.h"
#include "ps_worker/ps_worker.h"

ABSL_FLAG(std::string, strategy, "single", "single, ps (parameter server) or ddp (all-reduce ring)");
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
ABSL_FLAG(int32_t, grad_accum, 1, "micro-batches of --batch accumulated per optimizer step");
ABSL_FLAG(bool, prefetch, true,
          "gather the next batch right after backward, while communication finishes");
ABSL_FLAG(int32_t, workers, 2, "ps/ddp: workers (ranks) in the job");
ABSL_FLAG(std::string, backend, "gloo", "ddp: process-group backend, gloo (CPU) or nccl (GPU)");
ABSL_FLAG(double, bucket_cap_mb, 25, "ddp: gradient bucket cap in MB");
ABSL_FLAG(double, first_bucket_mb, 1, "ddp: cap of the first bucket (the last layers) in MB");
ABSL_FLAG(bool, overlap, true, "ddp: all-reduce buckets during backward (false: after it)");
ABSL_FLAG(std::string, allreduce, "auto",
          "ddp (gloo): auto (recursive-doubling at 2 ranks, else ring), ring, "
          "halving-doubling or recursive-doubling");
ABSL_FLAG(int32_t, timeout_s, 60,
          "ps/ddp: seconds a process may wait on its peers (rendezvous, collective, slowest "
          "worker) before the job fails");
ABSL_FLAG(std::string, network, "",
          "ps/ddp local launch: emulated links, e.g. bw=1gbit,delay=0.5ms[,master.bw=10gbit] "
          "(each process in its own network namespace; needs root)");
ABSL_FLAG(int32_t, ps_shards, 1, "ps: server shards, each owning a contiguous slice of the parameters");
ABSL_FLAG(std::string, ps_sync, "bsp", "ps: bsp, ssp:K (bounded staleness K) or asp");
ABSL_FLAG(bool, ps_colocated, false, "ps: run every shard inside worker 0 (a DP-style master)");
ABSL_FLAG(int32_t, ps_chunk_kb, 1024, "ps: chunk size of the tensor streams in KiB");
ABSL_FLAG(std::string, ps_servers, "",
          "ps roles: host:port of shard 0,1,... (ps-worker; set by train --strategy=ps)");
ABSL_FLAG(int32_t, worker_id, 0, "ps-worker: this worker's id in [0, --workers)");
ABSL_FLAG(int32_t, shard, 0, "ps-server: the shard to host, in [0, --ps_shards)");
ABSL_FLAG(std::string, listen, "0.0.0.0:0", "ps-server: host:port to listen on");
ABSL_FLAG(int32_t, ps_debug_worker, -1, "ps test hook: the worker the next two flags apply to");
ABSL_FLAG(int32_t, ps_debug_delay_ms, 0, "ps test hook: that worker sleeps this long every step");
ABSL_FLAG(int64_t, ps_debug_crash_at_step, -1, "ps test hook: that worker dies at this step");
ABSL_FLAG(int32_t, nproc_per_node, 1, "launch: processes on this node");
ABSL_FLAG(int32_t, nnodes, 1, "launch: nodes in the job");
ABSL_FLAG(int32_t, node_rank, 0, "launch: this node's index");
ABSL_FLAG(std::string, master_addr, "127.0.0.1", "launch: address of rank 0 (hosts the store)");
ABSL_FLAG(int32_t, master_port, 29500, "launch: port of rank 0's store (0: pick a free one)");
ABSL_FLAG(int32_t, warmup, 20, "bench: untimed warm-up steps");
ABSL_FLAG(int32_t, gap_us, 0, "bench allreduce: idle microseconds before each timed all-reduce");
ABSL_FLAG(std::string, calibration, "", "simulate/report: calibration JSON written by `ringside calibrate`");
ABSL_FLAG(std::string, links, "1gbit,10gbit,100gbit", "simulate: link speeds");
ABSL_FLAG(int32_t, max_workers, 1024, "simulate: largest worker count (powers of two up to it)");
ABSL_FLAG(double, model_mb, 0, "simulate: model size in MB (0: the calibrated model's)");
ABSL_FLAG(std::string, spec, "", "compare: experiment spec (protobuf text format, see experiments/*.textproto)");
ABSL_FLAG(std::string, sizes_mb, "1,4,16,64,256", "bench pushpull: model sizes in MiB");
ABSL_FLAG(int64_t, size_bytes, 0, "bench pushpull-server: model size in bytes");
ABSL_FLAG(std::string, pin_cpus, "",
          "bench pushpull: W,S runs the worker on CPU W and the shard on CPU S, one core "
          "each (as iperf3 -A); empty: the scheduler places them");
ABSL_FLAG(int, pin_cpu, -1, "bench pushpull-server: the shard's CPU (-1: not pinned)");
ABSL_FLAG(int32_t, repeats, 1, "bench: measurements to print");

namespace {

constexpr char kUsage[] =
    "ringside: parameter server vs DDP ring, measured.\n"
    "  ringside demo [--out=runs/demo]   (single vs PS vs DDP on 1, 2, 4 workers, with a report)\n"
    "  ringside train --strategy=single --model=mlp:784-256-256-10 --dataset=fashion-mnist\n"
    "                 --epochs=5 --batch=128 --lr=0.02 --momentum=0.9 --out=DIR [--resume]\n"
    "  ringside train --strategy=ddp --workers=2 --backend=gloo ...    (launches the ranks)\n"
    "  ringside train --strategy=ps --workers=N --ps_shards=S --ps_sync=bsp|ssp:K|asp\n"
    "                 [--ps_colocated] ...          (launches S shards and N workers here)\n"
    "  ringside ps-server --shard=I --listen=HOST:PORT --workers=N --ps_shards=S ...\n"
    "  ringside ps-worker --worker_id=I --ps_servers=H0:P0,H1:P1,... --workers=N ...\n"
    "  ringside launch --nproc_per_node=N [--nnodes --node_rank --master_addr --master_port]\n"
    "                  -- PROGRAM ARGS...        (torchrun-style; sets RANK, WORLD_SIZE, ...)\n"
    "  ringside compare --spec=experiments/quick.textproto --out=runs/quick\n"
    "  ringside report runs/quick        (report.md and a self-contained report.html)\n"
    "  ringside calibrate --model=mlp:784-256-256-10 --batch=128 --out=calibration.json\n"
    "  ringside simulate --calibration=calibration.json --links=1gbit,10gbit [--max_workers=1024]\n"
    "  ringside bench step --model=mlp:784-512-512-10 --batch=128 --threads=1 [--steps=200]\n"
    "  ringside bench allreduce --workers=2 [--allreduce=ring|halving-doubling]\n"
    "  ringside bench pushpull --sizes_mb=1,4,16,64,256 --repeats=20 [--pin_cpus=0,1]\n";

ringside::RunConfig ConfigFromFlags() {
  ringside::RunConfig c;
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
  c.set_grad_accum(absl::GetFlag(FLAGS_grad_accum));
  c.set_prefetch(absl::GetFlag(FLAGS_prefetch));
  if (c.strategy() == "ddp") {
    c.set_backend(absl::GetFlag(FLAGS_backend));
    c.set_bucket_cap_bytes(static_cast<int64_t>(absl::GetFlag(FLAGS_bucket_cap_mb) * (1 << 20)));
    c.set_first_bucket_bytes(static_cast<int64_t>(absl::GetFlag(FLAGS_first_bucket_mb) * (1 << 20)));
    c.set_overlap(absl::GetFlag(FLAGS_overlap));
    c.set_allreduce(absl::GetFlag(FLAGS_allreduce));
  }
  if (c.strategy() == "ps") {
    c.set_world_size(absl::GetFlag(FLAGS_workers));
    c.set_ps_shards(absl::GetFlag(FLAGS_ps_shards));
    const std::string sync = absl::GetFlag(FLAGS_ps_sync);
    absl::StatusOr<ringside::SyncPolicy> policy = ringside::ParseSyncPolicy(sync);
    c.set_ps_sync(policy.ok() ? ringside::SyncModeName(policy->mode) : sync);
    c.set_ps_staleness(policy.ok() ? policy->staleness : 0);
    c.set_ps_chunk_bytes(int64_t{absl::GetFlag(FLAGS_ps_chunk_kb)} * 1024);
    c.set_ps_colocated(absl::GetFlag(FLAGS_ps_colocated));
  }
  return c;
}

// Flag checks shared by every PS process, before anything is started or loaded.
absl::Status CheckPsFlags(const ringside::RunConfig& c) {
  if (c.world_size() < 1) return absl::InvalidArgumentError(absl::StrFormat("--workers must be >= 1, got %d", c.world_size()));
  if (c.ps_shards() < 1) return absl::InvalidArgumentError(absl::StrFormat("--ps_shards must be >= 1, got %d", c.ps_shards()));
  if (absl::Status s = ringside::ParseSyncPolicy(absl::GetFlag(FLAGS_ps_sync)).status(); !s.ok()) return s;
  if (absl::GetFlag(FLAGS_ps_chunk_kb) < 1 || absl::GetFlag(FLAGS_ps_chunk_kb) > 65536) {
    return absl::InvalidArgumentError(absl::StrFormat("--ps_chunk_kb must be in [1, 65536], got %d", absl::GetFlag(FLAGS_ps_chunk_kb)));
  }
  if (c.batch() < 1) return absl::InvalidArgumentError(absl::StrFormat("--batch must be >= 1, got %d", c.batch()));
  if (!(c.lr() >= 0)) return absl::InvalidArgumentError(absl::StrFormat("--lr must be >= 0, got %g", c.lr()));
  if (absl::GetFlag(FLAGS_timeout_s) < 1) return absl::InvalidArgumentError("--timeout_s must be >= 1");
  return absl::OkStatus();
}

absl::Status RunPsWorkerRole(const ringside::RunConfig& c, int worker_id) {
  ringside::PsWorkerOptions o;
  o.run.config = c;
  o.worker_id = worker_id;
  if (worker_id < 0 || worker_id >= c.world_size()) {
    return absl::InvalidArgumentError(absl::StrFormat("--worker_id=%d is outside [0, --workers=%d)", worker_id, c.world_size()));
  }
  absl::StatusOr<std::vector<std::string>> servers = ringside::ParseServerList(absl::GetFlag(FLAGS_ps_servers));
  if (!servers.ok()) return servers.status();
  o.servers = *servers;
  o.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  o.run.out_dir = absl::GetFlag(FLAGS_out);
  o.run.resume = absl::GetFlag(FLAGS_resume);
  o.run.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  o.run.eval_batch = absl::GetFlag(FLAGS_eval_batch);
  if (absl::GetFlag(FLAGS_ps_debug_worker) == worker_id) {
    o.debug.step_delay = absl::Milliseconds(absl::GetFlag(FLAGS_ps_debug_delay_ms));
    o.debug.crash_at_step = absl::GetFlag(FLAGS_ps_debug_crash_at_step);
  }
  absl::StatusOr<ringside::TrainResult> r = ringside::RunPsWorker(o);
  if (!r.ok()) return r.status();
  if (worker_id == 0) {
    absl::PrintF("steps: %d, %.0f samples/s (all workers)\n", r->steps, r->job_samples_per_sec);
    absl::PrintF("test loss: %.4f\n", r->test_loss);
    absl::PrintF("test accuracy: %.4f\n", r->test_accuracy);
  }
  return absl::OkStatus();
}

absl::Status RunPsServerRole(const ringside::RunConfig& c, int shard, const std::string& listen) {
  ringside::PsServerRoleOptions o;
  o.config = c;
  o.shard = shard;
  o.address = listen;
  o.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  o.out_dir = absl::GetFlag(FLAGS_out);
  return ringside::RunPsServer(o);
}

// `ringside train --strategy=ps`: outside a launched job, launches the shards and the
// workers on this machine (ranks 0..S-1 are shards unless colocated, the rest workers);
// inside it, plays the role its RANK gives it.
absl::Status RunPs(int argc, char** argv) {
  ringside::RunConfig c = ConfigFromFlags();
  if (absl::Status s = CheckPsFlags(c); !s.ok()) return s;
  const int shards = c.ps_shards();
  const bool colocated = c.ps_colocated();
  if (!ringside::InLaunchedJob()) {
    ringside::LaunchOptions lo;
    lo.nproc_per_node = c.world_size() + (colocated ? 0 : shards);
    lo.master_port = 0;  // Unused by PS roles; keeps the launcher from a fixed port.
    // Emulated links: every process on its own node; the shards' nodes (or worker 0's,
    // colocated) have the role "master" for per-role overrides.
    std::vector<std::string> roles;
    for (int s = 0; s < (colocated ? 0 : shards); ++s) roles.push_back("master");
    for (int w = 0; w < c.world_size(); ++w) roles.push_back(colocated && w == 0 ? "master" : "worker");
    ringside::InterruptGuard guard;  // An interrupt must not skip the teardown.
    absl::StatusOr<std::unique_ptr<ringside::EmulatedNetwork>> net =
        ringside::PlaceRanksInNetwork(absl::GetFlag(FLAGS_network), roles, &lo);
    if (!net.ok()) return net.status();
    if (guard.interrupted()) return absl::CancelledError("interrupted while setting up the network");
    std::string servers;
    for (int s = 0; s < shards; ++s) {
      absl::StatusOr<int> port = ringside::PickFreePort();
      if (!port.ok()) return port.status();
      // The node that hosts shard s: its own, or worker 0's when colocated.
      const std::string host = *net == nullptr ? "127.0.0.1" : (*net)->address(colocated ? 0 : s);
      absl::StrAppend(&servers, s > 0 ? "," : "", host, ":", *port);
      if (!colocated) lo.labels.push_back(absl::StrCat("shard ", s));
    }
    for (int w = 0; w < c.world_size(); ++w) lo.labels.push_back(absl::StrCat("worker ", w));
    absl::StatusOr<std::string> self = ringside::SelfExePath();
    if (!self.ok()) return self.status();
    lo.command.push_back(*self);
    for (int i = 1; i < argc; ++i) lo.command.push_back(argv[i]);
    lo.command.push_back(absl::StrCat("--ps_servers=", servers));
    return ringside::Launch(lo);
  }
  absl::StatusOr<ringside::DdpEnv> env = ringside::ReadDdpEnv();
  if (!env.ok()) return env.status();
  if (!colocated && env->rank < shards) {
    absl::StatusOr<std::vector<std::string>> servers = ringside::ParseServerList(absl::GetFlag(FLAGS_ps_servers));
    if (!servers.ok()) return servers.status();
    if (static_cast<int>(servers->size()) != shards) {
      return absl::InvalidArgumentError("--ps_servers does not list --ps_shards addresses");
    }
    return RunPsServerRole(c, env->rank, (*servers)[env->rank]);
  }
  return RunPsWorkerRole(c, env->rank - (colocated ? 0 : shards));
}

// `ringside train --strategy=ddp`: inside a launched job this process is one rank;
// otherwise it launches --workers ranks of itself on this machine.
absl::Status RunDdp(int argc, char** argv) {
  const ringside::RunConfig c = ConfigFromFlags();
  if (!ringside::InLaunchedJob()) {
    const int workers = absl::GetFlag(FLAGS_workers);
    if (workers < 1) return absl::InvalidArgumentError(absl::StrFormat("--workers must be >= 1, got %d", workers));
    ringside::LaunchOptions lo;
    lo.nproc_per_node = workers;
    lo.master_addr = "127.0.0.1";
    lo.master_port = 0;
    absl::StatusOr<std::string> self = ringside::SelfExePath();
    if (!self.ok()) return self.status();
    lo.command.push_back(*self);
    for (int i = 1; i < argc; ++i) lo.command.push_back(argv[i]);
    // Emulated links: every rank on its own node; rank 0's node hosts the store.
    ringside::InterruptGuard guard;  // An interrupt must not skip the teardown.
    absl::StatusOr<std::unique_ptr<ringside::EmulatedNetwork>> net = ringside::PlaceRanksInNetwork(
        absl::GetFlag(FLAGS_network), std::vector<std::string>(workers, "worker"), &lo);
    if (!net.ok()) return net.status();
    if (guard.interrupted()) return absl::CancelledError("interrupted while setting up the network");
    if (*net != nullptr) {
      absl::StatusOr<int> port = ringside::PickFreePort();
      if (!port.ok()) return port.status();
      lo.master_addr = (*net)->address(0);
      lo.master_port = *port;  // Inside rank 0's own namespace: free.
      for (int r = 0; r < workers; ++r) {
        lo.rank_env.push_back({absl::StrCat("RINGSIDE_HOSTNAME=", (*net)->address(r))});
      }
    }
    return ringside::Launch(lo);
  }
  absl::StatusOr<ringside::DdpEnv> env = ringside::ReadDdpEnv();
  if (!env.ok()) return env.status();
  ringside::DdpWorkerOptions o;
  o.run.config = c;
  o.backend = c.backend();
  o.reducer.bucket_cap_bytes = c.bucket_cap_bytes();
  o.reducer.first_bucket_bytes = c.first_bucket_bytes();
  o.reducer.overlap = c.overlap();
  absl::StatusOr<ringside::AllReduceAlgorithm> algorithm =
      ringside::ParseAllReduceAlgorithm(c.allreduce());
  if (!algorithm.ok()) return algorithm.status();
  o.algorithm = *algorithm;
  const int timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (timeout_s < 1) return absl::InvalidArgumentError("--timeout_s must be >= 1");
  o.timeout = absl::Seconds(timeout_s);
  o.run.out_dir = absl::GetFlag(FLAGS_out);
  o.run.resume = absl::GetFlag(FLAGS_resume);
  o.run.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  o.run.eval_batch = absl::GetFlag(FLAGS_eval_batch);
  if (c.batch() < 1) return absl::InvalidArgumentError(absl::StrFormat("--batch must be >= 1, got %d", c.batch()));
  if (!(c.lr() >= 0)) return absl::InvalidArgumentError(absl::StrFormat("--lr must be >= 0, got %g", c.lr()));
  absl::StatusOr<ringside::TrainResult> r = ringside::RunDdpWorker(*env, o);
  if (!r.ok()) return r.status();
  if (env->rank == 0) {
    absl::PrintF("steps: %d, %.0f samples/s (all ranks)\n", r->steps, r->job_samples_per_sec);
    absl::PrintF("test loss: %.4f\n", r->test_loss);
    absl::PrintF("test accuracy: %.4f\n", r->test_accuracy);
  }
  return absl::OkStatus();
}

absl::Status Dispatch(const std::vector<char*>& args, int argc, char** argv) {
  if (args.size() < 2) {
    return absl::InvalidArgumentError("missing command (train, launch, bench); see --help");
  }
  const std::string command = args[1];
  if (command == "train") {
    if (args.size() > 2) {
      return absl::InvalidArgumentError(absl::StrFormat("unexpected argument '%s'", args[2]));
    }
    if (absl::GetFlag(FLAGS_strategy) == "ddp") return RunDdp(argc, argv);
    if (absl::GetFlag(FLAGS_strategy) == "ps") return RunPs(argc, argv);
    ringside::RunOptions o;
    o.config = ConfigFromFlags();
    o.out_dir = absl::GetFlag(FLAGS_out);
    o.resume = absl::GetFlag(FLAGS_resume);
    o.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
    o.eval_batch = absl::GetFlag(FLAGS_eval_batch);
    return ringside::RunTrainCommand(o);
  }
  if (command == "compare") {
    if (args.size() > 2) {
      return absl::InvalidArgumentError(absl::StrFormat("unexpected argument '%s'", args[2]));
    }
    ringside::CompareOptions o;
    o.spec_path = absl::GetFlag(FLAGS_spec);
    o.out_dir = absl::GetFlag(FLAGS_out);
    if (o.spec_path.empty()) return absl::InvalidArgumentError("compare needs --spec=FILE");
    if (o.out_dir.empty()) return absl::InvalidArgumentError("compare needs --out=DIR");
    return ringside::RunCompare(o);
  }
  if (command == "demo") {
    if (args.size() > 2) {
      return absl::InvalidArgumentError(absl::StrFormat("unexpected argument '%s'", args[2]));
    }
    const std::string out = absl::GetFlag(FLAGS_out).empty() ? "runs/demo" : absl::GetFlag(FLAGS_out);
    return ringside::RunDemo(out);
  }
  if (command == "calibrate") {
    if (args.size() > 2) {
      return absl::InvalidArgumentError(absl::StrFormat("unexpected argument '%s'", args[2]));
    }
    const std::string out = absl::GetFlag(FLAGS_out).empty() ? "calibration.json" : absl::GetFlag(FLAGS_out);
    ringside::CalibrateOptions o;
    o.model = absl::GetFlag(FLAGS_model);
    o.batch = absl::GetFlag(FLAGS_batch);
    o.threads = absl::GetFlag(FLAGS_threads) > 0 ? absl::GetFlag(FLAGS_threads) : 1;
    absl::StatusOr<std::string> self = ringside::SelfExePath();
    if (!self.ok()) return self.status();
    o.self_exe = *self;
    o.work_dir = out + ".runs";
    absl::StatusOr<ringside::Calibration> c = ringside::Calibrate(o);
    if (!c.ok()) return c.status();
    if (absl::Status s = ringside::WriteCalibrationFile(*c, out); !s.ok()) return s;
    absl::PrintF("%s\ncalibration: %s\n", ringside::CalibrationToJson(*c), out);
    return absl::OkStatus();
  }
  if (command == "simulate") {
    if (args.size() > 2) {
      return absl::InvalidArgumentError(absl::StrFormat("unexpected argument '%s'", args[2]));
    }
    if (absl::GetFlag(FLAGS_calibration).empty()) {
      return absl::InvalidArgumentError("simulate needs --calibration=FILE (from `ringside calibrate`)");
    }
    ringside::SimulateOptions o;
    absl::StatusOr<ringside::Calibration> c = ringside::ReadCalibrationFile(absl::GetFlag(FLAGS_calibration));
    if (!c.ok()) return c.status();
    o.calibration = *c;
    o.model_bytes = absl::GetFlag(FLAGS_model_mb) * 1e6;
    absl::StatusOr<std::vector<double>> links = ringside::ParseBandwidthList(absl::GetFlag(FLAGS_links));
    if (!links.ok()) return links.status();
    o.link_bytes_per_s = *links;
    o.workers = ringside::PowersOfTwo(absl::GetFlag(FLAGS_max_workers));
    return ringside::RunSimulate(o, stdout);
  }
  if (command == "report") {
    if (args.size() != 3) return absl::InvalidArgumentError("usage: ringside report DIR");
    absl::Status s = ringside::RunReport(args[2]);
    if (s.ok()) absl::PrintF("report: %s/report.html (and report.md)\n", args[2]);
    return s;
  }
  if (command == "ps-server" || command == "ps-worker") {
    if (args.size() > 2) {
      return absl::InvalidArgumentError(absl::StrFormat("unexpected argument '%s'", args[2]));
    }
    absl::SetFlag(&FLAGS_strategy, "ps");
    ringside::RunConfig c = ConfigFromFlags();
    if (absl::Status s = CheckPsFlags(c); !s.ok()) return s;
    if (command == "ps-server") {
      return RunPsServerRole(c, absl::GetFlag(FLAGS_shard), absl::GetFlag(FLAGS_listen));
    }
    return RunPsWorkerRole(c, absl::GetFlag(FLAGS_worker_id));
  }
  if (command == "launch") {
    ringside::LaunchOptions lo;
    lo.nproc_per_node = absl::GetFlag(FLAGS_nproc_per_node);
    lo.nnodes = absl::GetFlag(FLAGS_nnodes);
    lo.node_rank = absl::GetFlag(FLAGS_node_rank);
    lo.master_addr = absl::GetFlag(FLAGS_master_addr);
    lo.master_port = absl::GetFlag(FLAGS_master_port);
    for (size_t i = 2; i < args.size(); ++i) lo.command.push_back(args[i]);
    return ringside::Launch(lo);
  }
  if (command == "bench" && args.size() == 3 && std::string(args[2]) == "allreduce") {
    if (!ringside::InLaunchedJob()) {
      // Launch --workers ranks of this very command.
      ringside::LaunchOptions lo;
      lo.nproc_per_node = absl::GetFlag(FLAGS_workers);
      lo.master_port = 0;
      lo.command.push_back("/proc/self/exe");
      for (int i = 1; i < argc; ++i) lo.command.push_back(argv[i]);
      return ringside::Launch(lo);
    }
    ringside::AllReduceBenchOptions o;
    absl::StatusOr<ringside::AllReduceAlgorithm> algorithm =
        ringside::ParseAllReduceAlgorithm(absl::GetFlag(FLAGS_allreduce));
    if (!algorithm.ok()) return algorithm.status();
    o.algorithm = *algorithm;
    o.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
    if (absl::GetFlag(FLAGS_gap_us) < 0) {
      return absl::InvalidArgumentError("--gap_us must be >= 0");
    }
    o.gap = absl::Microseconds(absl::GetFlag(FLAGS_gap_us));
    return ringside::RunAllReduceBench(o);
  }
  if (command == "bench" && args.size() == 3 && std::string(args[2]) == "pushpull") {
    ringside::PushPullBenchOptions o;
    o.chunk_bytes = int64_t{absl::GetFlag(FLAGS_ps_chunk_kb)} * 1024;
    o.warmup = 3;
    o.iters = absl::GetFlag(FLAGS_repeats) > 1 ? absl::GetFlag(FLAGS_repeats) : 10;
    if (!absl::GetFlag(FLAGS_pin_cpus).empty()) {
      RINGSIDE_ASSIGN_OR_RETURN(std::vector<int> cpus,
                                ringside::ParseCpuList(absl::GetFlag(FLAGS_pin_cpus), 2, "--pin_cpus"));
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
    return ringside::RunPushPullSweep(o, sizes);
  }
  if (command == "bench" && args.size() == 3 && std::string(args[2]) == "pushpull-server") {
    ringside::PushPullBenchOptions o;
    o.chunk_bytes = int64_t{absl::GetFlag(FLAGS_ps_chunk_kb)} * 1024;
    o.bytes = absl::GetFlag(FLAGS_size_bytes);
    o.server_cpu = absl::GetFlag(FLAGS_pin_cpu);
    return ringside::RunPushPullBenchServer(o, absl::GetFlag(FLAGS_listen));
  }
  if (command == "bench") {
    if (args.size() != 3 || std::string(args[2]) != "step") {
      return absl::InvalidArgumentError(
          "usage: ringside bench step|allreduce|pushpull [--model --batch --threads --steps | --workers | --sizes_mb --repeats --pin_cpus]");
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
      absl::StrFormat("unknown command '%s' (expected train, launch or bench)", command));
}

}  // namespace

// gRPC's own log lines (e.g. "Address already in use" before the store reports the
// same failure as a status) would break the one-error-line contract.
void DropGrpcLog(gpr_log_func_args*) {}

int main(int argc, char** argv) {
  // Tensor streams allocate and free megabyte buffers all the time: keep them in the
  // heap instead of fresh mmap()s, whose pages the kernel faults in and zeroes again
  // for every chunk (about 10% of a push-pull's CPU time).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Debian's abseil checks every lock acquisition for cycles unless told not to;
  // the unit tests keep the check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Before gRPC starts (it reads the variable once), and inherited by every process
  // this one launches: two of gRPC 1.51's transport experiments that go together.
  // tcp_frame_size_tuning tells the TCP layer how many bytes the message being read
  // still needs; tcp_rcv_lowat turns that into SO_RCVLOWAT, so a thread waiting for a
  // 1 MiB chunk is woken near its end instead of for every batch of segments. A PS
  // step on Fashion-MNIST waits about 0.4 ms less for its parameters
  // (docs/benchmarks.md, tenth session). A GRPC_EXPERIMENTS of the user's wins.
  setenv("GRPC_EXPERIMENTS", "tcp_frame_size_tuning,tcp_rcv_lowat", /*overwrite=*/0);
  absl::SetProgramUsageMessage(kUsage);
  if (std::getenv("RINGSIDE_GRPC_LOG") == nullptr) gpr_set_log_function(DropGrpcLog);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  absl::Status status = Dispatch(args, argc, argv);
  if (!status.ok()) {
    absl::FPrintF(stderr, "ringside: error: %s\n", status.message());
    return 1;
  }
  return 0;
}
