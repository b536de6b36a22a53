#include "ps_worker/tcp_shard_channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc_keepalive.h"
#include "common/status_macros.h"
#include "ps_server/sharding.h"
#include "ps_server/tcp_wire.h"
#include "ps_worker/shard_client.h"

namespace ringside {
namespace {

// On top of the shard's timeout (how long it may keep this worker waiting on others),
// as ShardClient's calls (shard_client.cc).
constexpr absl::Duration kTransferAllowance = absl::Seconds(30);

int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

// Frame bytes of a chunk frame with `floats` values in `format`, header included.
int64_t FrameBytes(int64_t floats, WireFormat format = WireFormat::kFp32) {
  return static_cast<int64_t>(kFrameHeaderBytes + sizeof(ChunkRef) + floats * WireBytesPerValue(format));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpShardChannel>> TcpShardChannel::Connect(
    const std::string& host, int port, int worker_id, const std::string& token,
    const ps::RegisterResponse* layout, std::string name, absl::Duration timeout, WireFormat wire) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<ScopedFd> fd = ConnectTcp(host, absl::StrCat(port), deadline);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(), absl::StrCat(name, ": data connection: ",
                                                         fd.status().message()));
  }
  if (absl::Status capped = CapSendBuffer(fd->get(), static_cast<int>(kPsSendBufferChunks * layout->chunk_floats() *
                                                                           sizeof(float)));
      !capped.ok()) {
    return absl::Status(capped.code(), absl::StrCat(name, ": data connection: ", capped.message()));
  }
  std::unique_ptr<TcpShardChannel> channel(
      new TcpShardChannel(std::move(*fd), layout, std::move(name), timeout, wire));
  // Protocol step 1: hello and token; the shard answers kPsOk or kPsError.
  const PsHello hello = {kPsHelloMagic, kPsWireVersion, worker_id,
                         static_cast<uint32_t>(token.size()), layout->session()};
  const int f = channel->fd_.get();
  absl::Status s = WriteAll(f, &hello, sizeof(hello), deadline);
  if (s.ok()) s = WriteAll(f, token.data(), token.size(), deadline);
  if (s.ok()) {
    absl::StatusOr<FrameHeader> reply = ReadFrameHeader(f, deadline, channel->name_);
    if (!reply.ok()) {
      s = reply.status();
    } else if (reply->tag != kPsOk || reply->bytes != 0) {
      s = absl::DataLossError(absl::StrCat("answered the hello with frame ", reply->tag));
    }
  }
  if (!s.ok()) return channel->Error(s, "data connection");
  return channel;
}

TcpShardChannel::TcpShardChannel(ScopedFd fd, const ps::RegisterResponse* layout,
                                 std::string name, absl::Duration timeout, WireFormat wire)
    : fd_(std::move(fd)), layout_(layout), name_(std::move(name)), timeout_(timeout), wire_(wire) {}

TcpShardChannel::~TcpShardChannel() {
  shutdown(fd_.get(), SHUT_RDWR);  // A reader still waiting sees the end at once.
  reader_.Wait();
}

absl::Duration TcpShardChannel::Silence() const {
  const KeepalivePolicy k = KeepaliveFor(timeout_);
  return k.interval + k.ack_timeout;
}

absl::Status TcpShardChannel::Error(const absl::Status& s, const std::string& what) const {
  std::string detail(s.message());
  if (absl::IsUnavailable(s)) detail = absl::StrCat("unreachable (", detail, ")");
  if (absl::IsDeadlineExceeded(s)) {
    // The kernel of a stopped process still takes and acknowledges bytes: only the
    // shard's silence tells.
    detail = absl::StrCat("stopped answering: nothing moved on the data connection for ",
                          absl::FormatDuration(Silence()),
                          " (the shard is stopped, hung or its host is gone; ", detail, ")");
  }
  return absl::Status(s.code(), absl::StrCat(name_, ": ", what, ": ", detail));
}

absl::StatusOr<FrameHeader> TcpShardChannel::NextFrame(
    const std::function<int64_t()>& waiting_since) {
  const absl::Time give_up = absl::Now() + timeout_ + kTransferAllowance;
  absl::Time last_heard = absl::Now();
  while (true) {
    RINGSIDE_ASSIGN_OR_RETURN(bool readable,
                              WaitFor(fd_.get(), POLLIN, absl::Now() + absl::Milliseconds(100)));
    if (readable) {
      RINGSIDE_ASSIGN_OR_RETURN(const FrameHeader header,
                                ReadFrameHeader(fd_.get(), Deadline(), name_));
      if (header.tag != kPsHeartbeat || header.bytes != 0) return header;
      last_heard = absl::Now();
      continue;
    }
    const int64_t since_us = waiting_since();
    if (since_us != 0) {
      const absl::Time since = std::max(last_heard, absl::FromUnixMicros(since_us));
      if (absl::Now() - since > Silence()) {
        return absl::DeadlineExceededError("no frame and no heartbeat");
      }
    }
    if (absl::Now() > give_up) return absl::DeadlineExceededError("no frame at all");
  }
}

