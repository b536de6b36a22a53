#include "ps_server/ps_service.h"

#include <deque>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc_keepalive.h"
#include "common/rpc_security.h"
#include "common/socket_io.h"
#include "grpcpp/support/method_handler.h"
#include "ps_server/ps.grpc.pb.h"
#include "ps_server/wire_chunk.h"

namespace ringside {

namespace {

// (name, value) of the settings both ends use: room for the largest chunk.
std::vector<std::pair<std::string, int>> PsTransportArgs() {
  return {{GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, kMaxPsMessageBytes},
          {GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, kMaxPsMessageBytes}};
}

}  // namespace

void SetPsChannelArgs(grpc::ChannelArguments* args) {
  for (const auto& [name, value] : PsTransportArgs()) args->SetInt(name, value);
}

void SetPsServerArgs(grpc::ServerBuilder* builder) {
  for (const auto& [name, value] : PsTransportArgs()) builder->AddChannelArgument(name, value);
}

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

namespace {

// Marks a call in flight for the shard's idle detection.
class CallScope {
 public:
  explicit CallScope(Shard* shard) : shard_(shard) { shard_->CallStarted(); }
  ~CallScope() { shard_->CallEnded(); }

 private:
  Shard* shard_;
};

// Counts a stream in the shard's queue depth for its lifetime.
class StreamScope {
 public:
  explicit StreamScope(Shard* shard) : call_(shard), shard_(shard) { shard_->StreamStarted(); }
  ~StreamScope() { shard_->StreamEnded(); }

 private:
  CallScope call_;
  Shard* shard_;
};

}  // namespace

// Calls one worker may have in flight on a shard at once (its thread budget).
constexpr int kCallsPerWorker = 8;

// Index of PushPull among the methods of ps.proto's ParameterServer service.
constexpr int kPushPullMethod = 1;

class PsServer::Service final : public ps::ParameterServer::Service {
 public:
  Service(Shard* shard, std::string token, int data_port)
      : shard_(shard), auth_(std::move(token)), data_port_(data_port) {
    // PushPull (method 1 of ps.proto's service) is served with the WireChunk codec: the
    // bytes on the wire are the same Chunk messages, without the payload copies.
    MarkMethodStreamed(
        kPushPullMethod,
        new grpc::internal::BidiStreamingHandler<Service, WireChunk, WireChunk>(
            [](Service* self, grpc::ServerContext* context,
               grpc::ServerReaderWriter<WireChunk, WireChunk>* stream) {
              return self->PushPullFast(context, stream);
            },
            this));
  }

  // Every handler first checks the job's token (security): a refused call is
  // UNAUTHENTICATED and changes nothing.
  grpc::Status Register(grpc::ServerContext* context, const ps::RegisterRequest* request,
                        ps::RegisterResponse* response) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    CallScope scope(shard_);
    absl::Status s = shard_->Register(*request, response);
    if (s.ok()) {
      shard_->NotePeer(request->worker_id(), context->peer());
      response->set_data_port(data_port_);
    }
    return ToGrpcStatus(s);
  }

