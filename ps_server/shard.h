// One parameter-server shard without the RPC layer: the coordinator of its parts, as
// LevelDB's DBImpl coordinates its MemTable, VersionSet and SnapshotList. It owns its
// slice of the parameters and the parts, holds the locks, and decides the order of
// things; each part has a contract of its own:
//   ShardChunk (shard_chunk.h)    one chunk: its SGD state, its ChunkClock and the
//                                 ordered sum of a step's pushes (ordered_sum.h)
//   Membership (membership.h)     registrations, sessions, clocks, goodbyes; lost and
//                                 rejoining workers (elastic PS)
//   BarrierTable (barrier_table.h)  the barriers and their sums
//   StepRecords (step_records.h)  per-step records, totals and trace spans
// What a push does and when a pull is served under BSP / SSP / ASP is the
// ConsistencyPolicy's answer (consistency_policy.h). The gRPC service (ps_service.h)
// is a thin translation of streams onto these calls, so the consistency logic is
// tested here without sockets.
//
// Thread-safety: every method may be called from any number of RPC threads at once.
// The Shard's mu_ guards the Membership, the BarrierTable, the StepRecords and the
// initialisation state; each chunk has its own lock. Gradient arithmetic holds only
// the lock of the chunk it touches, so workers pushing different chunks aggregate in
// parallel. Each chunk has its own Ops and Sgd (over the chunk's floats), used only
// under that chunk's lock: ops.h and sgd.h promise no thread safety, so no two
// threads ever share one.
#ifndef RINGSIDE_PS_SERVER_SHARD_H_
#define RINGSIDE_PS_SERVER_SHARD_H_

#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/ops.h"
#include "common/trace.h"
#include "common/run_config.h"
#include "ps_server/barrier_table.h"
#include "ps_server/consistency_policy.h"
#include "ps_server/membership.h"
#include "ps_server/ps.pb.h"
#include "ps_server/shard_chunk.h"
#include "ps_server/sharding.h"
#include "ps_server/step_records.h"
#include "ps_server/wire_chunk.h"

namespace ringside {

// The header fields of a Chunk (ps.proto).
struct ChunkHeader {
  int worker_id = 0;
  int64_t step = 0;
  ps::TensorKind kind = ps::GRADIENTS;
  int64_t offset = 0;
};

// Bytes of one chunk of a tensor stream (ps.proto), unless configured.
inline constexpr int64_t kDefaultPsChunkBytes = int64_t{1} << 20;

struct PsShardOptions {
  int shard = 0;
  int num_shards = 1;
  int num_workers = 1;
  SyncPolicy sync;  // Becomes the shard's ConsistencyPolicy.
  int64_t chunk_bytes = kDefaultPsChunkBytes;
  SgdHyper hyper;
  // Summation server (RunConfig.ps_mode "summation"; BSP only): a complete step's
  // chunk holds the mean gradient instead of stepping SGD with it, and pulls serve that
  // mean (the parameters only until the first step completes: worker 0's at Start).
  bool summation = false;
  RunConfig config;          // Workers must register with an equal configuration...
  std::string model;         // ...and model spec.
  // How long a worker may keep the others waiting (BSP push, SSP bound, barrier)
  // before the shard declares it lost and aborts the job.
  absl::Duration timeout = kDefaultPeerTimeout;
  MetricsWriter* metrics = nullptr;  // Per-step shard records; borrowed, may be null.
  // Spans (borrowed, may be null): per worker, each pushed chunk's "aggregate" and
  // "update" (on the thread that received it); per step, "step" (first gradient in
  // until the last reply out) and "wait for workers" (first to last complete push; arg
  // late_worker, the last one, as in the step record).
  TraceWriter* trace = nullptr;
};

// The trace process id of shard `shard` (ranks and workers use their rank).
inline constexpr int kShardTracePidBase = 1000;

class Shard {
 public:
  // InvalidArgument for bad options. The slice is sized by the first registration.
  static absl::StatusOr<std::unique_ptr<Shard>> Create(const PsShardOptions& options);
  ~Shard();

  const PsShardOptions& options() const { return options_; }

  // Protocol step 0. The reply to a refused registration reveals nothing of the
  // shard's configuration: InvalidArgument "unknown worker id" for an id outside
  // [0, num_workers); FailedPrecondition "configuration mismatch" for a different
  // worker count, model, size or configuration (the shard writes the differing fields,
  // see CheckSameConfig, to its own stderr, for its operator); AlreadyExists for an id
  // that is registered already (the first holder keeps it, unaffected). A success
  // draws the worker's session (response->session()), which its later calls carry.
  absl::Status Register(const ps::RegisterRequest& request, ps::RegisterResponse* response);

