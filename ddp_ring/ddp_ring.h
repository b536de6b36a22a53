// ddp_ring/: the all-reduce strategy, like PyTorch DDP. Start here.
//   store.h           rendezvous key-value store: gRPC server/client, in-memory twin
//   process_group.h   collectives (Gloo on CPU, NCCL on GPU), asynchronous, with timeouts
//   reducer.h         gradient buckets all-reduced during backward (a StepStrategy)
//   ddp_worker.h      one rank end to end: env, rendezvous, config check, training
#ifndef RINGSIDE_DDP_RING_DDP_RING_H_
#define RINGSIDE_DDP_RING_DDP_RING_H_

#include "ddp_ring/ddp_worker.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/reducer.h"
#include "ddp_ring/store.h"

#endif  // RINGSIDE_DDP_RING_DDP_RING_H_
