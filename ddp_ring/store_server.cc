// StoreServer: an in-memory store behind gRPC's synchronous server.
//
// Blocking Get/Wait handlers occupy one thread of gRPC's sync-server pool each for as
// long as they wait. The pool is capped (common/rpc_security.h's ServerLimits, sized
// by the expected clients): a call that finds no thread is refused at once with
// RESOURCE_EXHAUSTED instead of growing the pool without bound. Handlers wait in short
// slices so that they notice both client cancellation and server shutdown, which
// gRPC's Shutdown() would otherwise block on. Every handler first checks the job's
// token (CallAuthenticator): a refused call changes nothing.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rpc_security.h"
#include "ddp_ring/store.grpc.pb.h"
#include "ddp_ring/store.h"
#include "ddp_ring/store.pb.h"

namespace ringside {
namespace {

// Longest a blocked handler goes without checking for cancellation or shutdown.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(50);
// How long Shutdown() lets handlers finish before gRPC cancels their calls. Handlers
// notice shutdown within kWaitSlice, so this is only a backstop.
constexpr absl::Duration kShutdownGrace = absl::Milliseconds(250);
// Calls one client process may have in flight at once (its thread budget).
constexpr int kCallsPerClient = 8;

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode both use the canonical code numbers.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Duration TimeoutFromWire(int64_t timeout_us) {
  return timeout_us < 0 ? absl::InfiniteDuration() : absl::Microseconds(timeout_us);
}

// "host:port", with IPv6 literals bracketed.
std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

class StoreServiceImpl final : public StoreService::Service {
 public:
  // `store` must outlive the service.
  explicit StoreServiceImpl(Store* store, std::string token)
      : store_(store), auth_(std::move(token)) {}

  // After this, blocked and new handlers return UNAVAILABLE. Thread-safe.
  void BeginShutdown() { stopping_.store(true); }

  grpc::Status Set(grpc::ServerContext* context, const StoreSetRequest* request,
                   StoreSetResponse* /*response*/) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    if (stopping_.load()) return ToGrpc(ShuttingDown());
    return ToGrpc(store_->Set(request->key(), request->value()));
  }

  grpc::Status Get(grpc::ServerContext* context, const StoreGetRequest* request,
                   StoreGetResponse* response) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    absl::Status waited =
        WaitInSlices(context, {request->key()}, TimeoutFromWire(request->timeout_us()));
    if (!waited.ok()) return ToGrpc(waited);
    // Keys are never removed, so this cannot block.
    absl::StatusOr<std::string> value = store_->Get(request->key(), absl::ZeroDuration());
    if (!value.ok()) return ToGrpc(value.status());
    response->set_value(*std::move(value));
    return grpc::Status::OK;
  }

  grpc::Status Wait(grpc::ServerContext* context, const StoreWaitRequest* request,
                    StoreWaitResponse* /*response*/) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    std::vector<std::string> keys(request->keys().begin(), request->keys().end());
    return ToGrpc(WaitInSlices(context, keys, TimeoutFromWire(request->timeout_us())));
  }

  grpc::Status Add(grpc::ServerContext* context, const StoreAddRequest* request,
                   StoreAddResponse* response) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    if (stopping_.load()) return ToGrpc(ShuttingDown());
    absl::StatusOr<int64_t> value = store_->Add(request->key(), request->delta());
    if (!value.ok()) return ToGrpc(value.status());
    response->set_value(*value);
    return grpc::Status::OK;
  }

 private:
  static absl::Status ShuttingDown() {
    return absl::UnavailableError("store server is shutting down");
  }

  // Blocks until every key exists (OK), `timeout` passes (DeadlineExceeded naming the
  // missing keys, in the in-memory store's words), the client cancels (Cancelled), or
  // the server begins shutting down (Unavailable).
  absl::Status WaitInSlices(grpc::ServerContext* context,
                            const std::vector<std::string>& keys,
                            absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;  // InfiniteFuture if infinite.
    while (true) {
      if (stopping_.load()) return ShuttingDown();
      if (context->IsCancelled()) return absl::CancelledError("cancelled by client");
      const absl::Duration slice =
          std::max(absl::ZeroDuration(), std::min(kWaitSlice, deadline - absl::Now()));
      absl::Status status = store_->Wait(keys, slice);
      if (!absl::IsDeadlineExceeded(status)) return status;
      if (absl::Now() >= deadline) return TimedOut(keys, timeout);
    }
  }

  absl::Status TimedOut(const std::vector<std::string>& keys, absl::Duration timeout) {
    std::vector<std::string> missing;
    for (const std::string& key : keys) {
      if (!store_->Get(key, absl::ZeroDuration()).ok()) missing.push_back(key);
    }
    if (missing.empty()) return absl::OkStatus();  // They arrived just in time.
    return absl::DeadlineExceededError(absl::StrCat(
        "store: timed out after ", absl::FormatDuration(timeout), " waiting for keys: ",
        absl::StrJoin(missing, ", ", [](std::string* out, const std::string& key) {
          absl::StrAppend(out, absl::CHexEscape(key));
        })));
  }

  Store* const store_;  // Not owned.
  const CallAuthenticator auth_;
  std::atomic<bool> stopping_{false};
};

class GrpcStoreServer final : public StoreServer {
 public:
  explicit GrpcStoreServer(const RpcSecurity& security)
      : security_(security),
        store_(NewInMemoryStore()),
        service_(store_.get(), security.token) {}
  ~GrpcStoreServer() override { Shutdown(); }

  // Binds and starts serving; called once, before the object is shared.
  absl::Status Listen(const std::string& host, int port, int max_clients) {
    const std::string address = HostPort(host, port);
    grpc::ServerBuilder builder;
    // gRPC sets SO_REUSEPORT by default, which would let a second server bind a port
    // that is in use (and split the clients between the two stores).
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    int selected_port = 0;
    builder.AddListeningPort(address, ServerCredentialsFor(security_), &selected_port);
    // Blocking waits: a rank has a few at once (rendezvous, its monitor, Gloo's).
    ApplyServerLimits(LimitsForClients(max_clients, kCallsPerClient), &builder);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || selected_port == 0) {
      server_.reset();
      return absl::FailedPreconditionError(
          absl::StrCat("store server: cannot listen on ", address,
                       " (port in use, or not a local address?)"));
    }
    port_ = selected_port;
    return absl::OkStatus();
  }

  int port() const override { return port_; }

  void Shutdown() override {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_ || server_ == nullptr) return;
    shut_down_ = true;
    service_.BeginShutdown();
    // Blocks until every handler has returned.
    server_->Shutdown(absl::ToChronoTime(absl::Now() + kShutdownGrace));
  }

 private:
  const RpcSecurity security_;
  const std::unique_ptr<Store> store_;
  StoreServiceImpl service_;
  std::unique_ptr<grpc::Server> server_;  // Set by Listen(), then immutable.
  int port_ = 0;                          // Set by Listen(), then immutable.

  // Serialises Shutdown() calls: later callers return once the first has finished.
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(const std::string& host,
                                                                int port,
                                                                const RpcSecurity& security,
                                                                int max_clients) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("store server: invalid port ", port, " for host ", host));
  }
  auto server = std::make_unique<GrpcStoreServer>(security);
  absl::Status listening = server->Listen(host, port, max_clients);
  if (!listening.ok()) return listening;
  return std::unique_ptr<StoreServer>(std::move(server));
}

}  // namespace ringside
