// Keepalive: HTTP/2 pings that find a hung peer (stopped by SIGSTOP, wedged, or its
// host gone) on a connection that has calls in flight. A stopped process's kernel still
// acknowledges TCP, so a call that waits for a reply (or a server that waits for the
// next message of a stream) would otherwise wait out a deadline sized for the largest
// transfer; only the peer's gRPC process answers a ping. A connection whose ping is not
// answered within `ack_timeout` is closed: its calls fail with UNAVAILABLE
// ("keepalive watchdog timeout"), on the side that sent the ping.
//
// Both ends must agree: gRPC servers refuse pings more frequent than every 5 minutes
// by default (they answer with GOAWAY "too_many_pings"), and clients send at most 2
// pings without data unless told otherwise. SetClientKeepalive and SetServerKeepalive
// set the pair of arguments that make frequent pings legal on each side.
#ifndef RINGSIDE_COMMON_RPC_KEEPALIVE_H_
#define RINGSIDE_COMMON_RPC_KEEPALIVE_H_

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace ringside {

struct KeepalivePolicy {
  // Between two pings on a connection (counted from the last answer).
  absl::Duration interval = absl::Seconds(30);
  // How long a ping may go unanswered before the connection is closed.
  absl::Duration ack_timeout = absl::Seconds(10);
};

// The policy of a job whose peers time out after `peer_timeout` (--timeout_s): pings
// every peer_timeout / 4 with peer_timeout / 2 to answer, each clamped to
// [100 ms, 30 s], so that a hung peer is found within 3/4 x peer_timeout of its last
// answer, before any deadline based on the timeout expires.
KeepalivePolicy KeepaliveFor(absl::Duration peer_timeout);

// A client channel that pings its server while calls are in flight, without a limit on
// pings sent while no data moves (a worker waiting for a slow BSP release).
void SetClientKeepalive(const KeepalivePolicy& policy, grpc::ChannelArguments* args);

// A server that pings its clients (finding a hung client whose stream is open) and
// accepts clients' pings as often as `policy` sends them.
void SetServerKeepalive(const KeepalivePolicy& policy, grpc::ServerBuilder* builder);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_RPC_KEEPALIVE_H_
