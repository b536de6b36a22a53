// A worker's connection to one parameter-server shard: every RPC of ps.proto with a
// deadline, tensors streamed in chunks straight from / into the caller's buffers; or,
// with the TCP data plane connected, the tensors over tcp_shard_channel.h and the rest
// over gRPC.
#ifndef RINGSIDE_PS_WORKER_SHARD_CLIENT_H_
#define RINGSIDE_PS_WORKER_SHARD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc_security.h"
#include "common/task_thread.h"
#include "common/wire_format.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/rpc_method.h"
#include "ps_server/ps.grpc.pb.h"
#include "ps_server/sharding.h"
#include "ps_worker/tcp_shard_channel.h"

namespace ringside {

// Timestamps (Unix microseconds) and bytes of one push-pull call.
struct PushPullTiming {
  int64_t push_done_us = 0;   // WritesDone returned: every gradient chunk is out.
  int64_t first_chunk_us = 0; // First updated chunk arrived.
  int64_t last_chunk_us = 0;  // Last updated chunk arrived.
  int64_t bytes_sent = 0;     // Serialised Chunk bytes.
  int64_t bytes_received = 0;
};

// Thread-compatible: PushPull, FinishPending and Shutdown must not overlap (one
// sender per shard); Push, Pull, Barrier and Stats may run beside them.
class ShardClient {
 public:
  // `channel` reaches the shard; `name` ("shard 1 at host:port") prefixes errors;
  // `timeout` is how long the server may keep a call waiting on other workers, and
  // each call's deadline is that plus a transfer allowance.
  ShardClient(std::shared_ptr<grpc::Channel> channel, std::string name, int worker_id,
              absl::Duration timeout);
  ~ShardClient();  // Cancels a push-pull call still pending.

  // Protocol step 0; waits up to the timeout for the server to come up. Fills the
  // slice and chunk grid used by the other calls.
  absl::StatusOr<ps::RegisterResponse> Register(const ps::RegisterRequest& request);
  const ps::RegisterResponse& layout() const { return layout_; }
  // The data plane on TCP: after a Register whose layout() has a data_port, connects
  // to it on `host` (the shard's) with the job's `token` (empty: none); from then on
  // PushPull, Push and Pull travel there (tcp_shard_channel.h), the other calls stay
  // on gRPC. Errors as TcpShardChannel::Connect's.
  absl::Status ConnectDataPlane(const std::string& host, const std::string& token,
                                WireFormat wire = WireFormat::kFp32);
  bool data_plane_tcp() const { return tcp_ != nullptr; }
  int64_t num_chunks() const;

  // Combined push-pull of one step. Sends the chunks of `grads` (this shard's slice,
  // layout().size floats) in descending chunk order, calling wait_ready(k) before chunk
  // k (it blocks until the chunk's gradients are final; false cancels the call with
  // Cancelled), and writes each updated chunk into `params` (the slice) as it arrives,
  // once wait_writable(k) returned true (it blocks while something still reads the
  // chunk's old parameters; false cancels the call), then calls arrived(k) (may be
  // empty; on the reader thread, before PushPull can return; it must not call back into
  // this client). Blocks until all chunks came back; the
  // call's final status is then collected by the next call (or FinishPending), so the
  // step need not wait for the stream to close. Also reports the previous call's
  // failure, if it had one.
  absl::Status PushPull(int64_t step, const float* grads, float* params,
                        const std::function<bool(int64_t)>& wait_ready,
                        const std::function<bool(int64_t)>& wait_writable,
                        const std::function<void(int64_t)>& arrived, PushPullTiming* timing);
  // Push-only (gradients of `step`, or worker 0's PARAMS / OPTIMIZER_STATE) and
  // pull-only (PARAMS for `step`, or OPTIMIZER_STATE) of the whole slice.
  absl::Status Push(int64_t step, ps::TensorKind kind, const float* data,
                    int64_t* bytes_sent = nullptr);
  absl::Status Pull(int64_t step, ps::TensorKind kind, float* out, int64_t* bytes_received = nullptr);

  // Waits for the end of the last push-pull call, if still open; its status.
  absl::Status FinishPending();

  absl::StatusOr<std::vector<double>> Barrier(const std::string& name,
                                              const std::vector<double>& values);
  absl::StatusOr<ps::ShardStats> Stats();
  absl::Status Shutdown();
  // Liveness: tells the shard that this worker's run failed and why (ps.proto's
  // AbortRequest), so that it ends the job naming the cause. Best effort: bounded by
  // min(timeout / 4, 1 s) (a hung shard cannot answer); the call's own error.
  absl::Status Abort(const std::string& reason);

 private:
  absl::Status Error(const grpc::Status& s, const std::string& what) const;
  void SetDeadline(grpc::ClientContext* context, absl::Duration extra) const;

  struct Call;  // One push-pull call on gRPC (shard_client.cc).

  // PushPull's two sides on gRPC, each on one thread, sharing the open call `c`
  // (owned by PushPull, then pending_; it outlives both). Each takes c->mu itself
  // and must be called without it.
  //
  // Reader side, on reader_'s thread: reads the updated chunks of step c->step + 1
  // into `params` (blocking in wait_writable(k) for each before writing it, then
  // telling arrived(k) with c->mu held), counting them and the timing's chunk times
  // and bytes received; on a malformed or extra chunk, or wait_writable false, sets
  // c->read_status and cancels the call. Returns at the stream's end or after such a
  // cancel, having set c->reader_done.
  void ReadPushPullReplies(Call* c, float* params,
                           const std::function<bool(int64_t)>& wait_writable,
                           const std::function<void(int64_t)>& arrived,
                           PushPullTiming* timing) const;
  // Sender side, on the caller's thread: writes the gradient chunks of `grads` in
  // descending chunk order, blocking in wait_ready(k) before chunk k, then closes the
  // writes if every write went out and sets timing->push_done_us. Returns true iff
  // wait_ready refused a chunk: the call is then cancelled and its writes left open.
  bool PushGradientChunks(Call* c, const float* grads,
                          const std::function<bool(int64_t)>& wait_ready,
                          PushPullTiming* timing) const;

  std::shared_ptr<grpc::Channel> channel_;
  const grpc::internal::RpcMethod push_pull_method_;
  std::unique_ptr<ps::ParameterServer::Stub> stub_;
  const std::string name_;
  const int worker_id_;
  const absl::Duration timeout_;
  ps::RegisterResponse layout_;
  std::unique_ptr<Call> pending_;  // Last push-pull call, until its end is collected.
  std::unique_ptr<TcpShardChannel> tcp_;  // The TCP data plane, once connected.
  TaskThread reader_;              // Reads each push-pull call's replies.
};

// Channel to "host:port" that accepts the largest chunks. `security` is the security
// this client connects with (common/rpc_security.h): its token on every call (empty
// token: unauthenticated), TLS if set. Keepalive pings (common/rpc_keepalive.h) find a
// hung shard within 3/4 x `peer_timeout` while a call is in flight, however long the
// call's own deadline.
std::shared_ptr<grpc::Channel> NewPsChannel(const std::string& address,
                                            const RpcSecurity& security,
                                            absl::Duration peer_timeout);

}  // namespace ringside

#endif  // RINGSIDE_PS_WORKER_SHARD_CLIENT_H_