absl::Status TcpShardChannel::ReadServed(int64_t step, ps::TensorKind kind, WireFormat format, float* out,
                                         const std::function<int64_t()>& waiting_since,
                                         const std::function<bool(int64_t)>& wait_writable,
                                         const std::function<void(int64_t)>& arrived,
                                         const std::function<void(int64_t)>& received) {
  const int64_t size = layout_->size(), cf = layout_->chunk_floats();
  std::vector<bool> seen(NumChunks(size, cf), false);
  while (true) {
    RINGSIDE_ASSIGN_OR_RETURN(const FrameHeader header, NextFrame(waiting_since));
    if (header.tag == kPsDone && header.bytes == 0) return absl::OkStatus();
    ChunkRef ref = {};
    if (header.tag != kPsParams || header.bytes < sizeof(ChunkRef)) {
      return absl::DataLossError(absl::StrCat("unexpected frame ", header.tag, " of ",
                                              header.bytes, " bytes"));
    }
    RINGSIDE_RETURN_IF_ERROR(ReadAll(fd_.get(), &ref, sizeof(ref), Deadline()));
    const int64_t expected = ChunkFrameBytes(size, cf, ref.chunk, format);
    if (expected < 0 || header.bytes != static_cast<uint64_t>(expected) || ref.kind != kind ||
        ref.step != step || seen[ref.chunk]) {
      return absl::DataLossError(absl::StrCat("malformed or extra chunk ", ref.chunk, " of ",
                                              header.bytes, " bytes for step ", ref.step));
    }
    // An early reply waits until backward no longer reads the chunk's parameters.
    if (wait_writable && !wait_writable(ref.chunk)) {
      return absl::CancelledError(absl::StrCat("step ", step, " cancelled"));
    }
    seen[ref.chunk] = true;
    const Slice chunk = ChunkOf(size, cf, ref.chunk);
    // Straight into place (float32: the payload is read once, by the kernel's copy;
    // fp16 / bf16: decoded from the reader's scratch).
    RINGSIDE_RETURN_IF_ERROR(
        ReadChunkValues(fd_.get(), out + chunk.offset, chunk.size, format, &read_scratch_, Deadline()));
    if (arrived) arrived(ref.chunk);
    received(FrameBytes(chunk.size, format));
  }
}

absl::Status TcpShardChannel::FinishPending() {
  if (pending_ == nullptr) return absl::OkStatus();
  std::unique_ptr<Pending> p = std::move(pending_);
  reader_.Wait();
  const int64_t chunks = NumChunks(layout_->size(), layout_->chunk_floats());
  absl::MutexLock l(&p->mu);
  if (!p->status.ok()) return Error(p->status, absl::StrCat("push-pull of step ", p->step));
  if (p->received != chunks) {
    return absl::DataLossError(absl::StrCat(name_, ": push-pull of step ", p->step, " returned ",
                                            p->received, " of ", chunks, " chunks"));
  }
  return absl::OkStatus();
}