  // InvalidArgument for an id outside [0, num_workers); FailedPrecondition if that
  // worker has not registered.
  absl::Status CheckWorker(int worker) const;
  // CheckWorker, then PermissionDenied unless `session` is the one the worker's
  // registration drew (the caller is not the registered worker), and FailedPrecondition
  // once the worker said goodbye. The RPC layer calls it on every call of a worker.
  absl::Status CheckSession(int worker, uint64_t session) const;

  // Checks a received chunk against the registration, the chunk grid and the slice
  // without side effects: InvalidArgument for an unknown worker, a payload that is not
  // the chunk's exact length or an offset off the grid; FailedPrecondition for an
  // unregistered worker; OutOfRange for an offset outside the slice. `expected_worker` >= 0 also requires that id. Returns the chunk index.
  absl::StatusOr<int64_t> CheckChunk(const ps::Chunk& chunk, int expected_worker) const;
  absl::StatusOr<int64_t> CheckChunk(const ChunkHeader& header, size_t payload_bytes,
                                     int expected_worker) const;

  // Takes a checked chunk. GRADIENTS are aggregated and applied as the consistency
  // policy says (FailedPrecondition for a step that is not the worker's current one, a
  // chunk pushed twice, or one the policy refuses; InvalidArgument for a payload with a
  // NaN or an infinity, naming the worker, the step and the chunk's element range of
  // the flat parameters: every refused chunk changes nothing). PARAMS / OPTIMIZER_STATE initialise
  // the shard (worker 0, before any gradient). `wire_bytes` is the serialised size, for the statistics. The payload
  // is only read.
  absl::Status Accept(ps::Chunk* chunk, int64_t wire_bytes);
  // Same for a checked header and its payload (the chunk's exact length, contiguous).
  absl::Status Accept(const ChunkHeader& header, float* payload, int64_t wire_bytes);
  // Same for a received WireChunk (PushPull's hot path): gradients are read from the
  // received slices block by block, through a cache-sized buffer, with no copy of the
  // whole payload. The caller checked the payload's length (CheckChunk).
  absl::Status Accept(const ChunkHeader& header, const WireChunk& chunk);

  // Fills `out` with chunk k of `kind` for `worker`, who is about to run `step`, once
  // the consistency policy releases it (PARAMS; OPTIMIZER_STATE at once): BSP waits
  // for the step's update of the chunk, SSP for the slowest worker to be within the
  // bound. FailedPrecondition at once (nothing waits, nobody is blamed) for PARAMS of a
  // step the worker cannot be about to run: past the start step while the worker has
  // not pushed chunk k of step - 1. Blocks; after waiting options().timeout it aborts the job (naming the late
  // workers, ConsistencyPolicy::LateReason) and returns Aborted. Also Aborted once the
  // job was aborted by anyone.
  absl::Status Serve(int worker, int64_t step, ps::TensorKind kind, int64_t k, ps::Chunk* out);
  // Same, but returns false at once instead of waiting.
  absl::StatusOr<bool> ServeIfReady(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                                    ps::Chunk* out);
  // The zero-copy forms: when the policy says replies_borrow() (BSP), `out` borrows the
  // shard's parameter memory, which stays unchanged until every worker has received
  // it. Otherwise (SSP / ASP) the payload is copied, since other workers' pushes may
  // update the chunk meanwhile.
  // `cancelled` (optional, polled while waiting): returns Cancelled soon after it
  // returns true.
  absl::Status Serve(int worker, int64_t step, ps::TensorKind kind, int64_t k, WireChunk* out,
                     const std::function<bool()>& cancelled = nullptr);
  absl::StatusOr<bool> ServeIfReady(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                                    WireChunk* out);
  // The raw form, for the TCP data plane (tcp_data_server.h): `out->data` points at the
  // chunk's floats: borrowed from the shard's parameter memory when the policy says
  // replies_borrow() (unchanged until every worker has received it), else at
  // `out->copy`.
  struct RawChunk {
    Slice chunk;
    const float* data = nullptr;
    std::vector<float> copy;
  };
  absl::Status Serve(int worker, int64_t step, ps::TensorKind kind, int64_t k, RawChunk* out,
                     const std::function<bool()>& cancelled = nullptr);
  absl::StatusOr<bool> ServeIfReady(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                                    RawChunk* out);
  // Accounts a served chunk of `wire_bytes` to its step's statistics.
  void CountServed(int worker, int64_t step, ps::TensorKind kind, int64_t wire_bytes);

