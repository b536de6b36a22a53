#include "ps_worker/shard_client.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc_keepalive.h"
#include "common/rpc_security.h"
#include "common/status_macros.h"
#include "grpcpp/impl/rpc_method.h"
#include "ps_server/ps_service.h"
#include "ps_server/wire_chunk.h"

namespace ringside {
namespace {

int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

// Transfer allowance on top of the server-side waiting timeout: a 64 MiB chunk at a
// slow 100 MB/s, and then some.
constexpr absl::Duration kTransferAllowance = absl::Seconds(30);

// ps.proto's PushPull, called with the WireChunk codec.
constexpr char kPushPullMethodName[] = "/ringside.ps.ParameterServer/PushPull";

}  // namespace

std::shared_ptr<grpc::Channel> NewPsChannel(const std::string& address,
                                            const RpcSecurity& security,
                                            absl::Duration peer_timeout) {
  grpc::ChannelArguments args;
  SetPsChannelArgs(&args);
  SetClientKeepalive(KeepaliveFor(peer_timeout), &args);
  return NewSecureChannel(address, security, args);
}

ShardClient::ShardClient(std::shared_ptr<grpc::Channel> channel, std::string name, int worker_id,
                         absl::Duration timeout)
    : channel_(channel),
      push_pull_method_(kPushPullMethodName, grpc::internal::RpcMethod::BIDI_STREAMING, channel),
      stub_(ps::ParameterServer::NewStub(channel)),
      name_(std::move(name)),
      worker_id_(worker_id),
      timeout_(timeout) {}

absl::Status ShardClient::Error(const grpc::Status& s, const std::string& what) const {
  std::string detail = s.error_message();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
      absl::StrContains(detail, "keepalive")) {
    // The channel's pings went unanswered (rpc_keepalive.h): the process is there (its
    // kernel keeps the connection) but does not run.
    detail = absl::StrCat("stopped answering: no reply to keepalive pings within ",
                          absl::FormatDuration(KeepaliveFor(timeout_).ack_timeout),
                          " (the shard is stopped, hung or its host is gone)");
  } else if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    detail = absl::StrCat("unreachable (", detail, ")");
  } else if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    detail = absl::StrCat("no answer within the deadline (", detail, ")");
  }
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(name_, ": ", what, ": ", detail));
}

void ShardClient::SetDeadline(grpc::ClientContext* context, absl::Duration extra) const {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout_ + extra));
}

int64_t ShardClient::num_chunks() const {
  return NumChunks(layout_.size(), layout_.chunk_floats());
}

absl::StatusOr<ps::RegisterResponse> ShardClient::Register(const ps::RegisterRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  context.set_wait_for_ready(true);  // The server may still be starting.
  ps::RegisterResponse response;
  grpc::Status s = stub_->Register(&context, request, &response);
  if (!s.ok()) return Error(s, "register");
  if (response.chunk_floats() < 1 || response.size() < 1) {
    return absl::DataLossError(absl::StrCat(name_, ": register: bad layout"));
  }
  layout_ = response;
  return response;
}

// One push-pull call; it outlives PushPull when the last chunk came back before the
// call's end (see FinishPending).
struct ShardClient::Call {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<WireChunk, WireChunk>> stream;
  int64_t step = 0;
  int64_t chunks = 0;
  // The slice's chunk grid (layout_.size(), layout_.chunk_floats()), copied when the
  // call opens: the reader thread reads it here, never layout_.
  int64_t size = 0;
  int64_t chunk_floats = 0;
  absl::Mutex mu;
  int64_t received ABSL_GUARDED_BY(mu) = 0;
  bool reader_done ABSL_GUARDED_BY(mu) = false;
  absl::Status read_status ABSL_GUARDED_BY(mu);
};

ShardClient::~ShardClient() {
  if (pending_ != nullptr) {
    pending_->context.TryCancel();
    FinishPending().IgnoreError();
  }
}

