#include "ps_server/tcp_data_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc_keepalive.h"
#include "common/run_config.h"
#include "common/status_macros.h"
#include "ps_server/tcp_wire.h"

namespace ringside {
namespace {

// How long one read or write inside a request may take: the shard's timeout (what a
// worker may keep others waiting) plus a transfer allowance, as the gRPC calls'
// deadlines (shard_client.cc).
constexpr absl::Duration kTransferAllowance = absl::Seconds(30);
// How often a connection waiting for its worker's next request looks at the stop flag.
constexpr absl::Duration kIdlePoll = absl::Milliseconds(100);

// "ipv4:10.0.0.2:51234", as gRPC names a peer (Shard::NotePeer's form).
std::string PeerOf(int fd) {
  sockaddr_storage address;
  socklen_t length = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "unknown";
  char host[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return absl::StrCat("ipv4:", host, ":", ntohs(a->sin_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in6*>(&address);
  inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
  return absl::StrCat("ipv6:[", host, "]:", ntohs(a->sin6_port));
}

// Compares without returning early, so the time taken does not tell how much matched.
bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

// One worker's connection: the hello, then its requests one at a time, on its own
// thread. Every failure ends the connection (after a kPsError frame when the socket
// still works); one that breaks a request midway tells the shard the worker is lost.
class TcpDataServer::Connection {
 public:
  // `wire`: the format of push-pull gradients and their replies (--compress); pushes of
  // PARAMS / OPTIMIZER_STATE and pulls stay float32.
  Connection(Shard* shard, int fd, const std::string& token, const std::atomic<bool>* stopping,
             WireFormat wire)
      : shard_(shard), fd_(fd), token_(token), stopping_(stopping), peer_(PeerOf(fd)), wire_(wire) {}

  void Run() {
    // The replies to every worker share this shard's link: keep them abreast.
    absl::Status s = CapSendBuffer(fd_, static_cast<int>(kPsSendBufferChunks * shard_->chunk_floats() * sizeof(float)));
    if (s.ok()) s = Hello();
    while (s.ok()) {
      absl::StatusOr<FrameHeader> header = NextRequest();
      if (!header.ok()) {
        s = header.status();
        break;
      }
      if (header->tag == 0) {  // The worker closed between requests, or stopping.
        // A worker that has not said goodbye closes its data connection only when its
        // process ends: it is gone (as a broken stream says on gRPC, whose push-pull
        // call stays open between steps).
        if (!stopping_->load() && shard_->CheckSession(worker_, session_).ok()) {
          shard_->WorkerLost(worker_,
                             absl::StrCat("its data connection from ", peer_,
                                          " closed between steps (the worker is gone)"),
                             session_);
        }
        return;
      }
      shard_->CallStarted();
      s = Request(*header);
      shard_->CallEnded();
      if (!s.ok() && header->tag == kPsPull && !absl::IsUnavailable(s) &&
          !absl::IsDeadlineExceeded(s)) {
        // A refused pull leaves the connection in step (the worker reads up to the
        // error frame, and nothing follows it): the worker may ask again (elastic PS:
        // OutOfRange, pull a later step), as it calls Pull again on gRPC.
        in_request_step_ = -1;
        s = SendErrorFrame(fd_, s, Deadline());
      }
    }
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      // The connection broke or went silent inside a request.
      if (in_request_step_ >= 0) {
        shard_->WorkerLost(worker_,
                           absl::StrCat("its data connection from ", peer_, " broke during step ",
                                        in_request_step_, " (", s.message(), ")"),
                           session_);
      }
      return;
    }
    SendErrorFrame(fd_, s, Deadline()).IgnoreError();
  }

 private:
  absl::Time Deadline() const { return absl::Now() + shard_->options().timeout + kTransferAllowance; }

  // Protocol step 1: the hello, the token, the session.
  absl::Status Hello() {
    PsHello hello;
    RINGSIDE_RETURN_IF_ERROR(ReadAll(fd_, &hello, sizeof(hello), Deadline()));
    if (hello.magic != kPsHelloMagic || hello.version != kPsWireVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a ringside parameter-server data connection (or another version): "
                       "magic ", hello.magic, ", version ", hello.version));
    }
    if (hello.token_bytes > kMaxPsTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat("a token of ", hello.token_bytes, " bytes"));
    }
    std::string token(hello.token_bytes, '\0');
    RINGSIDE_RETURN_IF_ERROR(ReadAll(fd_, token.data(), token.size(), Deadline()));
    if (!token_.empty() && !SameSecret(token, token_)) {
      return absl::UnauthenticatedError(token.empty()
                                            ? "the data connection carries no token"
                                            : "the data connection's token is wrong");
    }
    RINGSIDE_RETURN_IF_ERROR(shard_->CheckSession(hello.worker_id, hello.session));
    worker_ = hello.worker_id;
    session_ = hello.session;
    return SendEmptyFrame(fd_, kPsOk, Deadline());
  }

