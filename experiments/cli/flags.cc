#include "experiments/cli/flags.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/dataset.h"
#include "common/job_env.h"
#include "common/ops_factory.h"
#include "common/ps_placement.h"
#include "common/rpc_security.h"
#include "common/run_config.h"
#include "common/status_macros.h"
#include "ddp_ring/allreduce_algorithm.h"
#include "ddp_ring/process_group_factory.h"
#include "ddp_ring/reducer.h"
#include "experiments/costmodel/calibrate.h"
#include "experiments/netem/netem.h"
#include "ps_server/ps_server.h"

ABSL_FLAG(std::string, strategy, ringside::kDefaultStrategy,
          "single, dp (DataParallel: replica threads of one process), ps (parameter server) "
          "or ddp (all-reduce ring)");
ABSL_FLAG(std::string, model, ringside::kDefaultModel, "mlp:W0-W1-...-Wn or cnn:lenet");
ABSL_FLAG(std::string, dataset, ringside::kDefaultDataset,
          "fashion-mnist, synthetic[:train=N,test=M,shape=CxHxW,classes=K,seed=S] or a "
          "directory of MNIST-format IDX files");
ABSL_FLAG(int32_t, epochs, ringside::kDefaultEpochs, "epochs to train");
ABSL_FLAG(int64_t, steps, 0, "stop after this many steps in total (0: no limit)");
ABSL_FLAG(int32_t, batch, ringside::kDefaultBatch,
          "batch size per worker (ps, ddp) or replica (dp): the global batch is batch x workers");
ABSL_FLAG(double, lr, ringside::kDefaultLr, "SGD learning rate");
ABSL_FLAG(double, momentum, ringside::kDefaultMomentum, "SGD momentum");
ABSL_FLAG(double, weight_decay, ringside::kDefaultWeightDecay, "SGD weight decay");
ABSL_FLAG(bool, nesterov, false, "Nesterov momentum");
ABSL_FLAG(uint64_t, seed, ringside::kDefaultSeed, "seed for initialisation and data order");
ABSL_FLAG(int32_t, threads, ringside::kDefaultThreads,
          "OpenBLAS threads per process (0: OpenBLAS decides, e.g. from OMP_NUM_THREADS)");
ABSL_FLAG(std::string, device, ringside::kDefaultDevice,
          "cpu, cuda (in a launched job: the GPU of LOCAL_RANK; else GPU 0) or cuda:K");
ABSL_FLAG(std::string, precision, ringside::kDefaultPrecision,
          "GEMM precision on the GPU: fp32 (as the CPU), tf32 or bf16 (faster, less exact)");
ABSL_FLAG(bool, drop_last, false, "drop the tail of the shuffled data instead of padding");
ABSL_FLAG(std::string, out, "", "output directory: metrics.jsonl, trace.json, checkpoint.bin");
ABSL_FLAG(bool, resume, false, "continue from OUT/checkpoint.bin");
ABSL_FLAG(int64_t, checkpoint_every, 0, "also checkpoint every N steps");
ABSL_FLAG(int32_t, eval_batch, ringside::kDefaultEvalBatch, "batch size for evaluation");
ABSL_FLAG(int32_t, grad_accum, ringside::kDefaultGradAccum, "micro-batches of --batch accumulated per optimizer step");
ABSL_FLAG(bool, prefetch, ringside::kDefaultPrefetch,
          "gather the next batch right after backward, while communication finishes");
ABSL_FLAG(int32_t, workers, 2, "ps/ddp: workers (ranks) in the job; dp: replicas (threads, 1-64)");
ABSL_FLAG(std::string, backend, "gloo", "ddp: process-group backend, gloo (CPU) or nccl (GPU)");
ABSL_FLAG(double, bucket_cap_mb, ringside::kDefaultBucketCapBytes / double{1 << 20}, "ddp: gradient bucket cap in MB");
ABSL_FLAG(double, first_bucket_mb, ringside::kDefaultFirstBucketBytes / double{1 << 20}, "ddp: cap of the first bucket (the last layers) in MB");
ABSL_FLAG(bool, overlap, true, "ddp: all-reduce buckets during backward (false: after it)");
ABSL_FLAG(std::string, compress, "none",
          "ddp, ps over tcp, and simulate's DDP rows: gradients on the wire as none (float32), fp16 or bf16 "
          "(half the bytes; the ring sums in float32 between hops, the PS's shards keep float32); ddp over "
          "gloo also topk:F (each bucket's F x n largest, 0 < F <= 1) or powersgd:R (rank R), with error "
          "feedback (append :no_ef for none)");