absl::Status ShardClient::ConnectDataPlane(const std::string& host, const std::string& token, WireFormat wire) {
  if (layout_.data_port() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(name_, ": serves no TCP data plane"));
  }
  RINGSIDE_ASSIGN_OR_RETURN(tcp_, TcpShardChannel::Connect(host, layout_.data_port(), worker_id_,
                                                           token, &layout_, name_, timeout_, wire));
  return absl::OkStatus();
}

absl::Status ShardClient::FinishPending() {
  if (tcp_ != nullptr) return tcp_->FinishPending();
  if (pending_ == nullptr) return absl::OkStatus();
  std::unique_ptr<Call> call = std::move(pending_);
  reader_.Wait();  // The call's reader task.
  grpc::Status s = call->stream->Finish();
  absl::MutexLock l(&call->mu);
  if (!call->read_status.ok()) return call->read_status;
  if (!s.ok()) return Error(s, absl::StrCat("push-pull of step ", call->step));
  if (call->received != call->chunks) {
    return absl::DataLossError(absl::StrCat(name_, ": push-pull of step ", call->step, " returned ",
                                            call->received, " of ", call->chunks, " chunks"));
  }
  return absl::OkStatus();
}

// Reader side of a push-pull call: it runs beside the sender, on this client's
// long-lived reader thread, because the server streams updated chunks back while this
// worker is still pushing (and would stall if nobody read them).
void ShardClient::ReadPushPullReplies(Call* c, float* params,
                                      const std::function<bool(int64_t)>& wait_writable,
                                      const std::function<void(int64_t)>& arrived,
                                      PushPullTiming* timing) const {
  const int64_t step = c->step;
  const int64_t size = c->size;
  const int64_t cf = c->chunk_floats;
  WireChunk in;
  while (c->stream->Read(&in)) {
    const int64_t n = static_cast<int64_t>(in.payload_size() / sizeof(float));
    const int64_t k = ChunkIndexAt(size, cf, in.offset);
    {
      absl::MutexLock l(&c->mu);
      if (c->received >= c->chunks || in.kind != ps::PARAMS || k < 0 ||
          in.payload_size() % sizeof(float) != 0 || n != ChunkOf(size, cf, k).size ||
          in.step != step + 1) {
        c->read_status = absl::DataLossError(absl::StrCat(
            name_, ": malformed or extra parameter chunk at offset ", in.offset, " for step ", in.step));
        c->context.TryCancel();
        break;
      }
    }
    // An early reply waits until backward no longer reads the chunk's parameters.
    const bool writable = wait_writable(k);
    {
      absl::MutexLock l(&c->mu);
      if (!writable) {
        c->read_status = absl::CancelledError(
            absl::StrCat(name_, ": push-pull of step ", step, " cancelled"));
        c->context.TryCancel();
        break;
      }
      in.CopyPayloadTo(params + in.offset);
      // Before the count: PushPull must not return before the last arrival is told.
      if (arrived) arrived(k);
      const int64_t now = NowUs();
      if (c->received++ == 0) timing->first_chunk_us = now;
      timing->last_chunk_us = now;
      timing->bytes_received += in.wire_bytes();
    }
  }
  absl::MutexLock l(&c->mu);
  c->reader_done = true;
}

bool ShardClient::PushGradientChunks(Call* c, const float* grads,
                                     const std::function<bool(int64_t)>& wait_ready,
                                     PushPullTiming* timing) const {
  WireChunk out;
  out.worker_id = worker_id_;
  out.step = c->step;
  out.kind = ps::GRADIENTS;
  out.session = layout_.session();
  bool write_ok = true;
  bool cancelled = false;
  for (int64_t k = c->chunks - 1; k >= 0 && write_ok; --k) {
    if (!wait_ready(k)) {
      cancelled = true;
      c->context.TryCancel();
      break;
    }
    const Slice chunk = ChunkOf(c->size, c->chunk_floats, k);
    out.offset = chunk.offset;
    // Borrowed: `grads` stays unchanged until every chunk's reply is back, and the
    // server replies to a chunk only after reading it.
    out.BorrowPayload(grads + chunk.offset, chunk.size * sizeof(float));
    timing->bytes_sent += out.wire_bytes();
    write_ok = c->stream->Write(out);
  }
  if (write_ok && !cancelled) c->stream->WritesDone();
  timing->push_done_us = NowUs();
  return cancelled;
}

