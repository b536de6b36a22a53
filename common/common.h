// common/: the core both strategies share. Start here.
//
//   ops.h          the ops interface (GEMM, bias, ReLU, softmax-xent, im2col, pool,
//                  fused SGD, BLAS-1) and DeviceArray; cpu_ops.h is its OpenBLAS backend
//   ops_factory.h  NewOps(kind, device, threads): the backend production code uses
//   layers.h       layers written once against the ops
//   model.h        Model: layers over one flat parameter/gradient buffer, backward that
//                  announces ready gradient ranges; specs "mlp:..." and "cnn:lenet"
//   sgd.h          SGD with momentum / weight decay / Nesterov on flat spans
//   dataset.h      IDX (Fashion-MNIST) and synthetic datasets
//   sharder.h      DistributedSampler-style sharding
//   local_step.h   one forward + backward step, timed; evaluation
//   trainer.h      the training loop and the StepStrategy lifecycle the strategies
//                  implement (Start, hooks, FinishStep, Finish)
//   run_config.h   RunConfig validation, RunOptions, SGD settings, the same-configuration
//                  check that names the differing field; shared defaults
//   ps_layout.h    PsLayout: which rank of a PS job is a shard, a worker, or both
//   replica.h      one replica set-up (ops, dataset, model, SGD) and its training,
//                  used by single, DDP and PS
//   data_parallel.h  --strategy=dp: DataParallel, replicas as threads of one process
//                  (a StepStrategy that runs the step's compute itself)
//   job_env.h      JobEnv: this process's place in a launched job (torchrun's RANK,
//                  WORLD_SIZE, MASTER_ADDR, ...; Slurm, Open MPI, MPICH, PMIx), read
//                  by every distributed role
//   checkpoint.h   atomic single-file checkpoints
//   metrics.h      per-step JSON-lines records; trace.h Chrome trace events (trace.proto)
//   output_files.h the names of the metrics and trace files per process (single, rank,
//                  shard) and of a resumed run's new trace
//   device.h       GPU detection (dlopen at run time; no CUDA at build time)
//   cuda_check.h   checked-call macros for CUDA/cuBLAS/NCCL (--config=cuda only; not
//                  included here)
//   status_macros.h  RINGSIDE_RETURN_IF_ERROR / RINGSIDE_ASSIGN_OR_RETURN
//   socket_io.h    the one layer over TCP sockets: deadline-bounded I/O, listen,
//                  connect, accept, the kernel's byte counts
//   frame_io.h     the frames every non-gRPC byte travels in ({tag, bytes} + payload)
//                  and the full-duplex exchange of one frame each way
//   task_thread.h  a long-lived helper thread that runs one handed-over task at a time
//   random.h       the seeded, platform-independent generator of every initialisation
//   json_escape.h  JSON string escaping for metrics and traces
//   test_util.h    (testonly) MaxRelativeDifference for the equivalence tests
//   ringside.proto RunConfig, StepMetrics, CheckpointHeader
#ifndef RINGSIDE_COMMON_COMMON_H_
#define RINGSIDE_COMMON_COMMON_H_

#include "common/checkpoint.h"
#include "common/cpu_ops.h"
#include "common/data_parallel.h"
#include "common/dataset.h"
#include "common/device.h"
#include "common/job_env.h"
#include "common/local_step.h"
#include "common/metrics.h"
#include "common/model.h"
#include "common/ops.h"
#include "common/ops_factory.h"
#include "common/output_files.h"
#include "common/ps_layout.h"
#include "common/replica.h"
#include "common/run_config.h"
#include "common/sgd.h"
#include "common/sharder.h"
#include "common/status_macros.h"
#include "common/task_thread.h"
#include "common/trace.h"
#include "common/trainer.h"

#endif  // RINGSIDE_COMMON_COMMON_H_
