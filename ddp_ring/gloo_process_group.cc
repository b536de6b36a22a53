// The Gloo backend of ProcessGroup: CPU collectives over Gloo's TCP transport. This
// file is the group itself: it queues the collectives, runs them on one worker thread,
// turns failures into the group's errors and shuts down. The rest is apart:
//   gloo_rendezvous.h        how the ranks connect (join, full mesh, direct pairs)
//   collective_algorithms.h  the algorithms, one per file, over transfer.h
//   gloo_transfer.h          their transfer on Gloo's unbound buffers and the pairs
//   gloo_peer_naming.h       the lost rank's name after a failure (liveness.h)
//   gloo_errors.h            Gloo's exceptions as Statuses; the SIGPIPE guard
//
// Serving: one worker thread per group runs the queued collectives in FIFO order
// (Gloo's collectives block), each bounded by the timeout. Every rank issues the same
// collectives in the same order, so the n-th collective carries tag n on all ranks.
//
// Algorithms: the all-reduces (ring, halving-doubling, recursive doubling), broadcast,
// reduce, all-gather, reduce-scatter, scatter, gather and all-to-all are ringside's
// own (collective_algorithms.h), so that every payload byte is counted where it is
// handed to the transport or taken from it (Work::bytes, total_bytes). Only the
// barrier is Gloo's; it moves no payload. Message headers are not counted.
//
// Failure model: any error (the algorithms' Statuses, Gloo's exceptions) becomes a
// Status (DeadlineExceeded for timeouts, Unavailable for a peer that went away,
// Internal for broken invariants) naming the rank, the collective and its sequence
// number, and the lost peer where it can be told (GlooPeerNaming). The first failure
// breaks the group: its connections are closed (so peers fail fast instead of waiting
// out their timeouts, and no late message can land in a buffer its owner got back),
// and every later collective fails at once with that first error.
#include "ddp_ring/gloo_process_group.h"

#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/trace.h"
#include "ddp_ring/collective_algorithms.h"
#include "ddp_ring/gloo_errors.h"
#include "ddp_ring/gloo_peer_naming.h"
#include "ddp_ring/gloo_rendezvous.h"
#include "ddp_ring/gloo_transfer.h"

namespace ringside {
namespace {

// The longest a healthy group's destructor waits for its peers (shutdown step 2).
constexpr absl::Duration kShutdownLinger = absl::Seconds(10);

// The handle the worker completes. Thread-safe.
class GlooWork : public Work {
 public:
  absl::Status Wait() override {
    absl::MutexLock lock(&mu_, absl::Condition(&done_));
    return status_;
  }

  bool IsCompleted() override {
    absl::MutexLock lock(&mu_);
    return done_;
  }

  // Called once, by the worker (or at issue time for trivial operations).
  void Complete(absl::Status status, CollectiveBytes bytes = {}) {
    const int64_t now = NowMicros();
    absl::MutexLock lock(&mu_);
    status_ = std::move(status);
    bytes_ = bytes;
    if (start_us_ == 0) start_us_ = now;
    end_us_ = now;
    done_ = true;
  }
  // Called by the worker as it starts executing the operation.
  void MarkStarted() {
    const int64_t now = NowMicros();
    absl::MutexLock lock(&mu_);
    start_us_ = now;
  }
  int64_t start_us() const override {
    absl::MutexLock lock(&mu_);
    return start_us_;
  }
  int64_t end_us() const override {
    absl::MutexLock lock(&mu_);
    return end_us_;
  }
  CollectiveBytes bytes() const override {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  mutable absl::Mutex mu_;
  CollectiveBytes bytes_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int64_t start_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t end_us_ ABSL_GUARDED_BY(mu_) = 0;
};

std::shared_ptr<Work> CompletedWork(absl::Status status) {
  auto work = std::make_shared<GlooWork>();
  work->Complete(std::move(status));
  return work;
}

void Scale(float* data, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) data[i] *= factor;
}

class GlooProcessGroup : public ProcessGroup {
 public:
  // Takes the connection (empty for world size 1, where every collective is local) and
  // the store (borrowed: it outlives the group; null for world size 1).
  GlooProcessGroup(const ProcessGroupOptions& options, GlooConnection connection, Store* store)
      : rank_(options.rank),
        world_size_(options.world_size),
        timeout_(options.timeout),
        timeout_ms_(absl::ToInt64Milliseconds(options.timeout)),
        peer_naming_(store, options.rank, options.world_size, options.timeout,
                     std::move(connection.peer_addresses)),
        algorithm_(options.algorithm),
        device_(std::move(connection.device)),
        context_(std::move(connection.context)),
        pairs_(std::move(connection.pairs)) {
    worker_ = std::thread([this] { WorkerLoop(); });
  }

