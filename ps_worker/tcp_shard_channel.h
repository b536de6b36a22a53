// A worker's end of the parameter server's data plane on TCP (`--ps_transport=tcp`;
// ps_server/tcp_wire.h's protocol): one persistent connection to one shard that carries
// the push-pulls, pushes and pulls ShardClient would otherwise make over gRPC. The
// TCP twin of ShardClient's data calls, with the same contracts (shard_client.h).
#ifndef RINGSIDE_PS_WORKER_TCP_SHARD_CHANNEL_H_
#define RINGSIDE_PS_WORKER_TCP_SHARD_CHANNEL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/frame_io.h"
#include "common/socket_io.h"
#include "common/task_thread.h"
#include "common/wire_format.h"
#include "ps_server/ps.pb.h"

namespace ringside {

struct PushPullTiming;  // shard_client.h

// Thread-compatible: one call at a time (ShardClient serialises them).
class TcpShardChannel {
 public:
  // Protocol step 1: connects to `host`:`port` (RegisterResponse.data_port) and says
  // hello with the worker's id, its session and the job's `token` (empty: none).
  // `layout` is the registration's (slice, chunk grid; borrowed, must outlive this).
  // `name` ("shard 1 at host:port") prefixes errors; `timeout` as ShardClient's.
  // Errors: the connection's, or the shard's refusal (Unauthenticated for a wrong
  // token, PermissionDenied for a session that is not the worker's). `wire`: the
  // format of push-pulls' gradients and replies (the job's --compress, which the shard
  // checked at registration); pushes and pulls stay float32.
  static absl::StatusOr<std::unique_ptr<TcpShardChannel>> Connect(
      const std::string& host, int port, int worker_id, const std::string& token,
      const ps::RegisterResponse* layout, std::string name, absl::Duration timeout,
      WireFormat wire = WireFormat::kFp32);
  ~TcpShardChannel();  // Shuts the connection down; waits for the reader.

  // ShardClient::PushPull's contract, over the connection.
  absl::Status PushPull(int64_t step, const float* grads, float* params,
                        const std::function<bool(int64_t)>& wait_ready,
                        const std::function<bool(int64_t)>& wait_writable,
                        const std::function<void(int64_t)>& arrived, PushPullTiming* timing);
  // ShardClient::Push's and Pull's (bytes: frame bytes, headers included).
  absl::Status Push(int64_t step, ps::TensorKind kind, const float* data, int64_t* bytes_sent);
  absl::Status Pull(int64_t step, ps::TensorKind kind, float* out, int64_t* bytes_received);
  // Waits for the shard's kPsDone of the last push-pull; its status.
  absl::Status FinishPending();

 private:
  TcpShardChannel(ScopedFd fd, const ps::RegisterResponse* layout, std::string name,
                  absl::Duration timeout, WireFormat wire);
  // Each frame read or written must move within this: a keepalive interval plus its
  // answer time (rpc_keepalive.h), the silence after which the shard is taken for
  // stopped, hung or gone (the shard sends heartbeats while it waits).
  absl::Duration Silence() const;
  absl::Time Deadline() const { return absl::Now() + Silence(); }
  // The next frame's header, heartbeats skipped. While `waiting_since()` is set (the
  // worker has sent what the shard must answer: a Unix time in microseconds, else 0),
  // a silence of Silence() since then or since the last frame is DeadlineExceeded;
  // before that the shard may be waiting on this worker, and only the calls' long
  // deadline (timeout + transfer allowance) applies. kPsError's status as the error.
  absl::StatusOr<FrameHeader> NextFrame(const std::function<int64_t()>& waiting_since);
  // "<name>: <what>: <status message>", the status's code.
  absl::Status Error(const absl::Status& s, const std::string& what) const;
  // Reads kPsParams frames of `kind` for `step`, values in `format`, into `out` (each
  // chunk after wait_writable(k), then arrived(k)) until kPsDone or `chunks` more than
  // expected. Only the reader task decodes (its scratch, read_scratch_).
  absl::Status ReadServed(int64_t step, ps::TensorKind kind, WireFormat format, float* out,
                          const std::function<int64_t()>& waiting_since,
                          const std::function<bool(int64_t)>& wait_writable,
                          const std::function<void(int64_t)>& arrived,
                          const std::function<void(int64_t bytes)>& received);

  ScopedFd fd_;
  const ps::RegisterResponse* const layout_;
  const std::string name_;
  const absl::Duration timeout_;
  const WireFormat wire_;
  std::vector<uint16_t> send_scratch_;  // The sender's encoded chunk (push-pulls).
  std::vector<uint16_t> read_scratch_;  // The reader's received chunk before decoding.
  // The last push-pull: its reader's progress, until FinishPending collects it.
  struct Pending {
    int64_t step = 0;
    std::atomic<int64_t> pushed_us{0};  // When every push went out (NextFrame's wait).
    absl::Mutex mu;
    int64_t received ABSL_GUARDED_BY(mu) = 0;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  std::unique_ptr<Pending> pending_;
  TaskThread reader_;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_WORKER_TCP_SHARD_CHANNEL_H_