ABSL_FLAG(std::string, allreduce, "auto",
          "ddp (gloo): auto (recursive-doubling at 2 ranks, else ring), ring, "
          "halving-doubling or recursive-doubling");
ABSL_FLAG(int32_t, timeout_s, static_cast<int32_t>(absl::ToInt64Seconds(ringside::kDefaultPeerTimeout)),
          "ps/ddp: seconds a process may wait on its peers (rendezvous, collective, slowest "
          "worker) before the job fails");
ABSL_FLAG(std::string, network, "",
          "ps/ddp local launch: emulated links, e.g. bw=1gbit,delay=0.5ms[,master.bw=10gbit] "
          "(each process in its own network namespace; needs root)");
ABSL_FLAG(std::string, cluster, "",
          "the target cluster: a preset (aws-p3.16xlarge, byteps-osdi20, dgx-a100, gige-cpu, "
          "horovod-2017) or a profile file (docs/cluster.md); train/demo: links = its NIC / the "
          "dilation; simulate: predicts it, no calibration needed");
ABSL_FLAG(std::string, node_cpus, "",
          "local launch (train, launch): a CPU share per emulated node: CPUs per node, "
          "e.g. 0.5 or 1, or auto (the machine's cores / the nodes); a cgroup each, needs "
          "root; --strategy=single runs on one such node");
ABSL_FLAG(int32_t, ranks_per_node, 1,
          "local launch (train, launch): processes per emulated node, sharing its CPU share "
          "and link (ddp: K consecutive ranks; ps: shard i with worker i, then the rest); "
          "must divide the processes");
ABSL_FLAG(std::string, slow_node, "",
          "local launch (train, launch): R:F, the node holding rank R (ps: worker R) gets F "
          "(0 < F <= 1) times the others' CPU share; needs --node_cpus");
ABSL_FLAG(int32_t, ps_shards, 1, "ps: server shards, each owning a contiguous slice of the parameters");
ABSL_FLAG(std::string, ps_sync, "bsp", "ps: bsp, ssp:K (bounded staleness K) or asp");
ABSL_FLAG(bool, ps_colocated, false, "ps: run every shard inside worker 0 (a DP-style master)");
ABSL_FLAG(bool, ps_worker_summers, false,
          "ps, --ps_mode=summation: every worker also hosts a summation server, as BytePS colocates "
          "them, beside the --ps_shards dedicated ones (0 to --workers - 1); the slices follow "
          "BytePS's optimum");
ABSL_FLAG(int32_t, ps_chunk_kb, static_cast<int32_t>(ringside::kDefaultPsChunkBytes / 1024), "ps: chunk size of the tensor streams in KiB");
ABSL_FLAG(std::string, ps_servers, "",
          "ps roles: host:port of shard 0,1,... (ps-worker; set by train --strategy=ps)");
ABSL_FLAG(int32_t, worker_id, 0, "ps-worker: this worker's id in [0, --workers)");
ABSL_FLAG(int32_t, shard, 0, "ps-server: the shard to host, in [0, --ps_shards)");
ABSL_FLAG(std::string, listen, "127.0.0.1:0",
          "ps-server: host:port to listen on (loopback unless told; e.g. --listen=10.0.0.5:7000 "
          "for other machines, with a token and TLS: docs/security.md)");
ABSL_FLAG(int32_t, warmup, 20, "bench: untimed warm-up steps");
ABSL_FLAG(int32_t, gap_us, 0, "bench allreduce: idle microseconds before each timed all-reduce");
ABSL_FLAG(std::string, calibration, "", "simulate/report: calibration JSON written by `ringside calibrate`");
ABSL_FLAG(int32_t, calibration_repeats, ringside::kDefaultCalibrationRepeats,
          "calibrate: rounds of its four phases; each constant is the median of its rounds, "
          "printed with its spread (min-max), and a warning names one whose rounds differ by "
          "more than 20% of it");