// One protocol exchange (about 70 lines), as ShardClient::PushPull: the sender loop
// here and the reader task share the call's state.
absl::Status TcpShardChannel::PushPull(int64_t step, const float* grads, float* params,
                                       const std::function<bool(int64_t)>& wait_ready,
                                       const std::function<bool(int64_t)>& wait_writable,
                                       const std::function<void(int64_t)>& arrived,
                                       PushPullTiming* timing) {
  RINGSIDE_RETURN_IF_ERROR(FinishPending());
  const int64_t size = layout_->size(), cf = layout_->chunk_floats();
  const int64_t chunks = NumChunks(size, cf);
  pending_ = std::make_unique<Pending>();
  Pending* p = pending_.get();
  p->step = step;
  // The reader runs beside the sender: the shard answers chunks while this worker is
  // still pushing (and would stall if nobody read them).
  reader_.Run([this, p, step, params, wait_writable, arrived, timing] {
    absl::Status s = ReadServed(step + 1, ps::PARAMS, wire_, params,
                                [p] { return p->pushed_us.load(); }, wait_writable, arrived,
                                [p, timing](int64_t bytes) {
                                  absl::MutexLock l(&p->mu);
                                  const int64_t now = NowUs();
                                  if (p->received++ == 0) timing->first_chunk_us = now;
                                  timing->last_chunk_us = now;
                                  timing->bytes_received += bytes;
                                });
    absl::MutexLock l(&p->mu);
    p->status = s;
    p->done = true;
  });
  absl::Status sent;
  bool cancelled = false;
  for (int64_t k = chunks - 1; k >= 0 && sent.ok(); --k) {
    if (!wait_ready(k)) {
      cancelled = true;
      break;
    }
    const Slice chunk = ChunkOf(size, cf, k);
    // `grads` stays unchanged until every chunk's reply is back (the shard answers a
    // chunk only after reading it).
    sent = SendChunkFrame(fd_.get(), kPsPushPull, {step, static_cast<int32_t>(k), ps::GRADIENTS},
                          grads + chunk.offset, chunk.size, wire_, &send_scratch_, Deadline());
    timing->bytes_sent += FrameBytes(chunk.size, wire_);
  }
  if (sent.ok() && !cancelled) {
    sent = SendChunkFrame(fd_.get(), kPsEndPush,
                          {step, static_cast<int32_t>(chunks), ps::GRADIENTS}, nullptr, 0,
                          Deadline());
  }
  timing->push_done_us = NowUs();
  p->pushed_us.store(timing->push_done_us);  // From now on the shard owes the answers.
  if (cancelled || !sent.ok()) {
    // The connection is out of step now: nothing more can go over it.
    shutdown(fd_.get(), SHUT_RDWR);
    absl::Status pending = FinishPending();
    if (cancelled) {
      return absl::CancelledError(absl::StrCat(name_, ": push-pull of step ", step, " cancelled"));
    }
    // The shard's own error (a kPsError frame the reader got) says more than the write's.
    return !pending.ok() && !absl::IsUnavailable(pending) ? pending
                                                          : Error(sent, absl::StrCat("push-pull of step ", step));
  }
  bool all_back;
  {
    absl::MutexLock l(&p->mu);
    auto settled = [p, chunks]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu) {
      return p->received == chunks || p->done;
    };
    p->mu.Await(absl::Condition(&settled));
    all_back = p->received == chunks && p->status.ok();
  }
  // Every updated chunk is here: the step goes on; kPsDone is collected by the next
  // call (FinishPending).
  if (all_back) return absl::OkStatus();
  return FinishPending();
}

absl::Status TcpShardChannel::Push(int64_t step, ps::TensorKind kind, const float* data,
                                   int64_t* bytes_sent) {
  RINGSIDE_RETURN_IF_ERROR(FinishPending());
  const int64_t size = layout_->size(), cf = layout_->chunk_floats();
  const int64_t chunks = NumChunks(size, cf);
  absl::Status s;
  for (int64_t k = 0; k < chunks && s.ok(); ++k) {
    const Slice chunk = ChunkOf(size, cf, k);
    s = SendChunkFrame(fd_.get(), kPsPush, {step, static_cast<int32_t>(k), kind},
                       data + chunk.offset, chunk.size, Deadline());
    if (bytes_sent != nullptr) *bytes_sent += FrameBytes(chunk.size);
  }
  if (s.ok()) {
    s = SendChunkFrame(fd_.get(), kPsEndPush, {step, static_cast<int32_t>(chunks), kind}, nullptr,
                       0, Deadline());
  }
  // The answer: kPsDone, or the shard's error (which may have cut the pushes short).
  const int64_t pushed_us = NowUs();
  absl::StatusOr<FrameHeader> reply = NextFrame([pushed_us] { return pushed_us; });
  if (!reply.ok()) return Error(reply.status(), absl::StrCat("push of step ", step));
  if (!s.ok()) return Error(s, absl::StrCat("push of step ", step));
  if (reply->tag != kPsDone || reply->bytes != 0) {
    return Error(absl::DataLossError(absl::StrCat("answered with frame ", reply->tag)),
                 absl::StrCat("push of step ", step));
  }
  return absl::OkStatus();
}

absl::Status TcpShardChannel::Pull(int64_t step, ps::TensorKind kind, float* out,
                                   int64_t* bytes_received) {
  RINGSIDE_RETURN_IF_ERROR(FinishPending());
  const int64_t chunks = NumChunks(layout_->size(), layout_->chunk_floats());
  RINGSIDE_RETURN_IF_ERROR(SendChunkFrame(fd_.get(), kPsPull, {step, -1, kind}, nullptr, 0, Deadline()));
  int64_t received = 0;
  const int64_t asked_us = NowUs();
  absl::Status s = ReadServed(step, kind, WireFormat::kFp32, out, [asked_us] { return asked_us; }, nullptr, nullptr,
                              [&](int64_t bytes) {
    ++received;
    if (bytes_received != nullptr) *bytes_received += bytes;
  });
  if (!s.ok()) return Error(s, absl::StrCat("pull of step ", step));
  if (received != chunks) {
    return absl::DataLossError(absl::StrCat(name_, ": pull of step ", step, " returned ", received,
                                            " of ", chunks, " chunks"));
  }
  return absl::OkStatus();
}

}  // namespace ringside
