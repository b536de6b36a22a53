// The Gloo backend of ProcessGroup: CPU collectives over Gloo's TCP transport.
//
// Protocol of NewGlooProcessGroup:
//   1. Join: every rank sets "gloo_joined/<rank>" = its world size and waits (bounded by
//      the timeout) for all world_size join keys, so that a rank that never arrives is
//      reported by number, and a rank started with another world size is refused.
//   2. Connect: a gloo::rendezvous::Context exchanges TCP addresses through the store
//      (GlooStoreAdapter) and connects every pair of ranks (connectFullMesh).
//   3. Only where recursive doubling or halving-doubling will run: its own direct TCP
//      connections (TcpPairs, tcp_pairs.h), through the same store.
//   4. Serve: one worker thread per group runs the queued collectives in FIFO order
//      (Gloo's collectives block), each bounded by the timeout. Every rank issues the
//      same collectives in the same order, so the n-th collective carries tag n on all
//      ranks.
//
// Algorithms: the all-reduces (ring, halving-doubling, recursive doubling), broadcast,
// reduce, all-gather, reduce-scatter, scatter, gather and all-to-all are ringside's
// own, driven on Gloo's unbound buffers (ring, binomial trees, all-gather,
// reduce-scatter, and the flat patterns of Gloo's scatter, gather and alltoall) or on
// the direct TCP pairs (the doublings), so that every payload byte is counted where it
// is handed to the transport or taken from it (Work::bytes, total_bytes). Only the
// barrier is Gloo's; it moves no payload. Message headers are not counted.
//
// Failure model: any Gloo exception becomes a Status (DeadlineExceeded for timeouts,
// Unavailable for a peer that went away, Internal for broken invariants) naming the
// rank, the collective and its sequence number. The first failure breaks the group:
// its connections are closed (so peers fail fast instead of waiting out their
// timeouts, and no late message can land in a buffer its owner got back), and every
// later collective fails at once with that first error.
#include <gloo/barrier.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <climits>
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
#include "absl/numeric/bits.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "absl/time/time.h"
#include "common/trace.h"
#include "ddp_ring/gloo_store_adapter.h"
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/tcp_pairs.h"

