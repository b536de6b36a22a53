// ps_server/: the parameter-server shard. Start here.
//   ps.proto          the protocol: register, push-pull, push, pull, barrier, stats, shutdown
//   sharding.h        contiguous byte-balanced slices and the chunk grid
//   consistency_policy.h  BSP / SSP(K) / ASP: what a push does, when a pull is served,
//                     who is late; parses --ps_sync
//   shard.h           one shard: the coordinator of the parts below (the locks, the
//                     order of things, faults and the abort); asks the policy
//     shard_chunk.h   one chunk of the slice: its SGD state, its clock, its pushes
//     ordered_sum.h   a step's pushes of a chunk summed in worker-id order (parked
//                     early arrivals): the same bits every run
//     membership.h    registrations, sessions, clocks, goodbyes; lost and rejoining
//                     workers (elastic PS)
//     barrier_table.h the barriers (eval, checkpoint, end) and their sums
//     step_records.h  per-step records, totals (ps::ShardStats) and trace spans
//   ps_service.h      the gRPC service over a Shard, and the server hosting it
//   wire_chunk.h      the zero-copy Chunk codec of the push-pull hot path
//   tcp_wire.h        the data plane on TCP (--ps_transport=tcp): hello, frames, chunk
//                     references; both ends' part of it
//   tcp_data_server.h the shard's end of it: a listener, a thread per worker connection
//   server_role.h     `ringside ps-server`: one shard of a job, until all workers are done
// The service's tests through a worker's ShardClient live in tests/ (ps_client_service_test,
// ps_security_test): this folder's targets do not depend on ps_worker/.
#ifndef RINGSIDE_PS_SERVER_PS_SERVER_H_
#define RINGSIDE_PS_SERVER_PS_SERVER_H_

#include "ps_server/barrier_table.h"
#include "ps_server/consistency_policy.h"
#include "ps_server/membership.h"
#include "ps_server/ordered_sum.h"
#include "ps_server/ps_service.h"
#include "ps_server/server_role.h"
#include "ps_server/shard.h"
#include "ps_server/shard_chunk.h"
#include "ps_server/sharding.h"
#include "ps_server/step_records.h"
#include "ps_server/tcp_data_server.h"
#include "ps_server/tcp_wire.h"
#include "ps_server/wire_chunk.h"

#endif  // RINGSIDE_PS_SERVER_PS_SERVER_H_
