#include "common/rpc_keepalive.h"

#include <algorithm>
#include <cstdint>

namespace ringside {
namespace {

int Millis(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

absl::Duration Clamp(absl::Duration d) {
  return std::clamp(d, absl::Milliseconds(100), absl::Seconds(30));
}

}  // namespace

KeepalivePolicy KeepaliveFor(absl::Duration peer_timeout) {
  KeepalivePolicy policy;
  policy.interval = Clamp(peer_timeout / 4);
  policy.ack_timeout = Clamp(peer_timeout / 2);
  return policy;
}

void SetClientKeepalive(const KeepalivePolicy& policy, grpc::ChannelArguments* args) {
  args->SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(policy.interval));
  args->SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(policy.ack_timeout));
  // Pings only while calls are in flight: between calls a deadline bounds the next one.
  args->SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  // 0: no limit on pings sent while this side sends no data (default 2).
  args->SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
}

void SetServerKeepalive(const KeepalivePolicy& policy, grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(policy.interval));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(policy.ack_timeout));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Clients' pings are legal at half their interval (jitter), and never a strike.
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              Millis(policy.interval / 2));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

}  // namespace ringside