ABSL_FLAG(std::string, links, "1gbit,10gbit,100gbit",
          "simulate: link speeds, one table each (with --cluster: instead of the profile's NIC)");
ABSL_FLAG(int32_t, max_workers, 1024, "simulate: largest worker count (powers of two up to it)");
ABSL_FLAG(double, model_mb, 0,
          "simulate: model size in MB of 1e6 bytes (--calibration: 0 is the calibrated "
          "model's; --cluster: instead of --model)");
// `simulate`'s own flags (commands.cc shows simulate_X as --X for simulate alone).
ABSL_FLAG(std::string, simulate_model, "",
          "simulate --cluster: a published model (resnet-50, vgg-16, bert-large) or a ringside "
          "spec (mlp:784-256-10, cnn:lenet); --calibration: must be the calibrated model");
ABSL_FLAG(int32_t, simulate_batch, 0,
          "simulate: per-device batch (--cluster: for the model's FLOPs or the profile's step "
          "entry; --calibration: must be the calibrated batch)");
ABSL_FLAG(std::string, simulate_workers, "",
          "simulate: worker (device) counts, any list, e.g. 8,32,100 (default: 1, 2, 4, ..., "
          "--max_workers)");
ABSL_FLAG(std::string, simulate_shards, "1,2,N",
          "simulate: PS shard counts, one curve each: numbers or N (one shard per worker)");
ABSL_FLAG(bool, colocated, false,
          "simulate: PS shards inside the workers (shard j in worker j mod S) instead of on "
          "server nodes of their own");
ABSL_FLAG(double, step_ms, 0,
          "simulate --cluster: one device's step (forward + backward + update) in ms; 0: the "
          "profile's step entry for the model at --batch, else the model's FLOPs / the "
          "device's rate");
ABSL_FLAG(std::string, layers_mb, "",
          "simulate --cluster: the layers' sizes in MB, in layer order (DDP buckets whole "
          "layers), e.g. 102.8,16.8,4.1; with --model_mb they must add up to it");
ABSL_FLAG(absl::Duration, link_latency, absl::ZeroDuration(),
          "simulate: one-way link latency, node to node, e.g. 25us (--cluster: instead of "
          "the profile's NIC latency; --calibration: added to the calibrated alpha)");
ABSL_FLAG(double, bucket_mb, ringside::kDefaultBucketCapBytes / double{1 << 20},
          "simulate: DDP bucket cap in MiB (the first bucket 1 MiB, as the reducer's)");
ABSL_FLAG(bool, wire_only, false,
          "simulate --calibration: the links' numbers alone instead of min(link, calibrated "
          "path) and the calibrated alpha (with --cluster there is no calibrated path)");
ABSL_FLAG(std::string, simulate_node_cpus, "",
          "simulate --calibration: predict for emulated nodes of this many CPUs (default: the "
          "share the calibration was measured on; another share rescales its CPU-bound costs)");
ABSL_FLAG(std::string, simulate_slow_node, "",
          "simulate --calibration: R:F as train's, one node gets F (0 < F <= 1) times the "
          "others' CPU share (R does not matter here); needs --node_cpus");
ABSL_FLAG(std::string, spec, "", "compare: experiment spec (protobuf text format, see experiments/*.textproto)");
ABSL_FLAG(std::string, sizes_mb, "1,4,16,64,256", "bench pushpull: model sizes in MiB");
ABSL_FLAG(int64_t, size_bytes, 0, "bench pushpull-server: model size in bytes");
ABSL_FLAG(std::string, pin_cpus, "",
          "bench pushpull: W,S runs the worker on CPU W and the shard on CPU S, one core "
          "each (as iperf3 -A); empty: the scheduler places them");