  // Waits (without a deadline: a worker may compute or evaluate for long) for the next
  // request's header. tag 0: the worker closed the connection, or the server stops.
  absl::StatusOr<FrameHeader> NextRequest() {
    while (!stopping_->load()) {
      RINGSIDE_ASSIGN_OR_RETURN(bool ready, WaitFor(fd_, POLLIN, absl::Now() + kIdlePoll));
      if (!ready) continue;
      char probe;
      const ssize_t n = recv(fd_, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0) return FrameHeader{0, 0};
      absl::StatusOr<FrameHeader> header = ReadFrameHeader(fd_, Deadline(), "worker");
      if (!header.ok() && absl::IsUnavailable(header.status())) return FrameHeader{0, 0};
      return header;
    }
    return FrameHeader{0, 0};
  }

  // Reads a request or chunk frame's ChunkRef, after checking the frame is at least that.
  absl::StatusOr<ChunkRef> ReadRef(const FrameHeader& header) {
    if (header.bytes < sizeof(ChunkRef)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a frame of ", header.bytes, " bytes: shorter than its chunk reference"));
    }
    ChunkRef ref;
    RINGSIDE_RETURN_IF_ERROR(ReadAll(fd_, &ref, sizeof(ref), Deadline()));
    return ref;
  }

  // Reads chunk `ref.chunk`'s values into buffer_ as floats after checking the frame's
  // byte count against the shard's grid (gradients in the job's wire format, decoded
  // here; anything else float32); the ChunkHeader the shard checks and accepts.
  absl::StatusOr<ChunkHeader> ReadChunk(const FrameHeader& header, const ChunkRef& ref) {
    const Slice slice = shard_->slice();
    const WireFormat format = ref.kind == ps::GRADIENTS ? wire_ : WireFormat::kFp32;
    const int64_t expected = ChunkFrameBytes(slice.size, shard_->chunk_floats(), ref.chunk, format);
    if (expected < 0 || header.bytes != static_cast<uint64_t>(expected)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker ", worker_, " sent a chunk frame of ", header.bytes, " bytes for chunk ",
          ref.chunk, " where the shard's grid has ",
          expected < 0 ? std::string("no such chunk") : absl::StrCat(expected, " bytes")));
    }
    const Slice chunk = ChunkOf(slice.size, shard_->chunk_floats(), ref.chunk);
    buffer_.resize(chunk.size);
    RINGSIDE_RETURN_IF_ERROR(ReadChunkValues(fd_, buffer_.data(), chunk.size, format, &wire_buffer_, Deadline()));
    return ChunkHeader{worker_, ref.step, static_cast<ps::TensorKind>(ref.kind), chunk.offset};
  }

  absl::Status Request(const FrameHeader& header) {
    switch (header.tag) {
      case kPsPushPull:
      case kPsPush:
        return Pushes(header);
      case kPsPull:
        return Pull(header);
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("worker ", worker_, " sent an unknown request ", header.tag));
    }
  }

  // Sends chunk k's served floats as a kPsParams frame in `format`, counted first (as
  // the gRPC service does: the step's record is complete when the worker holds the last
  // chunk).
  absl::Status SendServed(int64_t step, ps::TensorKind kind, int64_t k, const Shard::RawChunk& raw,
                          WireFormat format = WireFormat::kFp32) {
    last_sent_ = absl::Now();
    shard_->CountServed(worker_, step, kind,
                        static_cast<int64_t>(kFrameHeaderBytes) +
                            ChunkFrameBytes(shard_->slice().size, shard_->chunk_floats(), k, format));
    return SendChunkFrame(fd_, kPsParams, {step, static_cast<int32_t>(k), kind}, raw.data,
                          raw.chunk.size, format, &wire_buffer_, Deadline());
  }

  // kPsPushPull or kPsPush chunk frames up to kPsEndPush. Push-pull: each chunk's
  // updated parameters go back as soon as the sync mode releases them (in push
  // order), the rest after kPsEndPush; then kPsDone.
  absl::Status Pushes(FrameHeader header) {
    const bool push_pull = header.tag == kPsPushPull;
    std::deque<int64_t> accepted;  // Push-pull: chunks aggregated, not yet sent back.
    int64_t step = -1, pushed = 0;
    Shard::RawChunk raw;
    auto send_ready = [&](bool wait) -> absl::Status {
      while (!accepted.empty()) {
        const int64_t k = accepted.front();
        if (wait) {
          RINGSIDE_RETURN_IF_ERROR(shard_->Serve(worker_, step + 1, ps::PARAMS, k, &raw,
                                                 [this] { return Waiting(); }));
        } else {
          RINGSIDE_ASSIGN_OR_RETURN(bool ready,
                                    shard_->ServeIfReady(worker_, step + 1, ps::PARAMS, k, &raw));
          if (!ready) return absl::OkStatus();
        }
        accepted.pop_front();
        // A push-pull's replies in the job's wire format (parameters, or the summation
        // servers' mean gradients).
        RINGSIDE_RETURN_IF_ERROR(SendServed(step + 1, ps::PARAMS, k, raw, wire_));
      }
      return absl::OkStatus();
    };
    while (true) {
      RINGSIDE_ASSIGN_OR_RETURN(const ChunkRef ref, ReadRef(header));
      if (header.tag == kPsEndPush) {
        if (header.bytes != sizeof(ChunkRef) || ref.chunk != pushed) {
          return absl::InvalidArgumentError(absl::StrCat(
              "worker ", worker_, " ended a push of step ", step, " after ", ref.chunk,
              " chunks where the shard took ", pushed));
        }
        break;
      }
      if (header.tag != (push_pull ? kPsPushPull : kPsPush)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "worker ", worker_, " sent request ", header.tag, " inside a push"));
      }
      if (step < 0) step = ref.step;
      in_request_step_ = step;
      if (ref.step != step) {
        return absl::InvalidArgumentError(
            absl::StrCat("chunk of step ", ref.step, " in a push of step ", step));
      }
      RINGSIDE_ASSIGN_OR_RETURN(const ChunkHeader h, ReadChunk(header, ref));
      if (push_pull != (h.kind == ps::GRADIENTS)) {
        return absl::InvalidArgumentError(push_pull ? "a push-pull takes gradient chunks only"
                                                    : "a push takes PARAMS or OPTIMIZER_STATE");
      }
      RINGSIDE_RETURN_IF_ERROR(shard_->CheckChunk(h, buffer_.size() * sizeof(float), worker_).status());
      RINGSIDE_RETURN_IF_ERROR(shard_->Accept(
          h, buffer_.data(), static_cast<int64_t>(kFrameHeaderBytes + header.bytes)));
      ++pushed;
      if (push_pull) {
        accepted.push_back(ref.chunk);
        RINGSIDE_RETURN_IF_ERROR(send_ready(/*wait=*/false));
      }
      RINGSIDE_ASSIGN_OR_RETURN(header, ReadFrameHeader(fd_, Deadline(), "worker"));
    }
    // A push carries a whole tensor: anything less is the worker's error.
    if (pushed != shard_->num_chunks()) {
      return absl::InvalidArgumentError(absl::StrCat("push of step ", step, " ended after ", pushed,
                                                     " of ", shard_->num_chunks(), " chunks"));
    }
    if (push_pull) RINGSIDE_RETURN_IF_ERROR(send_ready(/*wait=*/true));
    in_request_step_ = -1;
    return SendEmptyFrame(fd_, kPsDone, Deadline());
  }

  // kPsPull: every chunk of `kind` for `step`, in chunk order, then kPsDone.
  absl::Status Pull(const FrameHeader& header) {
    RINGSIDE_ASSIGN_OR_RETURN(const ChunkRef ref, ReadRef(header));
    const auto kind = static_cast<ps::TensorKind>(ref.kind);
    if (header.bytes != sizeof(ChunkRef) || (kind != ps::PARAMS && kind != ps::OPTIMIZER_STATE)) {
      return absl::InvalidArgumentError("a pull serves PARAMS or OPTIMIZER_STATE");
    }
    if (ref.step < 0) return absl::InvalidArgumentError("negative step");
    RINGSIDE_RETURN_IF_ERROR(shard_->CheckSession(worker_, session_));
    // Elastic PS: a worker that registered again rejoins at this step.
    if (kind == ps::PARAMS) RINGSIDE_RETURN_IF_ERROR(shard_->Rejoin(worker_, ref.step));
    in_request_step_ = ref.step;
    Shard::RawChunk raw;
    for (int64_t k = 0; k < shard_->num_chunks(); ++k) {
      RINGSIDE_RETURN_IF_ERROR(shard_->Serve(worker_, ref.step, kind, k, &raw,
                                             [this] { return Waiting(); }));
      RINGSIDE_RETURN_IF_ERROR(SendServed(ref.step, kind, k, raw));
    }
    in_request_step_ = -1;
    return SendEmptyFrame(fd_, kPsDone, Deadline());
  }

  // Polled while a request waits on other workers: sends a heartbeat when the worker
  // has heard nothing for a keepalive interval; true (the wait can end) once the
  // worker's end is closed, the heartbeat cannot be sent, or the server stops.
  bool Waiting() {
    if (absl::Now() - last_sent_ >= KeepaliveFor(shard_->options().timeout).interval) {
      if (!SendEmptyFrame(fd_, kPsHeartbeat, Deadline()).ok()) return true;
      last_sent_ = absl::Now();
    }
    return PeerClosed();
  }

  // The worker's end is closed (or the server stops): a wait on its behalf can end.
  bool PeerClosed() const {
    if (stopping_->load()) return true;
    pollfd p = {fd_, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

  Shard* const shard_;
  const int fd_;
  const std::string& token_;
  const std::atomic<bool>* const stopping_;
  const std::string peer_;
  int worker_ = -1;
  uint64_t session_ = 0;
  int64_t in_request_step_ = -1;  // The step of the request in progress; -1 between.
  absl::Time last_sent_ = absl::Now();  // The last frame to the worker (heartbeats).
  std::vector<float> buffer_;     // One received chunk.
  const WireFormat wire_;
  std::vector<uint16_t> wire_buffer_;  // One chunk's 2-byte values, sent or received.
};

absl::StatusOr<std::unique_ptr<TcpDataServer>> TcpDataServer::Start(Shard* shard,
                                                                    const std::string& host,
                                                                    std::string token) {
  RINGSIDE_ASSIGN_OR_RETURN(const WireFormat wire, ParseCompression(shard->options().config.compress()));
  RINGSIDE_ASSIGN_OR_RETURN(TcpListener listener, ListenTcp(host, 64));
  const size_t space = listener.endpoint.rfind(' ');
  int port = 0;
  if (space == std::string::npos || !absl::SimpleAtoi(listener.endpoint.substr(space + 1), &port)) {
    return absl::InternalError(absl::StrCat("bad listening address '", listener.endpoint, "'"));
  }
  std::unique_ptr<TcpDataServer> server(
      new TcpDataServer(shard, std::move(listener), port, std::move(token), wire));
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

TcpDataServer::TcpDataServer(Shard* shard, TcpListener listener, int port, std::string token, WireFormat wire)
    : shard_(shard), listener_(std::move(listener)), port_(port), token_(std::move(token)), wire_(wire) {}

void TcpDataServer::AcceptLoop() {
  while (!stopping_.load()) {
    absl::StatusOr<ScopedFd> fd = AcceptTcp(listener_.fd.get(), absl::Now() + kIdlePoll);
    absl::MutexLock l(&mu_);
    ReapEnded();
    if (!fd.ok()) continue;  // No connection yet (or one that went before it was taken).
    if (stopping_.load()) break;
    const int raw = fd->release();
    auto served = std::make_unique<Served>();
    Served* const entry = served.get();
    entry->fd = raw;
    entry->thread = std::thread([this, raw, entry] {
      ScopedFd owned(raw);
      Connection(shard_, raw, token_, &stopping_, wire_).Run();
      shutdown(raw, SHUT_RDWR);
      // The descriptor stays open (owned) until the thread ends; the stop path only
      // shuts sockets down, so it never touches a closed or reused descriptor.
      absl::MutexLock l(&mu_);
      entry->fd = -1;
      entry->done = true;
    });
    served_.push_back(std::move(served));
  }
}

void TcpDataServer::ReapEnded() {
  for (auto it = served_.begin(); it != served_.end();) {
    if (!(*it)->done) {
      ++it;
      continue;
    }
    // Done: the thread is past its last use of mu_'s state and ends at once.
    (*it)->thread.join();
    it = served_.erase(it);
  }
}

TcpDataServer::~TcpDataServer() {
  stopping_.store(true);
  // Wakes the acceptor's poll now rather than at its next idle tick.
  shutdown(listener_.fd.get(), SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  std::list<std::unique_ptr<Served>> served;
  {
    absl::MutexLock l(&mu_);
    for (const auto& s : served_) {
      if (s->fd >= 0) shutdown(s->fd, SHUT_RDWR);
    }
    served.swap(served_);
  }
  for (const auto& s : served) s->thread.join();
}

}  // namespace ringside