  // Blocks until all workers called it with `name`; returns element-wise sums, added in
  // worker-id order. `name` must be the worker's next barrier (ps.proto's
  // BarrierRequest): InvalidArgument for another name, FailedPrecondition for a number
  // that is not the worker's next; neither changes anything.
  absl::StatusOr<std::vector<double>> Barrier(int worker, const std::string& name,
                                              const std::vector<double>& values);

  ps::ShardStats Stats();

  // An RPC stream began / ended (queue depth).
  void StreamStarted();
  void StreamEnded();

  // Any RPC began / ended (the shard's idea of whether workers are still around).
  void CallStarted();
  void CallEnded();

  // A worker vanished (its stream broke mid-step): aborts the job naming it; or, on an
  // elastic shard (config.ps_min_workers() = M > 0, BSP), drops it while at least M
  // workers stay live (see "Elastic PS" below). `session` (0: any) is the session of
  // the stream that broke: a stream of an earlier registration of the worker does not
  // drop the worker that registered again.
  void WorkerLost(int worker, const std::string& why, uint64_t session = 0);
  // Elastic PS: a rejoining worker (RegisterResponse.rejoin) pulls the PARAMS of
  // `step` to rejoin at it: from step `step` on its pushes count (in every chunk).
  // OutOfRange, changing nothing, when a chunk is past `step` already (pull again with
  // a later step). Called before every PARAMS pull; OK and nothing done for a worker
  // that is not rejoining (or has pushed since it rejoined).
  absl::Status Rejoin(int worker, int64_t step);
  // Workers not lost (elastic shards; num_workers otherwise).
  int live_workers() const;
  // Liveness: a registered worker's run failed (ps.proto's AbortRequest) and it says
  // why: aborts the job with "worker W reports: <reason>" (cut to
  // kMaxAbortReasonBytes); an elastic shard drops the worker instead (Lose).
  // InvalidArgument for a worker id out of range.
  absl::Status WorkerReported(int worker, const std::string& reason);
  static constexpr size_t kMaxAbortReasonBytes = 1024;
  // Liveness: the address a registered worker called from (grpc::ServerContext::peer(),
  // e.g. "ipv4:10.0.0.2:51234"), named when the shard blames it.
  void NotePeer(int worker, const std::string& address);
  // Worker says goodbye after its last step: FailedPrecondition (changing nothing) for
  // a worker that said it already or is in the middle of pushing a step.
  absl::Status Goodbye(int worker);
  // Blocks until every worker said goodbye (OK) or the job was aborted (Aborted).
  // With no call in flight and none for options().timeout (workers that died between
  // calls, or never came), aborts the job and returns Aborted.
  absl::Status WaitUntilDone();
  // OK or the abort status.
  absl::Status health();

  int64_t chunk_floats() const { return chunk_floats_; }
  // Valid after the first registration.
  int64_t num_chunks() const;
  Slice slice() const;

 private:
  explicit Shard(const PsShardOptions& options, int64_t chunk_floats);