ABSL_FLAG(int, pin_cpu, -1, "bench pushpull-server: the shard's CPU (-1: not pinned)");
ABSL_FLAG(int32_t, repeats, 1, "bench: measurements to print");
ABSL_FLAG(int32_t, ranks, 4, "collective, explain ring: ranks (threads of this process)");
ABSL_FLAG(int64_t, elements, 8, "collective, explain ring: floats in each rank's buffer");
ABSL_FLAG(int32_t, root, 0, "collective: the root rank of broadcast, scatter, gather and reduce");
ABSL_FLAG(int32_t, shards, 1, "explain ps: parameter-server shards");
ABSL_FLAG(std::string, frames, "",
          "explain: also write the steps as a sequence of frames, FILE.svg or FILE.html");
ABSL_FLAG(bool, dp_interpreter_lock, false,
          "dp: serialise the replicas' host-side work around each op, an emulation of a "
          "global interpreter lock (labelled so)");
ABSL_FLAG(std::string, bug, "",
          "teaching: comma-separated bugs to switch on (no_set_epoch, no_broadcast, "
          "rank_seeds, uneven_shards)");
// Checkpoints (issue 23, "checkpoints that cannot lie").
ABSL_FLAG(int32_t, keep_checkpoints, ringside::kDefaultKeepCheckpoints,
          "checkpoints kept in OUT: checkpoint.bin (the newest) and the K - 1 before it as "
          "checkpoint.<step>.bin; --resume falls back to those when the newest is damaged");

// --- Security (issue 23; docs/security.md): never the token itself on the command line.
ABSL_FLAG(std::string, token_file, "",
          "the job's shared-secret token, read from this file (mode 600; else RINGSIDE_TOKEN; "
          "launched jobs get a fresh one); every RPC of the shards and the store checks it");
ABSL_FLAG(std::string, tls_cert, "", "TLS: this process's certificate (PEM); with --tls_key and --tls_ca");
ABSL_FLAG(std::string, tls_key, "", "TLS: this process's private key (PEM)");
ABSL_FLAG(std::string, tls_ca, "",
          "TLS: the CA (PEM) that signed every certificate of the job (mutual TLS)");
// Numerical safety (issue 23).
ABSL_FLAG(std::string, nan_policy, ringside::kNanPolicyStop,
          "on a non-finite loss, gradient or update: stop (end the job naming step, rank "
          "and range; the last good checkpoint is kept) or skip_step (discard that "
          "step's update, record it in the metrics, go on)");

ABSL_FLAG(std::string, ps_transport, "",
          "ps: what carries the tensors: tcp (frames over one TCP connection per worker "
          "and shard; gRPC keeps the control plane; no TLS) or grpc (the "
          "ParameterServer service's streams). Default: tcp, or grpc with --tls_*");

ABSL_FLAG(std::string, ps_placement, ringside::kPsPlacementBalanced,
          "ps: where the tensors live: balanced (byte-balanced slices of the flat "
          "parameters), tensor_round_robin (whole tensors dealt to the shards in turn, as "
          "TensorFlow places variables) or tensor_greedy (whole tensors, largest first, onto "
          "the least-loaded shard)");

ABSL_FLAG(std::string, ps_mode, ringside::kPsModeOptimizer,
          "ps: what the servers do: optimizer (sum the gradients, run SGD, serve the "
          "parameters) or summation (only sum, as BytePS's summation servers: every "
          "worker pulls the mean gradient and runs SGD itself; bsp only; --ps_shards "
          "servers)");

// Elastic PS (issue 23).
ABSL_FLAG(int32_t, ps_min_workers, 0,
          "ps, bsp: go on without a lost or hung worker while at least this many workers "
          "are live (1..--workers; worker 0 is always required); a lost worker started "
          "again rejoins. 0: off, every worker is required");