  // Shutdown protocol:
  //   1. Collectives that have not started are cancelled (their Works complete with
  //      Cancelled: their buffers may already be gone); the running one finishes (it
  //      is bounded by the timeout).
  //   2. If the group is healthy and nothing was cancelled, the worker runs a last
  //      barrier that waits for every peer to reach this point too, bounded by
  //      kShutdownLinger (or the timeout, if shorter). Closing sooner can fail a peer
  //      that is still finishing the last collective: Gloo reports a connection
  //      closed by the peer even on a buffer whose transfer already completed (seen
  //      with halving-doubling on 3 ranks). The peers are normally at most moments
  //      behind; a rank that leaves alone (its peers still issue collectives) waits
  //      out the bound. A broken group, or one that abandoned collectives, skips the
  //      barrier: closing at once tells the peers fast.
  //   3. The connections are closed.
  ~GlooProcessGroup() override {
    std::deque<Op> cancelled;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      cancelled.swap(queue_);
      shutdown_barrier_ = cancelled.empty();
      shutdown_tag_ = next_tag_;
    }
    for (Op& op : cancelled) {
      op.work->Complete(absl::CancelledError(absl::StrCat(
          "rank ", rank_, ": ", op.name, " cancelled: process group destroyed")));
    }
    worker_.join();
    try {
      context_.reset();
      device_.reset();
    } catch (...) {
      // Tearing down sockets of a broken group must not take the process down.
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "gloo"; }

