// ps_server/: the parameter-server shard. Start here.
//   ps.proto          the protocol: register, push-pull, push, pull, barrier, stats, shutdown
//   sharding.h        contiguous byte-balanced slices and the chunk grid
//   consistency_policy.h  BSP / SSP(K) / ASP: what a push does, when a pull is served,
//                     who is late; parses --ps_sync
//   shard.h           one shard's state: aggregation, faults, statistics and trace
//                     spans (asks the policy)
//   ps_service.h      the gRPC service over a Shard, and the server hosting it
//   wire_chunk.h      the zero-copy Chunk codec of the push-pull hot path
//   server_role.h     `ringside ps-server`: one shard of a job, until all workers are done
#ifndef RINGSIDE_PS_SERVER_PS_SERVER_H_
#define RINGSIDE_PS_SERVER_PS_SERVER_H_

#include "ps_server/consistency_policy.h"
#include "ps_server/ps_service.h"
#include "ps_server/server_role.h"
#include "ps_server/shard.h"
#include "ps_server/sharding.h"

#endif  // RINGSIDE_PS_SERVER_PS_SERVER_H_
