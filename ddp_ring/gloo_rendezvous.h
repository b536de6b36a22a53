// The Gloo backend's rendezvous: how the ranks of a Gloo process group find and connect
// to each other through the job's store. Internal to the Gloo backend
// (gloo_process_group.h).
//
// Protocol of ConnectGloo:
//   1. Join: every rank sets "gloo_joined/<rank>" = its world size and waits (bounded by
//      the timeout) for all world_size join keys, so that a rank that never arrives is
//      reported by number, and a rank started with another world size is refused.
//   2. Connect: a gloo::rendezvous::Context exchanges TCP addresses through the store
//      (GlooStoreAdapter) and connects every pair of ranks (connectFullMesh); then each
//      rank publishes its end of each connection ("pair_address/<rank>/<peer>"), so that
//      every rank can map the address in a transport error back to the rank that went
//      away (gloo_peer_naming.h).
//   3. Only where recursive doubling or halving-doubling will run: their own direct TCP
//      connections (TcpPairs, tcp_pairs.h), through the same store.
// Each failure names the step it happened in.
#ifndef RINGSIDE_DDP_RING_GLOO_RENDEZVOUS_H_
#define RINGSIDE_DDP_RING_GLOO_RENDEZVOUS_H_

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/store.h"
#include "ddp_ring/tcp_pairs.h"

namespace ringside {

// What a rank holds once connected to every other.
struct GlooConnection {
  std::shared_ptr<gloo::transport::Device> device;  // The TCP device (its event loop).
  std::shared_ptr<gloo::rendezvous::Context> context;  // Full mesh, connected.
  // The address each peer's end of its connection to this rank has, and that peer.
  std::vector<std::pair<std::string, int>> peer_addresses;
  std::unique_ptr<TcpPairs> pairs;  // Null unless a doubling may run.
};

// Runs the protocol above for options.rank of options.world_size (> 1) through `store`.
// Blocks, each step bounded by options.timeout. InvalidArgument for a hostname that does
// not resolve or a world size other ranks disagree with; DeadlineExceeded naming the
// ranks that never joined; otherwise the store's or the transport's error, prefixed
// "rank <r>: rendezvous (<step>) failed: ".
absl::StatusOr<GlooConnection> ConnectGloo(Store* store, const ProcessGroupOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_GLOO_RENDEZVOUS_H_
