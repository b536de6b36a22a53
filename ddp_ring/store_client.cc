// The gRPC client side of the store. One channel per ConnectStore(); gRPC stubs are
// thread-safe, so the returned store is too, and concurrent blocking calls proceed
// independently (each is its own RPC on the shared HTTP/2 connection).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rpc_security.h"
#include "ddp_ring/store.grpc.pb.h"
#include "ddp_ring/store.h"
#include "ddp_ring/store.pb.h"

namespace ringside {
namespace {

// Reconnection backoff while the server is not up yet (gRPC's defaults start at 1 s
// and grow to 120 s, far too slow for a rendezvous where clients often start first).
constexpr int kInitialReconnectBackoffMs = 100;
constexpr int kMaxReconnectBackoffMs = 1000;

// Prefix of every error message the server (or its in-memory store) writes itself.
constexpr absl::string_view kServerMessagePrefix = "store:";

std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

int64_t TimeoutToWire(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return -1;
  if (timeout < absl::ZeroDuration()) return 0;
  return absl::ToInt64Microseconds(timeout);
}

class GrpcStoreClient final : public Store {
 public:
  GrpcStoreClient(std::string target, std::shared_ptr<grpc::Channel> channel,
                  absl::Duration rpc_timeout)
      : target_(std::move(target)),
        channel_(std::move(channel)),
        stub_(StoreService::NewStub(channel_)),
        rpc_timeout_(rpc_timeout) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    grpc::ClientContext context;
    SetDeadline(&context, rpc_timeout_);
    StoreSetRequest request;
    request.set_key(key);
    request.set_value(value);
    StoreSetResponse response;
    return FromGrpc(stub_->Set(&context, request, &response), "Set", key, rpc_timeout_);
  }

  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration timeout) override {
    grpc::ClientContext context;
    const absl::Duration limit = BlockingLimit(timeout);
    SetDeadline(&context, limit);
    StoreGetRequest request;
    request.set_key(key);
    request.set_timeout_us(TimeoutToWire(timeout));
    StoreGetResponse response;
    absl::Status status =
        FromGrpc(stub_->Get(&context, request, &response), "Get", key, limit);
    if (!status.ok()) return status;
    return std::move(*response.mutable_value());
  }

  absl::Status Wait(const std::vector<std::string>& keys,
                    absl::Duration timeout) override {
    grpc::ClientContext context;
    const absl::Duration limit = BlockingLimit(timeout);
    SetDeadline(&context, limit);
    StoreWaitRequest request;
    for (const std::string& key : keys) request.add_keys(key);
    request.set_timeout_us(TimeoutToWire(timeout));
    StoreWaitResponse response;
    return FromGrpc(stub_->Wait(&context, request, &response), "Wait",
                    absl::StrJoin(keys, ", "), limit);
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    grpc::ClientContext context;
    SetDeadline(&context, rpc_timeout_);
    StoreAddRequest request;
    request.set_key(key);
    request.set_delta(delta);
    StoreAddResponse response;
    absl::Status status =
        FromGrpc(stub_->Add(&context, request, &response), "Add", key, rpc_timeout_);
    if (!status.ok()) return status;
    return response.value();
  }

 private:
  // The RPC deadline of a blocking call: the server's wait plus a margin for the
  // round trip. An infinite wait gets an infinite deadline.
  absl::Duration BlockingLimit(absl::Duration timeout) const {
    return std::max(timeout, absl::ZeroDuration()) + rpc_timeout_;
  }

  static void SetDeadline(grpc::ClientContext* context, absl::Duration limit) {
    if (limit == absl::InfiniteDuration()) return;
    context->set_deadline(absl::ToChronoTime(absl::Now() + limit));
  }

  // Maps an RPC's outcome to the Store contract's codes.
  // `keys` names the call's key(s) for a client-side deadline message.
  absl::Status FromGrpc(const grpc::Status& status, absl::string_view method,
                        absl::string_view keys, absl::Duration limit) const {
    const std::string& message = status.error_message();
    switch (status.error_code()) {
      case grpc::StatusCode::OK:
        return absl::OkStatus();
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::CANCELLED:  // The server cancels pending calls on exit.
        return absl::UnavailableError(
            absl::StrCat("store at ", target_, " unreachable: ", message));
      case grpc::StatusCode::UNAUTHENTICATED:
        return absl::UnauthenticatedError(absl::StrCat("store at ", target_, ": ", message));
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        // Either the server's own wait ran out (its message names the keys), or the
        // RPC's deadline passed before any answer came.
        if (absl::StartsWith(message, kServerMessagePrefix)) {
          return absl::DeadlineExceededError(message);
        }
        return absl::DeadlineExceededError(
            absl::StrCat("store at ", target_, ": ", method, "(", absl::CHexEscape(keys),
                         ") got no answer within ", absl::FormatDuration(limit)));
      default:
        // The server's codes are the Store contract's codes (e.g. InvalidArgument).
        return absl::Status(static_cast<absl::StatusCode>(status.error_code()), message);
    }
  }

  const std::string target_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<StoreService::Stub> stub_;
  const absl::Duration rpc_timeout_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> ConnectStore(const std::string& host, int port,
                                                    const RpcSecurity& security,
                                                    absl::Duration connect_timeout,
                                                    absl::Duration rpc_timeout) {
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("store client: invalid port ", port, " for host ", host));
  }
  const std::string target = HostPort(host, port);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kInitialReconnectBackoffMs);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kInitialReconnectBackoffMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  // A private subchannel, so that this store's connection state (and backoff) is not
  // shared with other channels to the same address in this process.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::Channel> channel = NewSecureChannel(target, security, args);
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + connect_timeout))) {
    return absl::UnavailableError(absl::StrCat("cannot reach the store at ", target,
                                               " within ",
                                               absl::FormatDuration(connect_timeout)));
  }
  return std::unique_ptr<Store>(
      std::make_unique<GrpcStoreClient>(target, std::move(channel), rpc_timeout));
}

}  // namespace ringside