// One protocol exchange: open the call, start the reader (ReadPushPullReplies), push
// on this thread (PushGradientChunks), then wait for the replies. The ordering rules
// (push highest first, write only once writable) live in those two helpers.
absl::Status ShardClient::PushPull(int64_t step, const float* grads, float* params,
                                   const std::function<bool(int64_t)>& wait_ready,
                                   const std::function<bool(int64_t)>& wait_writable,
                                   const std::function<void(int64_t)>& arrived,
                                   PushPullTiming* timing) {
  if (tcp_ != nullptr) {
    return tcp_->PushPull(step, grads, params, wait_ready, wait_writable, arrived, timing);
  }
  RINGSIDE_RETURN_IF_ERROR(FinishPending());
  auto call = std::make_unique<Call>();
  Call* c = call.get();
  c->step = step;
  c->chunks = num_chunks();
  c->size = layout_.size();
  c->chunk_floats = layout_.chunk_floats();
  SetDeadline(&c->context, kTransferAllowance);
  // PushPull on the WireChunk codec (ps_server/wire_chunk.h): gradient chunks go out
  // from `grads` itself, parameter chunks are copied once, into `params`.
  c->stream.reset(grpc::internal::ClientReaderWriterFactory<WireChunk, WireChunk>::Create(
      channel_.get(), push_pull_method_, &c->context));

  // The task keeps its own copies of the callbacks.
  reader_.Run([this, c, params, wait_writable, arrived, timing] {
    ReadPushPullReplies(c, params, wait_writable, arrived, timing);
  });
  const bool cancelled = PushGradientChunks(c, grads, wait_ready, timing);
  bool all_back;
  {
    absl::MutexLock l(&c->mu);
    auto settled = [c]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu) {
      return c->received == c->chunks || c->reader_done;
    };
    c->mu.Await(absl::Condition(&settled));
    all_back = c->received == c->chunks && c->read_status.ok();
  }
  pending_ = std::move(call);
  if (cancelled) {
    FinishPending().IgnoreError();
    return absl::CancelledError(absl::StrCat(name_, ": push-pull of step ", step, " cancelled"));
  }
  // Every updated chunk is here: the step can go on. The call's end (the server's
  // status) is collected by the next call on this shard (FinishPending), which saves
  // this step the round trips of closing the stream.
  if (all_back) return absl::OkStatus();
  return FinishPending();
}

absl::Status ShardClient::Push(int64_t step, ps::TensorKind kind, const float* data,
                               int64_t* bytes_sent) {
  if (tcp_ != nullptr) return tcp_->Push(step, kind, data, bytes_sent);
  const int64_t size = layout_.size();
  const int64_t cf = layout_.chunk_floats();
  grpc::ClientContext context;
  SetDeadline(&context, kTransferAllowance);
  ps::PushResponse response;
  std::unique_ptr<grpc::ClientWriter<ps::Chunk>> writer = stub_->Push(&context, &response);
  ps::Chunk out;
  out.set_worker_id(worker_id_);
  out.set_step(step);
  out.set_kind(kind);
  out.set_session(layout_.session());
  bool ok = true;
  for (int64_t k = 0; k < num_chunks() && ok; ++k) {
    const Slice c = ChunkOf(size, cf, k);
    out.set_offset(c.offset);
    out.mutable_data()->assign(reinterpret_cast<const char*>(data + c.offset), c.size * sizeof(float));
    if (bytes_sent != nullptr) *bytes_sent += static_cast<int64_t>(out.ByteSizeLong());
    ok = writer->Write(out);
  }
  if (ok) writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (!s.ok()) return Error(s, absl::StrCat("push of step ", step));
  return absl::OkStatus();
}