namespace ringside {
namespace {

// Slot prefixes of ringside's own collectives on unbound buffers. Gloo's built-in
// collectives use prefixes 0x01..0x08 (gloo/types.h); any other value keeps the slots
// apart.
constexpr uint8_t kReduceScatterSlotPrefix = 0x52;
constexpr uint8_t kRingReduceSlotPrefix = 0x53;
constexpr uint8_t kRingGatherSlotPrefix = 0x54;
constexpr uint8_t kBroadcastSlotPrefix = 0x55;
constexpr uint8_t kAllGatherSlotPrefix = 0x56;
constexpr uint8_t kReduceSlotPrefix = 0x57;
constexpr uint8_t kScatterSlotPrefix = 0x58;
constexpr uint8_t kGatherSlotPrefix = 0x59;
constexpr uint8_t kAllToAllSlotPrefix = 0x5a;

// The ring all-reduce's pipelining (RingAllReduce): the largest segment of a chunk, and
// how many segment transfers are in flight at once (one of them being waited for and
// added while the others move). Gloo's own ring's settings; smaller segments with more
// in flight were slower at 4 ranks on 2 cores (docs/benchmarks.md, "Ring pipelining").
constexpr int64_t kRingSegmentBytes = int64_t{1} << 20;
constexpr int64_t kRingSegmentsInFlight = 2;

// The longest a healthy group's destructor waits for its peers (shutdown step 2).
constexpr absl::Duration kShutdownLinger = absl::Seconds(10);

// Gloo's messages can span lines (stack traces of EnforceNotMet); statuses are one line.
std::string OneLine(absl::string_view text) {
  std::string line = absl::StrReplaceAll(text, {{"\n", " | "}, {"\r", ""}});
  absl::StripTrailingAsciiWhitespace(&line);
  return line;
}

// Maps an exception thrown by Gloo while doing `what` to a Status. `timeout` is only
// used to word the message.
absl::Status StatusFromException(std::exception_ptr error, int rank,
                                 absl::string_view what, absl::Duration timeout) {
  const std::string prefix = absl::StrCat("rank ", rank, ": ", what, " failed: ");
  try {
    std::rethrow_exception(error);
  } catch (const gloo::IoException& e) {
    const std::string detail = OneLine(e.what());
    const std::string lower = absl::AsciiStrToLower(detail);
    // TCP transport wording: "Timed out waiting ...ms for recv operation", "Read
    // timeout", "Write timeout", "Connect timeout".
    if (absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout")) {
      return absl::DeadlineExceededError(absl::StrCat(
          prefix, "timed out after ", absl::FormatDuration(timeout), " (", detail, ")"));
    }
    if (absl::StrContains(lower, "closed by peer") ||
        absl::StrContains(lower, "connection reset") ||
        absl::StrContains(lower, "broken pipe")) {
      return absl::UnavailableError(
          absl::StrCat(prefix, "peer closed the connection (", detail, ")"));
    }
    return absl::UnavailableError(absl::StrCat(prefix, "I/O error (", detail, ")"));
  } catch (const gloo::EnforceNotMet& e) {
    return absl::InternalError(
        absl::StrCat(prefix, "Gloo check failed (", OneLine(e.what()), ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(prefix, OneLine(e.what())));
  } catch (...) {
    return absl::InternalError(absl::StrCat(prefix, "unknown exception"));
  }
}

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

// Gloo's TCP transport writes with writev(2), which raises SIGPIPE when the peer has
// gone, and SIGPIPE's default action ends the process. Every thread that does Gloo I/O
// therefore runs with SIGPIPE blocked (the write then just fails with EPIPE and Gloo
// throws): the worker thread for its whole life, the caller of NewGlooProcessGroup
// while it builds the device (whose event-loop thread inherits the mask) and the full
// mesh. No process-wide signal disposition is changed.
void BlockSigpipeInThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  // Discards the SIGPIPEs raised meanwhile (they would be delivered on unblocking),
  // then restores the caller's mask.
  ~ScopedSigpipeBlock() {
    if (sigismember(&old_, SIGPIPE) == 1) return;  // Was blocked already: keep as is.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    const timespec zero = {0, 0};
    while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t old_;
};

class GlooProcessGroup : public ProcessGroup {
 public:
  // Takes a connected context (null for world size 1, where every collective is local).
  GlooProcessGroup(const ProcessGroupOptions& options,
                   std::shared_ptr<gloo::transport::Device> device,
                   std::shared_ptr<gloo::rendezvous::Context> context,
                   std::vector<std::pair<std::string, int>> peer_addresses,
                   Store* store, std::unique_ptr<TcpPairs> pairs)
      : rank_(options.rank),
        world_size_(options.world_size),
        timeout_(options.timeout),
        timeout_ms_(absl::ToInt64Milliseconds(options.timeout)),
        peer_addresses_(std::move(peer_addresses)),
        store_(store),
        algorithm_(options.algorithm),
        device_(std::move(device)),
        context_(std::move(context)),
        pairs_(std::move(pairs)) {
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
    if (absl::Status s = CheckBuffer("all_reduce", data, n); !s.ok()) {
      return CompletedWork(s);
    }
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("all_reduce", [this, data, n, op](uint32_t tag) {
      if (world_size_ > 1) {
        const AllReduceAlgorithm algorithm = ResolveAllReduceAlgorithm(
            algorithm_, world_size_, n * static_cast<int64_t>(sizeof(float)));
        if (algorithm == AllReduceAlgorithm::kRecursiveDoubling) {
          RINGSIDE_RETURN_IF_ERROR(RecursiveDoublingAllReduce(data, n, tag));
        } else if (algorithm == AllReduceAlgorithm::kHalvingDoubling) {
          RINGSIDE_RETURN_IF_ERROR(HalvingDoublingAllReduce(data, n, tag));
        } else {
          RingAllReduce(data, n, tag);
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
    return Enqueue("broadcast", [this, data, n, root](uint32_t tag) {
      if (world_size_ == 1) return absl::OkStatus();
      BinomialBroadcast(data, n, root, tag);
      return absl::OkStatus();
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
    return Enqueue("all_gather", [this, in, n, out](uint32_t tag) {
      float* mine = out + static_cast<int64_t>(rank_) * n;
      if (world_size_ == 1) {
        if (in != mine) std::memmove(mine, in, n * sizeof(float));
        return absl::OkStatus();
      }
      if (in != mine) std::memmove(mine, in, n * sizeof(float));
      RingAllGather(out, n, tag);
      return absl::OkStatus();
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
    return Enqueue("reduce_scatter", [this, in, out, n, op](uint32_t tag) {
      RingReduceScatter(in, out, n, tag);
      if (op == ReduceOp::kAverage) Scale(out, n, 1.0f / world_size_);
      return absl::OkStatus();
    });
  }

  std::shared_ptr<Work> Reduce(float* data, int64_t n, ReduceOp op, int root) override {
    if (absl::Status s = CheckRooted("reduce", root, {data}, n); !s.ok()) {
      return CompletedWork(s);
    }
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("reduce", [this, data, n, op, root](uint32_t tag) {
      if (world_size_ > 1) BinomialReduce(data, n, root, tag);
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
    return Enqueue("scatter", [this, in, out, n, root](uint32_t tag) {
      FlatScatter(in, out, n, root, tag);
      return absl::OkStatus();
    });
  }

  std::shared_ptr<Work> Gather(const float* in, int64_t n, float* out, int root) override {
    if (absl::Status s = CheckRooted("gather", root, {in, rank_ == root ? out : in}, n);
        !s.ok()) {
      return CompletedWork(s);
    }
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("gather", [this, in, out, n, root](uint32_t tag) {
      FlatGather(in, out, n, root, tag);
      return absl::OkStatus();
    });
  }

  std::shared_ptr<Work> AllToAll(const float* in, float* out, int64_t n) override {
    if (absl::Status s = CheckBuffer("all_to_all", in, n); !s.ok()) return CompletedWork(s);
    if (absl::Status s = CheckBuffer("all_to_all", out, n); !s.ok()) return CompletedWork(s);
    if (n == 0) return CompletedWork(absl::OkStatus());
    return Enqueue("all_to_all", [this, in, out, n](uint32_t tag) {
      PairwiseAllToAll(in, out, n, tag);
      return absl::OkStatus();
    });
  }

  CollectiveBytes total_bytes() const override {
    absl::MutexLock lock(&mu_);
    return total_bytes_;
  }

  std::shared_ptr<Work> Barrier() override {
    return Enqueue("barrier", [this](uint32_t tag) {
      if (world_size_ == 1) return absl::OkStatus();
      // Gloo's dissemination barrier: log2(world) rounds of zero-byte messages (no
      // payload to count).
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag);
      opts.setTimeout(timeout_ms_);
      gloo::barrier(opts);
      return absl::OkStatus();
    });
  }

 private:
  // One queued collective. `run` returns ringside's own errors and may throw Gloo's
  // (Gloo reports errors by exception).
  struct Op {
    std::string name;  // "all_reduce #17"
    uint32_t tag = 0;
    std::function<absl::Status(uint32_t tag)> run;
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
  std::shared_ptr<Work> Enqueue(absl::string_view kind,
                                std::function<absl::Status(uint32_t tag)> run) {
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
      op_bytes_ = {};
      const CollectiveBytes pairs_before = PairsPayload();
      absl::Status status = RunOp(op);
      // A failed operation counts what moved before it failed.
      op_bytes_ += PairsPayload() - pairs_before;
      {
        absl::MutexLock lock(&mu_);
        total_bytes_ += op_bytes_;
      }
      op.work->Complete(std::move(status), op_bytes_);
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

  // Names the rank behind a failure: "rank 0: all_reduce #7 failed: peer rank 2: peer
  // closed the connection (...)". Every survivor checks in at the store and waits a
  // short while for the others; the ranks that do not check in are the lost ones, and
  // an unreachable store means rank 0 (its host) is stopped or gone. If every rank checked in,
  // the far end's address in Gloo's message (published at rendezvous) names it.
  // Worker thread only; bounded by min(timeout / 2, 1 s).
  absl::Status NamePeer(const absl::Status& status) const {
    const std::string message(status.message());
    const size_t at = message.find(" failed: ");
    if (at == std::string::npos || world_size_ == 1) return status;
    // Every failing rank checks in first, so that the others' checks find it alive.
    std::vector<std::string> keys;
    for (int r = 0; r < world_size_; ++r) keys.push_back(absl::StrCat("alive_after_failure/", r));
    const bool checked_in = store_ != nullptr && store_->Set(keys[rank_], "1").ok();
    const std::string store_gone = "0 (it hosts the store, which does not answer: stopped or gone)";
    std::string peers;
    // Who did not check in within the window is lost. (The address in Gloo's message
    // is not enough: a survivor that failed first closes its connections too.)
    if (store_ != nullptr) {
      if (!checked_in) {
        peers = store_gone;
      } else if (absl::Status w = store_->Wait(keys, std::min(timeout_ / 2, absl::Seconds(1)));
                 absl::IsDeadlineExceeded(w)) {
        std::vector<std::string> missing;
        for (int r = 0; r < world_size_; ++r) {
          if (!store_->Get(keys[r], absl::ZeroDuration()).ok()) missing.push_back(absl::StrCat(r));
        }
        peers = absl::StrJoin(missing, ", ");
      } else if (!w.ok()) {
        peers = store_gone;
      }
    }
    // Everyone alive (or no store): the far end named by Gloo's message, if known.
    if (peers.empty()) {
      for (const auto& [address, peer] : peer_addresses_) {
        if (message.find(address) != std::string::npos) {
          peers = absl::StrCat(peer);
          break;
        }
      }
    }
    if (peers.empty()) return status;
    // One lost peer: where it is (the host matters across machines).
    for (const auto& [address, peer] : peer_addresses_) {
      if (peers == absl::StrCat(peer)) {
        absl::StrAppend(&peers, " (at ", address, ")");
        break;
      }
    }
    const size_t cut = at + strlen(" failed: ");
    return absl::Status(status.code(), absl::StrCat(message.substr(0, cut), "peer rank ", peers,
                                                    ": ", message.substr(cut)));
  }

  // Worker thread only.
  absl::Status RunOp(Op& op) {
    if (!broken_.ok()) {
      return absl::Status(broken_.code(),
                          absl::StrCat("rank ", rank_, ": ", op.name,
                                       " not run: the process group failed earlier: ",
                                       broken_.message()));
    }
    absl::Status failure;
    try {
      const absl::Status status = op.run(op.tag);
      if (status.ok()) return status;
      failure = absl::Status(status.code(),
                             absl::StrCat("rank ", rank_, ": ", op.name, " failed: ", status.message()));
    } catch (...) {
      failure = StatusFromException(std::current_exception(), rank_, op.name, timeout_);
    }
    broken_ = NamePeer(failure);
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

  // Ring reduce-scatter on Gloo's unbound buffers, ringside's own: in world_size - 1
  // steps, rank r sends its running sum of chunk (r - s - 1) to rank r + 1 and
  // receives rank r - 1's running sum of chunk (r - s - 2), adding its own part; after
  // the last step it holds the full sum of chunk r. Every rank sends and receives
  // (world_size - 1) * n floats, the bandwidth optimum. Worker thread only.
  void RingReduceScatter(const float* in, float* out, int64_t n, uint32_t tag) {
    if (world_size_ == 1) {
      std::memmove(out, in, n * sizeof(float));
      return;
    }
    const int w = world_size_;
    const size_t chunk_bytes = static_cast<size_t>(n) * sizeof(float);
    const int right = (rank_ + 1) % w;
    const int left = (rank_ + w - 1) % w;
    const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, tag);
    auto chunk_index = [&](int s, int back) { return ((rank_ - s - back) % w + w) % w; };

    // Two accumulators: one being received into while the other is being sent.
    std::vector<float> acc[2] = {std::vector<float>(n), std::vector<float>(n)};
    std::unique_ptr<gloo::transport::UnboundBuffer> in_buf =
        context_->createUnboundBuffer(const_cast<float*>(in), chunk_bytes * w);
    std::unique_ptr<gloo::transport::UnboundBuffer> acc_buf[2] = {
        context_->createUnboundBuffer(acc[0].data(), chunk_bytes),
        context_->createUnboundBuffer(acc[1].data(), chunk_bytes)};

    for (int s = 0; s < w - 1; ++s) {
      gloo::transport::UnboundBuffer* recv = acc_buf[s % 2].get();
      recv->recv(left, slot);
      // Step 0 sends this rank's own part straight from `in`; later steps forward the
      // running sum received in the previous step.
      gloo::transport::UnboundBuffer* send =
          s == 0 ? in_buf.get() : acc_buf[(s + 1) % 2].get();
      if (s == 0) {
        send->send(right, slot, chunk_index(0, 1) * chunk_bytes, chunk_bytes);
      } else {
        send->send(right, slot);
      }
      recv->waitRecv(timeout_ms_);
      op_bytes_.received += static_cast<int64_t>(chunk_bytes);
      send->waitSend(timeout_ms_);
      op_bytes_.sent += static_cast<int64_t>(chunk_bytes);
      const float* mine = in + static_cast<int64_t>(chunk_index(s, 2)) * n;
      float* sum = acc[s % 2].data();
      if (s == w - 2) {
        // chunk_index(w - 2, 2) == rank_: the last sum goes straight to `out`.
        for (int64_t i = 0; i < n; ++i) out[i] = sum[i] + mine[i];
      } else {
        for (int64_t i = 0; i < n; ++i) sum[i] += mine[i];
      }
    }
  }

  // The payload the direct TCP pairs moved so far (zero without them). Worker thread.
  CollectiveBytes PairsPayload() const {
    if (pairs_ == nullptr) return {};
    return {pairs_->payload_sent(), pairs_->payload_received()};
  }

  // Chunk c (taken modulo the world size) of an n-float vector split over the ranks:
  // [n c / w, n (c + 1) / w), as {offset, count}. Every rank computes the same split.
  std::pair<int64_t, int64_t> Chunk(int64_t n, int c) const {
    const int w = world_size_;
    c = (c % w + w) % w;
    const int64_t begin = n * c / w;
    return {begin, n * (c + 1) / w - begin};
  }

  // One transfer of the pipelined ring all-reduce: segment k of the chunk sent to the
  // right neighbour and segment k of the chunk received from the left one, as float
  // offsets into `data` and counts (a count of 0: nothing moves that way).
  struct RingTransfer {
    bool reduce;  // Reduce-scatter (received into scratch_ and added) or all-gather.
    int64_t send_at, send_n, recv_at, recv_n;
  };

  // Transfer t of RingAllReduce's flat schedule over `segments` segments per chunk:
  // t = s * segments + k in the reduce-scatter (s < w - 1), then (w - 1 + s) * segments
  // + k in the all-gather. Segment k of a chunk of `len` floats is
  // [len k / segments, len (k + 1) / segments) of it; both ends of a transfer split the
  // same chunk, so they agree on every segment's size.
  RingTransfer RingSchedule(int64_t n, int64_t segments, int64_t t) const {
    const int64_t reduce_steps = (world_size_ - 1) * segments;
    const bool reduce = t < reduce_steps;
    const int s = static_cast<int>((reduce ? t : t - reduce_steps) / segments);
    const int64_t k = t % segments;
    const auto [send_chunk_at, send_len] = Chunk(n, reduce ? rank_ - s : rank_ + 1 - s);
    const auto [recv_chunk_at, recv_len] = Chunk(n, reduce ? rank_ - s - 1 : rank_ - s);
    const int64_t send_lo = send_len * k / segments, recv_lo = recv_len * k / segments;
    return {reduce, send_chunk_at + send_lo, send_len * (k + 1) / segments - send_lo,
            recv_chunk_at + recv_lo, recv_len * (k + 1) / segments - recv_lo};
  }

  // Ring all-reduce on Gloo's unbound buffers, in place, in two phases of w - 1 steps
  // over the chunks of Chunk():
  //   reduce-scatter: in step s rank r sends its running sum of chunk r - s to r + 1 and
  //     receives chunk r - s - 1 from r - 1 into scratch_, adding it in; afterwards it
  //     holds the full sum of chunk r + 1;
  //   all-gather: in step s rank r sends chunk r + 1 - s and receives chunk r - s,
  //     straight into `data`.
  // Pipelined like Gloo's ring and NCCL: each chunk is cut into the same number of
  // segments of at most kRingSegmentBytes (RingSchedule), and the 2 (w - 1) x segments
  // transfers run in order with `lag` of them still in flight while the oldest is
  // waited for and added: post transfer t, then complete transfer t - lag. Sending,
  // receiving (Gloo's event loop) and adding overlap. Transfer t sends what transfer
  // t - segments received, so lag < segments keeps that one completed first. Matching
  // is FIFO per peer and slot, so the oldest completion on a buffer is the oldest post.
  // Each rank sends and receives 2 (n - its own chunk) floats, about 2 (w - 1) / w x n
  // (the bandwidth optimum); every chunk's sum is computed once, in the same order as
  // without segments, so all ranks end with bit-identical sums. Worker thread only;
  // throws Gloo's exceptions.
  void RingAllReduce(float* data, int64_t n, uint32_t tag) {
    const int w = world_size_;
    const int right = (rank_ + 1) % w;
    const int left = (rank_ + w - 1) % w;
    const int64_t largest = (n + w - 1) / w;
    constexpr int64_t kSegmentFloats = kRingSegmentBytes / sizeof(float);
    const int64_t segments = std::max<int64_t>(1, (largest + kSegmentFloats - 1) / kSegmentFloats);
    const int64_t lag = std::min<int64_t>(kRingSegmentsInFlight - 1, segments - 1);
    // Receive slots in scratch_: one per reduce-scatter transfer in flight.
    const int64_t slot_floats = (largest + segments - 1) / segments;
    const int64_t scratch_n = slot_floats * (lag + 1);
    if (static_cast<int64_t>(scratch_.size()) < scratch_n) scratch_.resize(scratch_n);
    std::unique_ptr<gloo::transport::UnboundBuffer> data_buf =
        context_->createUnboundBuffer(data, n * sizeof(float));
    std::unique_ptr<gloo::transport::UnboundBuffer> scratch_buf =
        context_->createUnboundBuffer(scratch_.data(), scratch_n * sizeof(float));
    const uint64_t reduce_slot = gloo::Slot::build(kRingReduceSlotPrefix, tag);
    const uint64_t gather_slot = gloo::Slot::build(kRingGatherSlotPrefix, tag);
    const int64_t transfers = 2 * (w - 1) * segments;
    for (int64_t t = 0; t < transfers + lag; ++t) {
      if (t < transfers) {
        const RingTransfer post = RingSchedule(n, segments, t);
        const int64_t scratch_at = (t % (lag + 1)) * slot_floats;
        if (post.recv_n > 0) {
          if (post.reduce) {
            scratch_buf->recv(left, reduce_slot, scratch_at * sizeof(float), post.recv_n * sizeof(float));
          } else {
            data_buf->recv(left, gather_slot, post.recv_at * sizeof(float), post.recv_n * sizeof(float));
          }
        }
        if (post.send_n > 0) {
          data_buf->send(right, post.reduce ? reduce_slot : gather_slot, post.send_at * sizeof(float),
                         post.send_n * sizeof(float));
        }
      }
      if (t < lag) continue;
      const RingTransfer done = RingSchedule(n, segments, t - lag);
      WaitUnbound(done.reduce ? scratch_buf.get() : data_buf.get(), done.recv_n, data_buf.get(),
                  done.send_n);
      if (!done.reduce) continue;
      const float* received = scratch_.data() + ((t - lag) % (lag + 1)) * slot_floats;
      float* sum = data + done.recv_at;
      for (int64_t i = 0; i < done.recv_n; ++i) sum[i] += received[i];
    }
  }

  // Waits for the receive of recv_n floats on `recv` and the send of send_n floats on
  // `send` posted by the caller (a zero count: none was posted), counting each in
  // op_bytes_ once done. Worker thread only.
  void WaitUnbound(gloo::transport::UnboundBuffer* recv, int64_t recv_n,
                   gloo::transport::UnboundBuffer* send, int64_t send_n) {
    if (recv_n > 0) {
      recv->waitRecv(timeout_ms_);
      op_bytes_.received += recv_n * static_cast<int64_t>(sizeof(float));
    }
    if (send_n > 0) {
      send->waitSend(timeout_ms_);
      op_bytes_.sent += send_n * static_cast<int64_t>(sizeof(float));
    }
  }

  // Binomial-tree broadcast on an unbound buffer: with v = (rank - root) mod w, in round
  // k = 0, 1, ... ranks v < 2^k send to v + 2^k and ranks 2^k <= v < 2^(k+1) receive
  // from v - 2^k. A rank receives the vector once (the root never) and sends it once per
  // child. Worker thread only; throws Gloo's exceptions.
  void BinomialBroadcast(float* data, int64_t n, int root, uint32_t tag) {
    const int w = world_size_;
    const int v = (rank_ - root + w) % w;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf =
        context_->createUnboundBuffer(data, n * sizeof(float));
    const uint64_t slot = gloo::Slot::build(kBroadcastSlotPrefix, tag);
    for (int mask = 1; mask < w; mask *= 2) {
      if (v < mask && v + mask < w) {
        buf->send((v + mask + root) % w, slot);
        WaitUnbound(nullptr, 0, buf.get(), n);
      } else if (v >= mask && v < 2 * mask) {
        buf->recv((v - mask + root) % w, slot);
        WaitUnbound(buf.get(), n, nullptr, 0);
      }
    }
  }

  // Binomial-tree reduce on unbound buffers, the broadcast's tree (BinomialBroadcast)
  // run backwards: with v = (rank - root) mod w, for k from the last round down to 0,
  // ranks v < 2^k receive the partial sum of v + 2^k and add it to their own, and ranks
  // 2^k <= v < 2^(k+1) send their partial sum to v - 2^k. A rank's subtree has reported
  // before it sends. A non-root rank sends n floats once (the root never) and receives
  // n per child, the broadcast's traffic reversed. The root sums straight into `data`;
  // other ranks with children sum into a copy, so that their `data` stays untouched.
  // Worker thread only; throws Gloo's exceptions.
  void BinomialReduce(float* data, int64_t n, int root, uint32_t tag) {
    const int w = world_size_;
    const int v = (rank_ - root + w) % w;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    const uint64_t slot = gloo::Slot::build(kReduceSlotPrefix, tag);
    int top = 1;  // The first round's 2^k: the largest power of two below w.
    while (top * 2 < w) top *= 2;
    bool has_children = false;
    for (int mask = top; mask >= 1; mask /= 2) has_children |= v < mask && v + mask < w;
    // The running sum: `data` itself on the root, a copy on an inner rank, the
    // untouched input on a leaf.
    std::vector<float> copy;
    float* sum = data;
    if (v != 0 && has_children) {
      copy.assign(data, data + n);
      sum = copy.data();
    }
    std::unique_ptr<gloo::transport::UnboundBuffer> sum_buf =
        context_->createUnboundBuffer(sum, bytes);
    std::unique_ptr<gloo::transport::UnboundBuffer> scratch_buf;
    if (has_children) {
      if (static_cast<int64_t>(scratch_.size()) < n) scratch_.resize(n);
      scratch_buf = context_->createUnboundBuffer(scratch_.data(), bytes);
    }
    for (int mask = top; mask >= 1; mask /= 2) {
      if (v < mask && v + mask < w) {
        scratch_buf->recv((v + mask + root) % w, slot);
        WaitUnbound(scratch_buf.get(), n, nullptr, 0);
        for (int64_t i = 0; i < n; ++i) sum[i] += scratch_[i];
      } else if (v >= mask && v < 2 * mask) {
        sum_buf->send((v - mask + root) % w, slot);
        WaitUnbound(nullptr, 0, sum_buf.get(), n);
      }
    }
  }

  // Flat scatter on unbound buffers (Gloo's own scatter's pattern): the root sends
  // slice r of `in` to each rank r != root, all at once, and copies its own slice; every
  // other rank receives its slice into `out`. The root sends (w - 1) n floats, every
  // other rank receives n. Worker thread only; throws Gloo's exceptions.
  void FlatScatter(const float* in, float* out, int64_t n, int root, uint32_t tag) {
    const int w = world_size_;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    if (rank_ == root) {
      std::memmove(out, in + static_cast<int64_t>(root) * n, bytes);
      if (w == 1) return;
      std::unique_ptr<gloo::transport::UnboundBuffer> in_buf =
          context_->createUnboundBuffer(const_cast<float*>(in), bytes * w);
      const uint64_t slot = gloo::Slot::build(kScatterSlotPrefix, tag);
      for (int i = 1; i < w; ++i) {
        const int peer = (root + i) % w;
        in_buf->send(peer, slot, peer * bytes, bytes);
      }
      for (int i = 1; i < w; ++i) WaitUnbound(nullptr, 0, in_buf.get(), n);
      return;
    }
    std::unique_ptr<gloo::transport::UnboundBuffer> out_buf =
        context_->createUnboundBuffer(out, bytes);
    out_buf->recv(root, gloo::Slot::build(kScatterSlotPrefix, tag));
    WaitUnbound(out_buf.get(), n, nullptr, 0);
  }

  // Flat gather, FlatScatter reversed (Gloo's own gather's pattern): every rank but the
  // root sends `in` to the root, which receives slice r of `out` from each rank r at
  // once and copies its own. The root receives (w - 1) n floats, every other rank sends
  // n. Worker thread only; throws Gloo's exceptions.
  void FlatGather(const float* in, float* out, int64_t n, int root, uint32_t tag) {
    const int w = world_size_;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    const uint64_t slot = gloo::Slot::build(kGatherSlotPrefix, tag);
    if (rank_ == root) {
      std::memmove(out + static_cast<int64_t>(root) * n, in, bytes);
      if (w == 1) return;
      std::unique_ptr<gloo::transport::UnboundBuffer> out_buf =
          context_->createUnboundBuffer(out, bytes * w);
      for (int i = 1; i < w; ++i) {
        const int peer = (root + i) % w;
        out_buf->recv(peer, slot, peer * bytes, bytes);
      }
      for (int i = 1; i < w; ++i) WaitUnbound(out_buf.get(), n, nullptr, 0);
      return;
    }
    std::unique_ptr<gloo::transport::UnboundBuffer> in_buf =
        context_->createUnboundBuffer(const_cast<float*>(in), bytes);
    in_buf->send(root, slot);
    WaitUnbound(nullptr, 0, in_buf.get(), n);
  }

  // Pairwise all-to-all on unbound buffers (Gloo's own alltoall's pattern): every rank
  // posts, for i = 1 .. w - 1, the receive of slice rank - i of `out` from rank - i and
  // the send of slice rank + i of `in` to rank + i (staggered, so that no rank is
  // everybody's first peer), copies its own slice, then waits for all of them. Each
  // rank sends and receives (w - 1) n floats. Worker thread only; throws Gloo's
  // exceptions.
  void PairwiseAllToAll(const float* in, float* out, int64_t n, uint32_t tag) {
    const int w = world_size_;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    std::memmove(out + static_cast<int64_t>(rank_) * n, in + static_cast<int64_t>(rank_) * n,
                 bytes);
    if (w == 1) return;
    std::unique_ptr<gloo::transport::UnboundBuffer> in_buf =
        context_->createUnboundBuffer(const_cast<float*>(in), bytes * w);
    std::unique_ptr<gloo::transport::UnboundBuffer> out_buf =
        context_->createUnboundBuffer(out, bytes * w);
    const uint64_t slot = gloo::Slot::build(kAllToAllSlotPrefix, tag);
    for (int i = 1; i < w; ++i) {
      const int from = (rank_ - i + w) % w;
      const int to = (rank_ + i) % w;
      out_buf->recv(from, slot, from * bytes, bytes);
      in_buf->send(to, slot, to * bytes, bytes);
    }
    for (int i = 1; i < w; ++i) WaitUnbound(out_buf.get(), n, in_buf.get(), n);
  }

  // Ring all-gather on an unbound buffer over out [w * n], whose slice `rank` is already
  // filled: in step s rank r sends slice r - s to r + 1 and receives slice r - s - 1 from
  // r - 1. Each rank sends and receives (w - 1) n floats. Worker thread only; throws
  // Gloo's exceptions.
  void RingAllGather(float* out, int64_t n, uint32_t tag) {
    const int w = world_size_;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    std::unique_ptr<gloo::transport::UnboundBuffer> buf =
        context_->createUnboundBuffer(out, bytes * w);
    const uint64_t slot = gloo::Slot::build(kAllGatherSlotPrefix, tag);
    for (int s = 0; s < w - 1; ++s) {
      const int send_slice = ((rank_ - s) % w + w) % w;
      const int recv_slice = ((rank_ - s - 1) % w + w) % w;
      buf->recv((rank_ + w - 1) % w, slot, recv_slice * bytes, bytes);
      buf->send((rank_ + 1) % w, slot, send_slice * bytes, bytes);
      WaitUnbound(buf.get(), n, buf.get(), n);
    }
  }

  // The largest power of two <= world_size: the ranks the doublings run on.
  int PowerOfTwoRanks() const {
    int p2 = 1;
    while (p2 * 2 <= world_size_) p2 *= 2;
    return p2;
  }

  // The doublings' first step at a non-power-of-two world size: ranks r >= P (P =
  // PowerOfTwoRanks()) hand their vector to rank r - P, which adds it. `step` is the
  // exchange tag. Worker thread only.
  absl::Status FoldIn(float* data, int64_t n, uint64_t step) {
    const int p2 = PowerOfTwoRanks();
    if (rank_ >= p2) return Transfer(rank_ - p2, step, data, n, nullptr, 0, /*add=*/false);
    if (rank_ < world_size_ - p2) return Transfer(rank_ + p2, step, nullptr, 0, data, n, /*add=*/true);
    return absl::OkStatus();
  }

  // The doublings' last step: ranks r < world_size - P send the result to rank r + P.
  absl::Status FoldOut(float* data, int64_t n, uint64_t step) {
    const int p2 = PowerOfTwoRanks();
    if (rank_ >= p2) return Transfer(rank_ - p2, step, nullptr, 0, data, n, /*add=*/false);
    if (rank_ < world_size_ - p2) return Transfer(rank_ + p2, step, data, n, nullptr, 0, /*add=*/false);
    return absl::OkStatus();
  }

  // Recursive doubling, ringside's own, over the direct TCP pairs (tcp_pairs.h): FoldIn;
  // then in round k = 0 .. lg P - 1 rank r < P swaps its running sum with rank r ^ 2^k
  // and adds the partner's; then FoldOut. Each rank < P sends and receives n floats per
  // round, lg P rounds (plus n each way for a rank with a folded partner; a folded rank
  // sends and receives n once): at 2 ranks the ring's bytes in one exchange instead of
  // two phases. Both sides of a swap add the same two values (a + b == b + a in IEEE
  // arithmetic), so every rank ends with bit-identical sums. Worker thread only.
  absl::Status RecursiveDoublingAllReduce(float* data, int64_t n, uint32_t tag) {
    const int p2 = PowerOfTwoRanks();
    // Exchange tags: the collective's sequence number and the protocol step, the same
    // on every rank.
    uint64_t step = uint64_t{tag} << 8;
    RINGSIDE_RETURN_IF_ERROR(FoldIn(data, n, step++));
    for (int mask = 1; mask < p2; mask *= 2, ++step) {
      if (rank_ < p2) {
        RINGSIDE_RETURN_IF_ERROR(Transfer(rank_ ^ mask, step, data, n, data, n, /*add=*/true));
      }
    }
    return FoldOut(data, n, step);
  }

  // Halving-doubling (Rabenseifner), ringside's own, over the direct TCP pairs: FoldIn;
  // then among ranks r < P a reduce-scatter by recursive halving (round k, mask P/2^(k+1):
  // rank r keeps one half of its current range, the lower one if r & mask == 0, sends
  // the other half to r ^ mask and adds the partner's copy of the kept half), after
  // which rank r holds the full sum of a 1/P slice; then an all-gather by recursive
  // doubling that retraces the halvings (send the range held, receive the partner's
  // half, straight into `data`); then FoldOut. A rank < P sends and receives about
  // 2 (P - 1) / P x n floats (plus n each way for a folded partner). Each slice's sum is
  // computed on one rank, so all ranks end bit-identical. Worker thread only.
  absl::Status HalvingDoublingAllReduce(float* data, int64_t n, uint32_t tag) {
    const int p2 = PowerOfTwoRanks();
    uint64_t step = uint64_t{tag} << 8;
    RINGSIDE_RETURN_IF_ERROR(FoldIn(data, n, step++));
    if (rank_ < p2) {
      std::vector<std::pair<int64_t, int64_t>> ranges;  // [lo, hi) before each halving.
      int64_t lo = 0, hi = n;
      for (int mask = p2 / 2; mask >= 1; mask /= 2, ++step) {
        const int64_t mid = lo + (hi - lo) / 2;
        const bool lower = (rank_ & mask) == 0;
        const int64_t keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
        const int64_t give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
        RINGSIDE_RETURN_IF_ERROR(Transfer(rank_ ^ mask, step, data + give_lo, give_hi - give_lo,
                                          data + keep_lo, keep_hi - keep_lo, /*add=*/true));
        ranges.emplace_back(lo, hi);
        lo = keep_lo;
        hi = keep_hi;
      }
      for (int mask = 1; mask < p2; mask *= 2, ++step) {
        const auto [parent_lo, parent_hi] = ranges.back();
        ranges.pop_back();
        // The partner holds the other half of the parent range.
        const int64_t mid = parent_lo + (parent_hi - parent_lo) / 2;
        const bool lower = (rank_ & mask) == 0;
        const int64_t other_lo = lower ? mid : parent_lo;
        const int64_t other_hi = lower ? parent_hi : mid;
        RINGSIDE_RETURN_IF_ERROR(Transfer(rank_ ^ mask, step, data + lo, hi - lo, data + other_lo,
                                          other_hi - other_lo, /*add=*/false));
        lo = parent_lo;
        hi = parent_hi;
      }
    } else {
      step += 2 * static_cast<uint64_t>(absl::bit_width(static_cast<unsigned>(p2)) - 1);
    }
    return FoldOut(data, n, step);
  }

  // Sends send [send_n] to `peer` while receiving recv_n floats from it, both directions
  // at once (a zero count skips that direction; the peer makes the mirror call). With
  // `add` the received floats go to scratch_ and are added into `recv` as they arrive
  // (when `recv` is also the send buffer, each float only once its own value has been
  // sent); without, they land in `recv` directly. Blocks; bounded by the timeout.
  // Timeouts are worded like Gloo's. The pairs count the payload (PairsPayload).
  absl::Status Transfer(int peer, uint64_t step, const float* send, int64_t send_n, float* recv,
                        int64_t recv_n, bool add) {
    if (add && static_cast<int64_t>(scratch_.size()) < recv_n) scratch_.resize(recv_n);
    float* recv_into = add ? scratch_.data() : recv;
    const bool in_place = send_n > 0 && send == recv;  // Recursive doubling's swap.
    int64_t added = 0;
    auto on_progress = [&](size_t sent, size_t received) {
      if (!add) return;
      const int64_t ready =
          static_cast<int64_t>((in_place ? std::min(sent, received) : received) / sizeof(float));
      for (int64_t i = added; i < ready; ++i) recv[i] += recv_into[i];
      added = std::max(added, ready);
    };
    const absl::Status status = pairs_->Exchange(
        peer, step, send, static_cast<size_t>(send_n) * sizeof(float), recv_into,
        static_cast<size_t>(recv_n) * sizeof(float), absl::Now() + timeout_, on_progress);
    if (absl::IsDeadlineExceeded(status)) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out after ", absl::FormatDuration(timeout_), " (", status.message(), ")"));
    }
    return status;
  }

  const int rank_;
  const int world_size_;
  const absl::Duration timeout_;
  const std::chrono::milliseconds timeout_ms_;
  // The address each peer's end of its connection to this rank has, and that peer.
  const std::vector<std::pair<std::string, int>> peer_addresses_;
  Store* const store_;  // Not owned; outlives the group (see NewGlooProcessGroup).
  const AllReduceAlgorithm algorithm_;
  std::shared_ptr<gloo::transport::Device> device_;
  // Connected by NewGlooProcessGroup; used by the worker thread only. Null for world
  // size 1 (no peers) and after a failure (the sockets are closed).
  std::shared_ptr<gloo::rendezvous::Context> context_;

  uint32_t next_tag_ = 0;  // Issuing thread only (and the destructor).
  std::vector<float> scratch_;  // Worker thread only: the all-reduces' receive buffer.
  // The doublings' connections (null unless one may run); used by the worker thread.
  std::unique_ptr<TcpPairs> pairs_;
  absl::Status broken_;    // Worker thread only: the first failure.

  CollectiveBytes op_bytes_;  // Worker thread only: the running operation's payload.

  mutable absl::Mutex mu_;
  CollectiveBytes total_bytes_ ABSL_GUARDED_BY(mu_);
  std::deque<Op> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_barrier_ ABSL_GUARDED_BY(mu_) = false;  // Shutdown step 2 wanted.
  uint32_t shutdown_tag_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread worker_;
};

// Gloo's TCP device dereferences an empty lookup result when the hostname does not
// resolve (Debian's 2022 Gloo crashes), so the name is resolved here first.
absl::Status CheckResolvable(const std::string& hostname, int rank) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(hostname.c_str(), nullptr, &hints, &result);
  if (result != nullptr) freeaddrinfo(result);
  if (rc != 0 || result == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": cannot resolve the Gloo hostname '", hostname,
                     "': ", rc != 0 ? gai_strerror(rc) : "no address"));
  }
  return absl::OkStatus();
}

std::string JoinKey(int rank) { return absl::StrCat("gloo_joined/", rank); }

// Protocol step 1: announce this rank and wait for all others. DeadlineExceeded names
// the ranks whose keys never appeared.
absl::Status Join(Store* store, const ProcessGroupOptions& options) {
  const int rank = options.rank;
  absl::Status status = store->Set(JoinKey(rank), absl::StrCat(options.world_size));
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("rank ", rank,
                                                    ": rendezvous: cannot announce "
                                                    "this rank in the store: ",
                                                    status.message()));
  }
  std::vector<std::string> keys;
  for (int r = 0; r < options.world_size; ++r) keys.push_back(JoinKey(r));
  status = store->Wait(keys, options.timeout);
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    // Find out who is missing (the keys that still do not exist).
    std::vector<int> missing;
    for (int r = 0; r < options.world_size; ++r) {
      if (!store->Get(JoinKey(r), absl::Milliseconds(1)).ok()) missing.push_back(r);
    }
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", rank, ": rendezvous timed out after ",
                     absl::FormatDuration(options.timeout), ": rank(s) ",
                     missing.empty() ? "?" : absl::StrJoin(missing, ", "), " of ",
                     options.world_size, " never joined"));
  }
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("rank ", rank,
                                                    ": rendezvous: waiting for the "
                                                    "other ranks failed: ",
                                                    status.message()));
  }
  // Everyone is here: check they agree on the world size.
  for (int r = 0; r < options.world_size; ++r) {
    absl::StatusOr<std::string> theirs = store->Get(JoinKey(r), options.timeout);
    if (!theirs.ok()) {
      return absl::Status(
          theirs.status().code(),
          absl::StrCat("rank ", rank, ": rendezvous: ", theirs.status().message()));
    }
    if (*theirs != absl::StrCat(options.world_size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, ": rendezvous: rank ", r, " runs with world size ",
                       *theirs, ", this rank with ", options.world_size));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// The rendezvous is kept in one function (about 100 lines): its steps (context, full
// mesh, address publication, direct pairs) must run in this order on every rank, and
// each failure names the step it happened in.
absl::StatusOr<std::unique_ptr<ProcessGroup>> NewGlooProcessGroup(
    Store* store, const ProcessGroupOptions& options) {
  const int rank = options.rank;
  RINGSIDE_RETURN_IF_ERROR(ValidateProcessGroupOptions(store, options));

  if (options.world_size == 1) {
    // Nothing to connect: every collective is a local copy (or nothing).
    return std::unique_ptr<ProcessGroup>(new GlooProcessGroup(options, nullptr, nullptr, {}, nullptr, nullptr));
  }

  if (absl::Status status = CheckResolvable(options.hostname, rank); !status.ok()) {
    return status;
  }

  // Step 1: join.
  if (absl::Status status = Join(store, options); !status.ok()) return status;

  // Step 2: the TCP device (listening on options.hostname) and the full mesh.
  ScopedSigpipeBlock no_sigpipe;
  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (...) {
    const absl::Status status = StatusFromException(
        std::current_exception(), rank,
        absl::StrCat("creating the TCP device on '", options.hostname, "'"),
        options.timeout);
    // A bad address is the caller's, not the network's.
    return absl::Status(status.code() == absl::StatusCode::kInternal
                            ? absl::StatusCode::kInvalidArgument
                            : status.code(),
                        status.message());
  }

  GlooStoreAdapter adapter(store, options.timeout);
  std::shared_ptr<gloo::rendezvous::Context> context;
  try {
    context = std::make_shared<gloo::rendezvous::Context>(rank, options.world_size);
    // Bounds the store waits and TCP connects of connectFullMesh, and is the default
    // timeout of every operation on the pairs (halving-doubling uses it).
    context->setTimeout(
        std::chrono::milliseconds(absl::ToInt64Milliseconds(options.timeout)));
    context->connectFullMesh(adapter, device);
  } catch (...) {
    const absl::Status store_error = adapter.first_error();
    if (!store_error.ok()) {
      return absl::Status(
          store_error.code(),
          absl::StrCat("rank ", rank, ": rendezvous (connect full mesh) failed: ",
                       store_error.message()));
    }
    return StatusFromException(std::current_exception(), rank,
                               "rendezvous (connect full mesh)", options.timeout);
  }

  // Step 2, continued: publish this rank's end of each connection, so that every rank
  // can map the address in a transport error back to the rank that went away.
  std::vector<std::pair<std::string, int>> peer_addresses;
  if (options.world_size > 1) {
    try {
      for (int peer = 0; peer < options.world_size; ++peer) {
        if (peer == rank) continue;
        RINGSIDE_RETURN_IF_ERROR(store->Set(absl::StrCat("pair_address/", rank, "/", peer),
                                            context->getPair(peer)->address().str()));
      }
      for (int peer = 0; peer < options.world_size; ++peer) {
        if (peer == rank) continue;
        absl::StatusOr<std::string> address =
            store->Get(absl::StrCat("pair_address/", peer, "/", rank), options.timeout);
        if (!address.ok()) {
          return absl::Status(address.status().code(),
                              absl::StrCat("rank ", rank, ": rendezvous (pair addresses) failed: ",
                                           address.status().message()));
        }
        peer_addresses.emplace_back(*address, peer);
      }
    } catch (...) {
      return StatusFromException(std::current_exception(), rank,
                                 "rendezvous (pair addresses)", options.timeout);
    }
  }
  // Step 3: the doublings' own connections, only if one of them may run.
  std::unique_ptr<TcpPairs> pairs;
  if (MayRunRecursiveDoubling(options.algorithm, options.world_size) ||
      options.algorithm == AllReduceAlgorithm::kHalvingDoubling) {
    absl::StatusOr<std::unique_ptr<TcpPairs>> connected =
        TcpPairs::Connect(store, rank, options.world_size, options.hostname, options.timeout);
    if (!connected.ok()) {
      return absl::Status(connected.status().code(),
                          absl::StrCat("rank ", rank, ": rendezvous (direct TCP pairs) failed: ",
                                       connected.status().message()));
    }
    pairs = *std::move(connected);
  }
  return std::unique_ptr<ProcessGroup>(new GlooProcessGroup(options, std::move(device),
                                                            std::move(context),
                                                            std::move(peer_addresses), store,
                                                            std::move(pairs)));
}

}  // namespace ringside