namespace ringside {

JobFlags ReadJobFlags() {
  JobFlags f;
  f.strategy = absl::GetFlag(FLAGS_strategy);
  f.model = absl::GetFlag(FLAGS_model);
  f.dataset = absl::GetFlag(FLAGS_dataset);
  f.epochs = absl::GetFlag(FLAGS_epochs);
  f.steps = absl::GetFlag(FLAGS_steps);
  f.batch = absl::GetFlag(FLAGS_batch);
  f.lr = absl::GetFlag(FLAGS_lr);
  f.momentum = absl::GetFlag(FLAGS_momentum);
  f.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  f.nesterov = absl::GetFlag(FLAGS_nesterov);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.threads = absl::GetFlag(FLAGS_threads);
  f.device = absl::GetFlag(FLAGS_device);
  f.precision = absl::GetFlag(FLAGS_precision);
  f.drop_last = absl::GetFlag(FLAGS_drop_last);
  f.grad_accum = absl::GetFlag(FLAGS_grad_accum);
  f.prefetch = absl::GetFlag(FLAGS_prefetch);
  f.bug = absl::GetFlag(FLAGS_bug);
  f.nan_policy = absl::GetFlag(FLAGS_nan_policy);
  f.out = absl::GetFlag(FLAGS_out);
  f.resume = absl::GetFlag(FLAGS_resume);
  f.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  f.keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  f.eval_batch = absl::GetFlag(FLAGS_eval_batch);
  f.workers = absl::GetFlag(FLAGS_workers);
  f.dp_interpreter_lock = absl::GetFlag(FLAGS_dp_interpreter_lock);
  f.backend = absl::GetFlag(FLAGS_backend);
  f.allreduce = absl::GetFlag(FLAGS_allreduce);
  f.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  f.first_bucket_mb = absl::GetFlag(FLAGS_first_bucket_mb);
  f.overlap = absl::GetFlag(FLAGS_overlap);
  f.compress = absl::GetFlag(FLAGS_compress);
  f.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  f.ps_shards = absl::GetFlag(FLAGS_ps_shards);
  f.ps_chunk_kb = absl::GetFlag(FLAGS_ps_chunk_kb);
  f.ps_min_workers = absl::GetFlag(FLAGS_ps_min_workers);
  f.ps_sync = absl::GetFlag(FLAGS_ps_sync);
  f.ps_transport = absl::GetFlag(FLAGS_ps_transport);
  f.ps_placement = absl::GetFlag(FLAGS_ps_placement);
  f.ps_mode = absl::GetFlag(FLAGS_ps_mode);
  f.ps_colocated = absl::GetFlag(FLAGS_ps_colocated);
  f.ps_worker_summers = absl::GetFlag(FLAGS_ps_worker_summers);
  f.shard = absl::GetFlag(FLAGS_shard);
  f.worker_id = absl::GetFlag(FLAGS_worker_id);
  f.listen = absl::GetFlag(FLAGS_listen);
  f.ps_servers = absl::GetFlag(FLAGS_ps_servers);
  f.network = absl::GetFlag(FLAGS_network);
  f.cluster = absl::GetFlag(FLAGS_cluster);
  f.node_cpus = absl::GetFlag(FLAGS_node_cpus);
  f.slow_node = absl::GetFlag(FLAGS_slow_node);
  f.ranks_per_node = absl::GetFlag(FLAGS_ranks_per_node);
  f.token_file = absl::GetFlag(FLAGS_token_file);
  f.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  f.tls_key = absl::GetFlag(FLAGS_tls_key);
  f.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  return f;
}

absl::StatusOr<JobSpec> JobSpecFromFlags(JobVerb verb) {
  return ParseJobSpec(ReadJobFlags(), verb, /*launch_here=*/!InLaunchedJob());
}

RunConfig RunConfigFromFlags() {
  absl::StatusOr<JobSpec> job = ParseJobSpec(ReadJobFlags(), JobVerb::kTrain, /*launch_here=*/false);
  return job.ok() ? job->run.config : RunConfig();
}

absl::StatusOr<double> NodeCpusWithoutNodes(const char* verb, const std::string& node_cpus) {
  RINGSIDE_ASSIGN_OR_RETURN(NodeCpuSpec spec, ParseNodeCpus(node_cpus));
  if (!spec.enabled) return 0.0;
  if (spec.automatic) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--node_cpus=auto divides the machine by a job's nodes; ", verb, " has none: give CPUs per node (e.g. 0.4)"));
  }
  return spec.cpus;
}

}  // namespace ringside