  absl::Status Abort(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status AbortLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AbortedStatus() ABSL_LOCKS_EXCLUDED(mu_);
  // How long WaitUntilDone lets the shard go without a call: 1.5 x the timeout.
  absl::Duration IdleLimit() const { return options_.timeout * 3 / 2; }
  // Elastic PS. Whether this shard goes on without lost workers.
  bool elastic() const { return options_.config.ps_min_workers() > 0; }
  // The first registration: sizes the slice (by the job's placement of the model's
  // tensors, common/ps_placement.h) and makes its chunks.
  absl::Status Layout(const ps::RegisterRequest& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CheckChunk with mu_ held.
  absl::StatusOr<int64_t> CheckChunkLocked(const ChunkHeader& header, size_t payload_bytes,
                                           int expected_worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops `workers` (not lost yet, `session` matching when not 0): aborts (and returns
  // Aborted) when that leaves fewer than ps_min_workers live, or drops worker 0, or the
  // shard is not elastic; else completes the chunk steps that waited only for them.
  absl::Status Lose(const std::vector<int>& workers, const std::string& why, uint64_t session)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status LoseLocked(const std::vector<int>& workers, const std::string& why,
                          uint64_t session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fillers of a ps::Chunk (copied payload) and a WireChunk (borrowed under BSP).
  using FillFn = ShardChunk::FillFn;
  static FillFn ChunkFiller(int worker, int64_t step, ps::TensorKind kind, ps::Chunk* out);
  FillFn WireFiller(int worker, int64_t step, ps::TensorKind kind, WireChunk* out) const;
  FillFn RawFiller(ps::TensorKind kind, RawChunk* out) const;
  absl::StatusOr<bool> ServeIfReadyWith(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                                        const FillFn& fill) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ServeWith(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                         const FillFn& fill, const std::function<bool()>& cancelled = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Copies the next at most `max_floats` floats of a gradient payload to `dst`;
  // returns how many. `rewind` starts the payload over (it is read twice: checked for
  // non-finite values, then applied).
  using BlockSource = absl::FunctionRef<size_t(float* dst, size_t max_floats)>;
  absl::Status AcceptGradient(const ChunkHeader& h, const std::function<void()>& rewind,
                              BlockSource next, int64_t k, int64_t wire_bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status AcceptInit(const ChunkHeader& h, const float* data, int64_t k, int64_t wire_bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Accept's checks: the shard is healthy and has a layout, and the header (with
  // `payload_bytes`, or without it the length of the chunk it names) is valid. Returns
  // the chunk's index.
  absl::StatusOr<int64_t> CheckAccept(const ChunkHeader& header,
                                      std::optional<size_t> payload_bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Closes step `step`'s record once the workers it waits for are done with it.
  void MaybeFinishRecord(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sleeps until the pull of `step`'s chunk k may have been released (or the shard
  // initialised, or aborted), at most kPoll. Returns whether the shard is initialised.
  bool AwaitRelease(int64_t step, int64_t k) ABSL_LOCKS_EXCLUDED(mu_);
  // " (worker 1 at ipv4:..., ...)" for the workers of `workers` with a known address;
  // "" for none.
  std::string WhereAre(const std::vector<int>& workers) ABSL_LOCKS_EXCLUDED(mu_);
  // The policy's late workers for a pull of `step`'s chunk k (initialised shard).
  std::vector<int> LateWorkers(int64_t step, int64_t k) ABSL_LOCKS_EXCLUDED(mu_);
  // Barrier: waits (mu_ held, released while waiting) until every worker that takes
  // part arrived at `key` (OK) or the job was aborted; a missing worker is dropped
  // (elastic) or the job aborted after the timeout.
  absl::Status AwaitBarrier(const std::string& key, const std::string& name,
                            absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PsShardOptions options_;
  const int64_t chunk_floats_;
  const std::unique_ptr<const ConsistencyPolicy> policy_;
  std::atomic<bool> aborted_{false};
  std::atomic<int> active_streams_{0};
  std::atomic<int> calls_in_flight_{0};
  std::atomic<int64_t> last_activity_us_{0};

  // Lock order: mu_, then (at most) one chunk's lock, or every chunk's through
  // ChunkSetLock. The hot path (a pushed chunk) holds mu_ and its chunk's lock one
  // after the other, never together.
  mutable absl::Mutex mu_;
  // Layout, fixed by the first registration.
  int64_t num_params_ ABSL_GUARDED_BY(mu_) = -1;
  std::vector<int64_t> tensor_sizes_ ABSL_GUARDED_BY(mu_);  // As the first worker sent them.
  Slice slice_ ABSL_GUARDED_BY(mu_);
  Membership members_ ABSL_GUARDED_BY(mu_);
  BarrierTable barriers_ ABSL_GUARDED_BY(mu_);
  StepRecords records_ ABSL_GUARDED_BY(mu_);
  // Initialisation by worker 0.
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  bool gradients_seen_ ABSL_GUARDED_BY(mu_) = false;
  int64_t start_step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t init_chunks_ ABSL_GUARDED_BY(mu_) = 0;  // Distinct PARAMS chunks received.
  std::vector<bool> init_received_ ABSL_GUARDED_BY(mu_);
  int64_t init_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);

  // The slice's parameters and its chunks, made by the first registration and fixed
  // after it (read without mu_ once a worker is registered). Chunk k's range of
  // params_ is guarded by chunks_[k]'s lock.
  std::vector<float> params_;
  std::vector<std::unique_ptr<ShardChunk>> chunks_;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_SHARD_H_