absl::Status ShardClient::Pull(int64_t step, ps::TensorKind kind, float* out,
                               int64_t* bytes_received) {
  if (tcp_ != nullptr) return tcp_->Pull(step, kind, out, bytes_received);
  const int64_t size = layout_.size();
  const int64_t cf = layout_.chunk_floats();
  grpc::ClientContext context;
  SetDeadline(&context, kTransferAllowance);
  ps::PullRequest request;
  request.set_worker_id(worker_id_);
  request.set_step(step);
  request.set_kind(kind);
  request.set_session(layout_.session());
  std::unique_ptr<grpc::ClientReader<ps::Chunk>> reader = stub_->Pull(&context, request);
  ps::Chunk in;
  int64_t received = 0;
  absl::Status bad;
  while (bad.ok() && reader->Read(&in)) {
    const int64_t n = static_cast<int64_t>(in.data().size() / sizeof(float));
    const int64_t k = ChunkIndexAt(size, cf, in.offset());
    if (k < 0 || n != ChunkOf(size, cf, k).size) {
      bad = absl::DataLossError(absl::StrCat(name_, ": malformed chunk at offset ", in.offset()));
      context.TryCancel();
      break;
    }
    std::memcpy(out + in.offset(), in.data().data(), n * sizeof(float));
    if (bytes_received != nullptr) *bytes_received += static_cast<int64_t>(in.ByteSizeLong());
    ++received;
  }
  grpc::Status s = reader->Finish();
  if (!bad.ok()) return bad;
  if (!s.ok()) return Error(s, absl::StrCat("pull of step ", step));
  if (received != num_chunks()) {
    return absl::DataLossError(absl::StrCat(name_, ": pull of step ", step, " returned ", received,
                                            " of ", num_chunks(), " chunks"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> ShardClient::Barrier(const std::string& name,
                                                         const std::vector<double>& values) {
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(5));
  ps::BarrierRequest request;
  request.set_worker_id(worker_id_);
  request.set_name(name);
  request.set_session(layout_.session());
  for (double v : values) request.add_values(v);
  ps::BarrierResponse response;
  grpc::Status s = stub_->Barrier(&context, request, &response);
  if (!s.ok()) return Error(s, absl::StrCat("barrier '", name, "'"));
  return std::vector<double>(response.sums().begin(), response.sums().end());
}

absl::StatusOr<ps::ShardStats> ShardClient::Stats() {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  ps::ShardStats stats;
  grpc::Status s = stub_->Stats(&context, ps::StatsRequest(), &stats);
  if (!s.ok()) return Error(s, "stats");
  return stats;
}

absl::Status ShardClient::Abort(const std::string& reason) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + std::min(timeout_ / 4, absl::Seconds(1))));
  ps::AbortRequest request;
  request.set_worker_id(worker_id_);
  request.set_session(layout_.session());
  request.set_reason(reason);
  ps::AbortResponse response;
  grpc::Status s = stub_->Abort(&context, request, &response);
  if (!s.ok()) return Error(s, "abort");
  return absl::OkStatus();
}

absl::Status ShardClient::Shutdown() {
  RINGSIDE_RETURN_IF_ERROR(FinishPending());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  ps::ShutdownRequest request;
  request.set_worker_id(worker_id_);
  request.set_session(layout_.session());
  ps::ShutdownResponse response;
  grpc::Status s = stub_->Shutdown(&context, request, &response);
  if (!s.ok()) return Error(s, "shutdown");
  return absl::OkStatus();
}

}  // namespace ringside