  // Protocol: read gradient chunks of one step, aggregate each on arrival, and send
  // each chunk's updated parameters back as soon as the sync mode releases them. Runs
  // on WireChunk (the zero-copy codec) instead of ps::Chunk; see the constructor.
  // One thread does both directions: after each chunk it writes every reply that is
  // ready (in push order), and once the worker's pushes are all in it waits for the
  // rest. The transport keeps receiving while a reply is written, so the worker's
  // pushes do not stall; and no thread is started per call.
  grpc::Status PushPullFast(grpc::ServerContext* context,
                            grpc::ServerReaderWriter<WireChunk, WireChunk>* stream) {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    StreamScope scope(shard_);
    std::deque<int64_t> accepted;  // Chunks pushed and aggregated, not yet sent back.
    int worker = -1;               // Set by the first chunk.
    int64_t step = -1;
    uint64_t session = 0;          // The worker's, from the first chunk.
    WireChunk out;
    // Writes the replies at the head of `accepted` that the sync mode releases; with
    // `wait`, waits for each (Serve's timeout aborts the job if another worker is lost;
    // this worker's own stream breaking ends the wait at once).
    auto send = [&](bool wait) -> grpc::Status {
      while (!accepted.empty()) {
        const int64_t k = accepted.front();
        if (wait) {
          absl::Status s = shard_->Serve(worker, step + 1, ps::PARAMS, k, &out,
                                         [context] { return context->IsCancelled(); });
          if (absl::IsCancelled(s)) return Broken(context, worker, step, session);
          if (!s.ok()) return ToGrpcStatus(s);
        } else {
          absl::StatusOr<bool> ready = shard_->ServeIfReady(worker, step + 1, ps::PARAMS, k, &out);
          if (!ready.ok()) return ToGrpcStatus(ready.status());
          if (!*ready) return grpc::Status::OK;
        }
        accepted.pop_front();
        // Counted before the write: once the worker holds the last chunk, the step's
        // record must already be complete (a Stats call right after PushPull sees it). A
        // failed write breaks the stream and aborts the job, so an over-count is never
        // reported.
        shard_->CountServed(worker, step + 1, ps::PARAMS, out.wire_bytes());
        if (!stream->Write(out)) return Broken(context, worker, step, session);
      }
      return grpc::Status::OK;
    };
    WireChunk in;
    int64_t pushed = 0;  // Chunks accepted.
    while (stream->Read(&in)) {
      const ChunkHeader h{in.worker_id, in.step, in.kind, in.offset};
      absl::StatusOr<int64_t> k = shard_->CheckChunk(h, in.payload_size(), worker);
      if (!k.ok()) return ToGrpcStatus(k.status());
      if (worker < 0) {
        if (absl::Status s = shard_->CheckSession(h.worker_id, in.session); !s.ok()) {
          return ToGrpcStatus(s);
        }
        session = in.session;
      }
      if (h.kind != ps::GRADIENTS) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "PushPull takes gradient chunks only");
      }
      if (worker < 0) {
        worker = h.worker_id;
        step = h.step;
      } else if (h.step != step) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("chunk of step ", h.step, " in a push-pull of step ", step));
      }
      if (absl::Status s = shard_->Accept(h, in); !s.ok()) {
        return ToGrpcStatus(s);
      }
      accepted.push_back(*k);
      ++pushed;
      if (grpc::Status s = send(/*wait=*/false); !s.ok()) return s;
    }
    if (context->IsCancelled() && worker >= 0) {
      // The worker's side vanished mid-step.
      return Broken(context, worker, step, session);
    }
    // A push-pull carries a whole step (a message that does not parse also ends the
    // reading): anything less is the caller's error, never an OK. The chunks it did
    // push count (each was whole and checked): the step can still be completed.
    if (pushed == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "push-pull without a (well-formed) gradient chunk");
    }
    if (grpc::Status s = send(/*wait=*/true); !s.ok()) return s;
    if (pushed != shard_->num_chunks()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("push-pull of step ", step, " ended after ", pushed, " of ",
                                       shard_->num_chunks(), " chunks (missing or malformed)"));
    }
    return grpc::Status::OK;
  }

  grpc::Status Push(grpc::ServerContext* context, grpc::ServerReader<ps::Chunk>* reader,
                    ps::PushResponse* response) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    StreamScope scope(shard_);
    ps::Chunk in;
    int worker = -1;
    int64_t step = -1;
    uint64_t session = 0;
    while (reader->Read(&in)) {
      const int64_t wire = static_cast<int64_t>(in.ByteSizeLong());
      absl::StatusOr<int64_t> k = shard_->CheckChunk(in, worker);
      if (!k.ok()) return ToGrpcStatus(k.status());
      if (worker < 0) {
        if (absl::Status s = shard_->CheckSession(in.worker_id(), in.session()); !s.ok()) {
          return ToGrpcStatus(s);
        }
      }
      worker = in.worker_id();
      step = in.step();
      session = in.session();
      if (absl::Status s = shard_->Accept(&in, wire); !s.ok()) return ToGrpcStatus(s);
      response->set_chunks(response->chunks() + 1);
    }
    if (context->IsCancelled()) return Broken(context, worker, step, session);
    // A push carries a whole tensor (see PushPull).
    if (response->chunks() != shard_->num_chunks()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("push ended after ", response->chunks(), " of ",
                                       shard_->num_chunks(), " chunks (missing or malformed)"));
    }
    return grpc::Status::OK;
  }

  grpc::Status Pull(grpc::ServerContext* context, const ps::PullRequest* request,
                    grpc::ServerWriter<ps::Chunk>* writer) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    StreamScope scope(shard_);
    if (request->kind() != ps::PARAMS && request->kind() != ps::OPTIMIZER_STATE) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "Pull serves PARAMS or OPTIMIZER_STATE");
    }
    if (absl::Status s = shard_->CheckSession(request->worker_id(), request->session()); !s.ok()) {
      return ToGrpcStatus(s);
    }
    if (request->step() < 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "negative step");
    }
    if (request->kind() == ps::PARAMS) {
      // Elastic PS: a worker that registered again rejoins at this step (or is told
      // OUT_OF_RANGE, to pull a later one).
      if (absl::Status s = shard_->Rejoin(request->worker_id(), request->step()); !s.ok()) {
        return ToGrpcStatus(s);
      }
    }
    ps::Chunk out;
    const int64_t chunks = shard_->num_chunks();
    for (int64_t k = 0; k < chunks; ++k) {
      if (absl::Status s = shard_->Serve(request->worker_id(), request->step(), request->kind(), k, &out);
          !s.ok()) {
        return ToGrpcStatus(s);
      }
      // Counted before the write, as in PushPull, so the record is complete when the
      // worker holds the last chunk.
      shard_->CountServed(request->worker_id(), request->step(), request->kind(),
                          static_cast<int64_t>(out.ByteSizeLong()));
      if (!writer->Write(out)) {
        return Broken(context, request->worker_id(), request->step(), request->session());
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Barrier(grpc::ServerContext* context, const ps::BarrierRequest* request,
                       ps::BarrierResponse* response) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    CallScope scope(shard_);
    if (absl::Status s = shard_->CheckSession(request->worker_id(), request->session()); !s.ok()) {
      return ToGrpcStatus(s);
    }
    std::vector<double> values(request->values().begin(), request->values().end());
    absl::StatusOr<std::vector<double>> sums = shard_->Barrier(request->worker_id(), request->name(), values);
    if (!sums.ok()) return ToGrpcStatus(sums.status());
    for (double v : *sums) response->add_sums(v);
    return grpc::Status::OK;
  }

  grpc::Status Stats(grpc::ServerContext* context, const ps::StatsRequest*,
                     ps::ShardStats* response) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    *response = shard_->Stats();
    return grpc::Status::OK;
  }

  grpc::Status Shutdown(grpc::ServerContext* context, const ps::ShutdownRequest* request,
                        ps::ShutdownResponse*) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    CallScope scope(shard_);
    if (absl::Status s = shard_->CheckSession(request->worker_id(), request->session()); !s.ok()) {
      return ToGrpcStatus(s);
    }
    return ToGrpcStatus(shard_->Goodbye(request->worker_id()));
  }

  grpc::Status Abort(grpc::ServerContext* context, const ps::AbortRequest* request,
                     ps::AbortResponse*) override {
    if (grpc::Status a = auth_.Check(*context); !a.ok()) return a;
    CallScope scope(shard_);
    if (absl::Status s = shard_->CheckSession(request->worker_id(), request->session()); !s.ok()) {
      return ToGrpcStatus(s);
    }
    return ToGrpcStatus(shard_->WorkerReported(request->worker_id(), request->reason()));
  }

 private:
  // The worker's side of a stream went away mid-step: under any sync mode the others
  // can no longer count on it.
  // `session`: the stream's (a stale stream of an earlier registration drops nobody).
  grpc::Status Broken(grpc::ServerContext* context, int worker, int64_t step, uint64_t session) {
    if (worker >= 0) {
      shard_->WorkerLost(worker,
                         absl::StrCat("its stream from ", context->peer(), " broke during step ",
                                      step, context->IsCancelled()
                                          ? " (connection closed, or keepalive pings unanswered: "
                                            "the worker stopped or is gone)"
                                          : ""),
                         session);
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "stream broken");
  }

  Shard* const shard_;
  const CallAuthenticator auth_;
  const int data_port_;  // RegisterResponse.data_port: 0 without a TCP data plane.
};

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const std::string& address,
                                                          const PsShardOptions& options,
                                                          const RpcSecurity& security) {
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(options);
  if (!shard.ok()) return shard.status();
  std::unique_ptr<PsServer> server(new PsServer());
  server->shard_ = std::move(*shard);
  server->security_ = security;
  if (PsTransportOf(options.config) == kPsTransportTcp) {
    if (server->security_.tls()) {
      return absl::InvalidArgumentError(
          "--ps_transport=tcp does not encrypt its data plane yet: for TLS use "
          "--ps_transport=grpc");
    }
    // The data listener on the host the service listens on.
    absl::StatusOr<std::unique_ptr<TcpDataServer>> data = TcpDataServer::Start(
        server->shard_.get(), HostOf(address), server->security_.token);
    if (!data.ok()) {
      return absl::Status(data.status().code(),
                          absl::StrCat("parameter-server shard ", options.shard,
                                       ": TCP data plane: ", data.status().message()));
    }
    server->data_server_ = std::move(*data);
  }
  server->service_ = std::make_unique<Service>(server->shard_.get(), server->security_.token,
                                               server->data_port());
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which would let this shard bind a port another
  // server listens on and take half of its clients: a port in use is refused instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, ServerCredentialsFor(server->security_), &server->port_);
  SetPsServerArgs(&builder);
  // Threads for every worker's calls (a push-pull, a pull, a barrier at once) and no
  // more; connections that never finish their handshake or stay idle are closed.
  ServerLimits limits = LimitsForClients(options.num_workers, kCallsPerWorker);
  limits.max_receive_message_bytes = kMaxPsMessageBytes;
  // Pings find a hung worker whose stream is open within the job's timeout.
  limits.keepalive = KeepaliveFor(options.timeout);
  ApplyServerLimits(limits, &builder);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("parameter-server shard ", options.shard,
                                               " cannot listen on ", address,
                                               " (address in use or not local?)"));
  }
  return server;
}

int PsServer::data_port() const {
  return data_server_ != nullptr ? data_server_->port() : 0;
}

std::shared_ptr<grpc::Channel> PsServer::InProcessChannel() {
  grpc::ChannelArguments args;
  SetPsChannelArgs(&args);
  return server_->experimental().InProcessChannelWithInterceptors(
      args, TokenInterceptors(security_.token));
}

void PsServer::Shutdown(absl::Duration grace) {
  // No server_: Start failed before it listened (the port was in use), and this
  // half-built server is being destroyed.
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

PsServer::~PsServer() {
  Shutdown(absl::Seconds(1));
  if (server_ != nullptr) server_->Wait();
}

}  // namespace ringside