  // Gloo reads and writes host memory from its worker thread; CPU ops are done when
  // they return, so there is nothing to order, only a backend to check.
  absl::Status OrderAfter(Ops* ops) override {
    if (ops == nullptr || ops->kind() != DeviceKind::kCpu) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank_, ": the gloo backend reduces host memory; the model computes on ",
          ops == nullptr ? std::string("nothing") : ops->name(),
          " (use --backend=nccl on the GPU)"));
    }
    return absl::OkStatus();
  }

  std::shared_ptr<Work> AllReduce(float* data, int64_t n, ReduceOp op) override {
    return AllReduceOnWire(data, n, op, WireFormat::kFp32);
  }

  // float32 runs the algorithm --allreduce chose (`auto` by the bucket's bytes); a
  // 2-byte format runs the compressed ring whatever --allreduce says.
  std::shared_ptr<Work> AllReduceOnWire(float* data, int64_t n, ReduceOp op, WireFormat format) override {
    if (absl::Status s = CheckBuffer("all_reduce", data, n); !s.ok()) {
      return CompletedWork(s);
    }
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("all_reduce", [this, data, n, op, format](const CollectiveContext& c) {
      if (world_size_ > 1) {
        const AllReduceAlgorithm algorithm = ResolveAllReduceAlgorithm(
            algorithm_, world_size_, n * static_cast<int64_t>(sizeof(float)));
        if (format != WireFormat::kFp32) {
          RINGSIDE_RETURN_IF_ERROR(CompressedRingAllReduce(c, data, n, format));
        } else if (algorithm == AllReduceAlgorithm::kRecursiveDoubling) {
          RINGSIDE_RETURN_IF_ERROR(RecursiveDoublingAllReduce(c, data, n));
        } else if (algorithm == AllReduceAlgorithm::kHalvingDoubling) {
          RINGSIDE_RETURN_IF_ERROR(HalvingDoublingAllReduce(c, data, n));
        } else {
          RINGSIDE_RETURN_IF_ERROR(RingAllReduce(c, data, n));
        }
      }
      if (op == ReduceOp::kAverage) Scale(data, n, 1.0f / world_size_);
      return absl::OkStatus();
    });
  }

  std::shared_ptr<Work> Broadcast(float* data, int64_t n, int root) override {
    if (absl::Status s = CheckBuffer("broadcast", data, n); !s.ok()) {
      return CompletedWork(s);
    }
    if (root < 0 || root >= world_size_) {
      return CompletedWork(absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": broadcast root ", root, " is not in [0, ",
                       world_size_, ")")));
    }
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("broadcast", [this, data, n, root](const CollectiveContext& c) {
      if (world_size_ == 1) return absl::OkStatus();
      return BinomialBroadcast(c, data, n, root);
    });
  }

  std::shared_ptr<Work> AllGather(const float* in, int64_t n, float* out) override {
    if (absl::Status s = CheckBuffer("all_gather", in, n); !s.ok()) {
      return CompletedWork(s);
    }
    if (absl::Status s = CheckBuffer("all_gather", out, n); !s.ok()) {
      return CompletedWork(s);
    }
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("all_gather", [this, in, n, out](const CollectiveContext& c) {
      float* mine = out + static_cast<int64_t>(rank_) * n;
      if (in != mine) std::memmove(mine, in, n * sizeof(float));
      if (world_size_ == 1) return absl::OkStatus();
      return RingAllGather(c, out, n);
    });
  }

  std::shared_ptr<Work> ReduceScatter(const float* in, float* out, int64_t n,
                                      ReduceOp op) override {
    if (absl::Status s = CheckBuffer("reduce_scatter", in, n); !s.ok()) {
      return CompletedWork(s);
    }
    if (absl::Status s = CheckBuffer("reduce_scatter", out, n); !s.ok()) {
      return CompletedWork(s);
    }
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("reduce_scatter", [this, in, out, n, op](const CollectiveContext& c) {
      RINGSIDE_RETURN_IF_ERROR(RingReduceScatter(c, in, out, n));
      if (op == ReduceOp::kAverage) Scale(out, n, 1.0f / world_size_);
      return absl::OkStatus();
    });
  }

  std::shared_ptr<Work> Reduce(float* data, int64_t n, ReduceOp op, int root) override {
    if (absl::Status s = CheckRooted("reduce", root, {data}, n); !s.ok()) {
      return CompletedWork(s);
    }
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("reduce", [this, data, n, op, root](const CollectiveContext& c) {
      if (world_size_ > 1) {
        RINGSIDE_RETURN_IF_ERROR(BinomialReduce(c, data, n, root));
      }
      if (rank_ == root && op == ReduceOp::kAverage) Scale(data, n, 1.0f / world_size_);
      return absl::OkStatus();
    });
  }

  std::shared_ptr<Work> Scatter(const float* in, float* out, int64_t n, int root) override {
    if (absl::Status s = CheckRooted("scatter", root, {out, rank_ == root ? in : out}, n);
        !s.ok()) {
      return CompletedWork(s);
    }
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("scatter", [in, out, n, root](const CollectiveContext& c) {
      return FlatScatter(c, in, out, n, root);
    });
  }

  std::shared_ptr<Work> Gather(const float* in, int64_t n, float* out, int root) override {
    if (absl::Status s = CheckRooted("gather", root, {in, rank_ == root ? out : in}, n);
        !s.ok()) {
      return CompletedWork(s);
    }
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("gather", [in, out, n, root](const CollectiveContext& c) {
      return FlatGather(c, in, out, n, root);
    });
  }

  std::shared_ptr<Work> AllToAll(const float* in, float* out, int64_t n) override {
    if (absl::Status s = CheckBuffer("all_to_all", in, n); !s.ok()) return CompletedWork(s);
    if (absl::Status s = CheckBuffer("all_to_all", out, n); !s.ok()) return CompletedWork(s);
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("all_to_all", [in, out, n](const CollectiveContext& c) {
      return PairwiseAllToAll(c, in, out, n);
    });
  }

  CollectiveBytes total_bytes() const override {
    absl::MutexLock lock(&mu_);
    return total_bytes_;
  }

  std::shared_ptr<Work> Barrier() override {
    return Enqueue("barrier", [this](const CollectiveContext& c) {
      if (world_size_ == 1) return absl::OkStatus();
      // Gloo's dissemination barrier: log2(world) rounds of zero-byte messages (no
      // payload to count). It throws Gloo's exceptions (RunOp catches them).
      gloo::BarrierOptions opts(context_);
      opts.setTag(c.tag);
      opts.setTimeout(timeout_ms_);
      gloo::barrier(opts);
      return absl::OkStatus();
    });
  }

 private:
  // One queued collective. `run` returns the algorithms' errors and may throw Gloo's
  // (Gloo's barrier reports errors by exception).
  using Run = std::function<absl::Status(const CollectiveContext& c)>;
  struct Op {
    std::string name;  // "all_reduce #17"
    uint32_t tag = 0;
    Run run;
    std::shared_ptr<GlooWork> work;
  };

  absl::Status CheckBuffer(absl::string_view op, const float* ptr, int64_t n) const {
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": ", op, " with negative count ", n));
    }
    if (n > 0 && ptr == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": ", op, " with a null buffer"));
    }
    return absl::OkStatus();
  }

  // CheckBuffer for each of `buffers` (the ones this rank reads or writes), then the
  // root: InvalidArgument unless it is in [0, world_size).
  absl::Status CheckRooted(absl::string_view op, int root,
                           std::initializer_list<const float*> buffers, int64_t n) const {
    for (const float* buffer : buffers) RINGSIDE_RETURN_IF_ERROR(CheckBuffer(op, buffer, n));
    if (root < 0 || root >= world_size_) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": ", op, " root ", root,
                                                     " is not in [0, ", world_size_, ")"));
    }
    return absl::OkStatus();
  }

  // Issuing thread only (the class is thread-compatible for issuing).
  std::shared_ptr<Work> Enqueue(absl::string_view kind, Run run) {
    Op op;
    op.tag = next_tag_++;
    op.name = absl::StrCat(kind, " #", op.tag);
    op.run = std::move(run);
    op.work = std::make_shared<GlooWork>();
    std::shared_ptr<Work> work = op.work;
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(op));
    return work;
  }

  void WorkerLoop() {
    BlockSigpipeInThisThread();
    while (true) {
      Op op;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](GlooProcessGroup* pg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pg->mu_) {
              return pg->stopping_ || !pg->queue_.empty();
            },
            this));
        if (queue_.empty()) {  // Stopping.
          if (shutdown_barrier_) ShutdownBarrier(shutdown_tag_);
          return;
        }
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      op.work->MarkStarted();
      GlooTransfer transfer(context_.get(), pairs_.get(), timeout_);
      absl::Status status = RunOp(op, transfer);
      // A failed operation counts what moved before it failed.
      const CollectiveBytes op_bytes = transfer.bytes();
      {
        absl::MutexLock lock(&mu_);
        total_bytes_ += op_bytes;
      }
      op.work->Complete(std::move(status), op_bytes);
    }
  }

  // Shutdown step 2. Worker thread only.
  void ShutdownBarrier(uint32_t tag) {
    if (context_ == nullptr || !broken_.ok()) return;
    try {
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag);
      opts.setTimeout(std::min(
          timeout_ms_,
          std::chrono::milliseconds(absl::ToInt64Milliseconds(kShutdownLinger))));
      gloo::barrier(opts);
    } catch (...) {
      // A peer already gone, or one that is not shutting down: stop waiting.
    }
  }

  // Runs `op` on `transfer`; the first failure breaks the group. Worker thread only.
  absl::Status RunOp(Op& op, Transfer& transfer) {
    if (!broken_.ok()) {
      return absl::Status(broken_.code(),
                          absl::StrCat("rank ", rank_, ": ", op.name,
                                       " not run: the process group failed earlier: ",
                                       broken_.message()));
    }
    absl::Status failure;
    try {
      const absl::Status status = op.run({rank_, world_size_, op.tag, &transfer, &scratch_, &wire_scratch_});
      if (status.ok()) return status;
      failure = absl::Status(status.code(),
                             absl::StrCat("rank ", rank_, ": ", op.name, " failed: ", status.message()));
    } catch (...) {
      failure = StatusFromException(std::current_exception(), rank_, op.name, timeout_);
    }
    broken_ = peer_naming_.Name(failure);
    // The context is unusable after an exception (Gloo's errors.md). Closing the
    // connections tells the peers at once and drops any message still on its way
    // into a buffer whose owner is about to get it back.
    if (pairs_ != nullptr) pairs_->Close();
    try {
      if (context_ != nullptr) context_->closeConnections();
      // A pair that timed out in Gloo's older buffer API stays open through
      // closeConnections; destroying the context closes every socket.
      context_.reset();
    } catch (...) {
    }
    return broken_;
  }

  const int rank_;
  const int world_size_;
  const absl::Duration timeout_;
  const std::chrono::milliseconds timeout_ms_;
  const GlooPeerNaming peer_naming_;
  const AllReduceAlgorithm algorithm_;
  std::shared_ptr<gloo::transport::Device> device_;
  // Connected by NewGlooProcessGroup; used by the worker thread only. Null for world
  // size 1 (no peers) and after a failure (the sockets are closed).
  std::shared_ptr<gloo::rendezvous::Context> context_;

  uint32_t next_tag_ = 0;  // Issuing thread only (and the destructor).
  std::vector<float> scratch_;  // Worker thread only: the algorithms' scratch.
  std::vector<uint16_t> wire_scratch_;  // Worker thread only: the compressed ring's codes.
  // The doublings' connections (null unless one may run); used by the worker thread.
  std::unique_ptr<TcpPairs> pairs_;
  absl::Status broken_;    // Worker thread only: the first failure.

  mutable absl::Mutex mu_;
  CollectiveBytes total_bytes_ ABSL_GUARDED_BY(mu_);
  std::deque<Op> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_barrier_ ABSL_GUARDED_BY(mu_) = false;  // Shutdown step 2 wanted.
  uint32_t shutdown_tag_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread worker_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessGroup>> NewGlooProcessGroup(
    Store* store, const ProcessGroupOptions& options) {
  RINGSIDE_RETURN_IF_ERROR(ValidateProcessGroupOptions(store, options));
  if (options.world_size == 1) {
    // Nothing to connect: every collective is a local copy (or nothing).
    return std::unique_ptr<ProcessGroup>(
        new GlooProcessGroup(options, GlooConnection(), /*store=*/nullptr));
  }
  RINGSIDE_ASSIGN_OR_RETURN(GlooConnection connection, ConnectGloo(store, options));
  return std::unique_ptr<ProcessGroup>(
      new GlooProcessGroup(options, std::move(connection), store));
}

}  // namespace ringside
