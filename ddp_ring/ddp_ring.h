// ddp_ring/: the all-reduce strategy, like PyTorch DDP. Start here.
//   store.h           rendezvous key-value store: gRPC server/client, in-memory twin,
//                     client of torch's c10d TCPStore
//   job_store.h       JoinJobStore: a launched job's store (rank 0's, or torchrun's
//                     agent's); ReachableAddress: where the job's others reach a rank
//   process_group.h   collectives, asynchronous, with timeouts: the interface
//     gloo_process_group.h      its CPU backend over TCP (always built); internals:
//       gloo_rendezvous.h         how its ranks connect (join, full mesh, direct pairs)
//       gloo_transfer.h           its Transfer: Gloo's unbound buffers, the direct pairs
//       gloo_peer_naming.h        names the lost rank after a failure (liveness.h)
//       gloo_errors.h             Gloo's exceptions as Statuses; the SIGPIPE guard
//       gloo_store_adapter.h      the store as Gloo's rendezvous store
//     nccl_process_group.h      its GPU backend (--config=cuda builds only; not included
//                               here, so that this door builds without CUDA)
//       nccl_rendezvous.h         how its ranks connect (device, unique id through
//                                 the store, communicator): the twin of gloo_rendezvous.h
//       rank_monitor.h            heartbeats naming the lost rank after a failure
//                                 (liveness.h): the twin of gloo_peer_naming.h
//     liveness.h                which ranks are lost, through the store: what both
//                               backends' failure naming shares
//     process_group_factory.h   a backend by name; says when the build lacks CUDA
//     allreduce_algorithm.h     --allreduce: ring, halving-doubling, recursive doubling,
//                               auto (by size); the byte counts each moves
//     collective_algorithms.h   the algorithms, one per file (allreduce_ring.cc, ...),
//                               each a function of (rank, world, buffers, transfer)
//       transfer.h                their byte-counting point-to-point interface
//       ring_schedule.h           the ring's chunks, segments and transfer-by-transfer
//                                 schedule, pure (also shown by `explain ring`)
//       doubling_steps.h          (internal) the doublings' fold-in/out and exchange
//     tcp_pairs.h               the direct full-duplex TCP pairs the doublings run on
//     local_ranks.h             ranks as threads of one process (teaching commands)
//     process_group_test_util.h (tests) closed forms, expected byte counts
//   reducer.h         gradient buckets all-reduced during backward (a StepStrategy)
//   bug_check_group.h the teaching bugs (--bug) as a process-group decorator around
//                     the reducer's group: injects them, checks their symptoms
//   ddp_worker.h      one rank end to end: env, rendezvous, config check, training
#ifndef RINGSIDE_DDP_RING_DDP_RING_H_
#define RINGSIDE_DDP_RING_DDP_RING_H_

#include "ddp_ring/bug_check_group.h"
#include "ddp_ring/ddp_worker.h"
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/job_store.h"
#include "ddp_ring/local_ranks.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/process_group_factory.h"
#include "ddp_ring/reducer.h"
#include "ddp_ring/store.h"

#endif  // RINGSIDE_DDP_RING_DDP_RING_H_
