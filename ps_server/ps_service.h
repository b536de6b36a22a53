// A parameter-server shard behind gRPC: the ParameterServer service of ps.proto over a
// Shard, and the server that hosts it.
#ifndef RINGSIDE_PS_SERVER_PS_SERVICE_H_
#define RINGSIDE_PS_SERVER_PS_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/rpc_security.h"
#include "grpcpp/grpcpp.h"
#include "ps_server/shard.h"
#include "ps_server/tcp_data_server.h"

namespace ringside {

// Largest message either end accepts: a chunk of the largest allowed chunk size plus
// its header.
inline constexpr int kMaxPsMessageBytes = (64 << 20) + 4096;

// The transport settings of every parameter-server channel and server (message caps).
void SetPsChannelArgs(grpc::ChannelArguments* args);
void SetPsServerArgs(grpc::ServerBuilder* builder);

// absl::Status <-> grpc::Status (the codes are the same numbers).
grpc::Status ToGrpcStatus(const absl::Status& s);
absl::Status FromGrpcStatus(const grpc::Status& s);

class PsServer {
 public:
  // Listens on `address` ("host:port"; port 0 picks a free one) and serves a new shard;
  // with options.config.ps_transport() "tcp", also its TCP data plane on the same host
  // (any port: data_port()).
  // Unavailable if the address cannot be bound; InvalidArgument for bad options.
  // `security` is the security this server listens with (common/rpc_security.h; a copy
  // is kept): with a token, every call without it is refused with UNAUTHENTICATED and
  // changes nothing; empty token: unauthenticated. Threads are capped for the options'
  // workers; calls past the cap get RESOURCE_EXHAUSTED.
  static absl::StatusOr<std::unique_ptr<PsServer>> Start(const std::string& address,
                                                         const PsShardOptions& options,
                                                         const RpcSecurity& security);
  ~PsServer();  // Stops serving (in-flight calls are cancelled after a short grace).

  int port() const { return port_; }
  // The TCP data plane's port (RunConfig.ps_transport "tcp"); 0 without one.
  int data_port() const;
  Shard* shard() { return shard_.get(); }
  // A channel to this server that bypasses TCP (worker 0 of a colocated job); its
  // calls carry the server's own token.
  std::shared_ptr<grpc::Channel> InProcessChannel();

  // Blocks until every worker said goodbye (OK) or the job was aborted (Aborted).
  absl::Status Wait() { return shard_->WaitUntilDone(); }
  // Stops accepting calls; waits up to `grace` for calls in flight, then cancels them.
  void Shutdown(absl::Duration grace);

 private:
  class Service;
  PsServer() = default;

  RpcSecurity security_;
  std::unique_ptr<Shard> shard_;
  std::unique_ptr<TcpDataServer> data_server_;  // Before service_: it outlives the calls.
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_PS_SERVICE_H_
