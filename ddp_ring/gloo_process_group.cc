// The Gloo backend of ProcessGroup: CPU collectives over Gloo's TCP transport.
//
// Protocol of NewGlooProcessGroup:
//   1. Join: every rank sets "gloo_joined/<rank>" = its world size and waits (bounded by
//      the timeout) for all world_size join keys, so that a rank that never arrives is
//      reported by number, and a rank started with another world size is refused.
//   2. Connect: a gloo::rendezvous::Context exchanges TCP addresses through the store
//      (GlooStoreAdapter) and connects every pair of ranks (connectFullMesh).
//   3. Only where recursive doubling will run: its own direct TCP connections
//      (TcpPairs, tcp_pairs.h), through the same store.
//   4. Serve: one worker thread per group runs the queued collectives in FIFO order
//      (Gloo's collectives block), each bounded by the timeout. Every rank issues the
//      same collectives in the same order, so the n-th collective carries tag n on all
//      ranks.
//
// Failure model: any Gloo exception becomes a Status (DeadlineExceeded for timeouts,
// Unavailable for a peer that went away, Internal for broken invariants) naming the
// rank, the collective and its sequence number. The first failure breaks the group:
// its connections are closed (so peers fail fast instead of waiting out their
// timeouts, and no late message can land in a buffer its owner got back), and every
// later collective fails at once with that first error.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
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
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
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
#include "common/trace.h"
#include "absl/time/time.h"
#include "ddp_ring/gloo_store_adapter.h"
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/tcp_pairs.h"

namespace ringside {
namespace {

// Slot prefix of ringside's own ring reduce-scatter. Gloo's built-in collectives use
// prefixes 0x01..0x08 (gloo/types.h); any other value keeps the slots apart.
constexpr uint8_t kReduceScatterSlotPrefix = 0x52;

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
  void Complete(absl::Status status) {
    const int64_t now = NowMicros();
    absl::MutexLock lock(&mu_);
    status_ = std::move(status);
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

 private:
  mutable absl::Mutex mu_;
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
      : peer_addresses_(std::move(peer_addresses)),
        store_(store),
        rank_(options.rank),
        world_size_(options.world_size),
        timeout_(options.timeout),
        timeout_ms_(absl::ToInt64Milliseconds(options.timeout)),
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
        } else if (algorithm == AllReduceAlgorithm::kHalvingDoubling &&
                   n <= static_cast<int64_t>(INT_MAX / sizeof(float))) {
          // Recursive halving-doubling (Rabenseifner): reduce-scatter by recursive
          // vector halving, then all-gather by recursive doubling; non-power-of-two
          // world sizes run it in binary blocks. Gloo's (older) algorithm API: the
          // instance allocates its slots and buffers, the same on every rank since
          // every rank constructs it at the same point of the FIFO, and uses the
          // context's timeout for every receive.
          gloo::AllreduceHalvingDoubling<float> algorithm(
              context_, std::vector<float*>{data}, static_cast<int>(n),
              gloo::ReductionFunction<float>::sum);
          algorithm.run();
        } else {
          // Gloo's ring: reduce-scatter around the ring, then all-gather around it,
          // pipelined in segments. Also the fallback for halving-doubling on more
          // than INT_MAX bytes, which its int byte count cannot describe.
          gloo::AllreduceOptions opts(context_);
          opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
          opts.setOutput(data, static_cast<size_t>(n));
          opts.setReduceFunction(
              static_cast<void (*)(void*, const void*, const void*, size_t)>(
                  &gloo::sum<float>));
          opts.setTag(tag);
          opts.setTimeout(timeout_ms_);
          gloo::allreduce(opts);
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
      // Binomial tree rooted at `root`, in place on every rank.
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(data, static_cast<size_t>(n));
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(timeout_ms_);
      gloo::broadcast(opts);
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
      // Ring all-gather; it first copies `in` into this rank's slice of `out` unless
      // the input already is that slice.
      gloo::AllgatherOptions opts(context_);
      if (in != mine) opts.setInput(const_cast<float*>(in), static_cast<size_t>(n));
      opts.setOutput(out, static_cast<size_t>(n) * world_size_);
      opts.setTag(tag);
      opts.setTimeout(timeout_ms_);
      gloo::allgather(opts);
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

  std::shared_ptr<Work> Barrier() override {
    return Enqueue("barrier", [this](uint32_t tag) {
      if (world_size_ == 1) return absl::OkStatus();
      // Dissemination barrier: log2(world) rounds of zero-byte messages.
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
      op.work->Complete(RunOp(op));
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
  // an unreachable store means rank 0 (its host) is gone. If every rank checked in,
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
    const std::string store_gone = "0 (it hosts the store, which is gone)";
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
      send->waitSend(timeout_ms_);
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

  // Recursive doubling, ringside's own, over the direct TCP pairs (tcp_pairs.h). With
  // P the largest power of two <= world_size: ranks r >= P first hand their vector to
  // rank r - P, which adds it; in round k = 0 .. lg P - 1 rank r < P swaps its running
  // sum with rank r ^ 2^k and adds the partner's; ranks r < world_size - P finally send
  // the result to rank r + P. Each rank < P sends and receives n floats per round, lg P
  // rounds: at 2 ranks the ring's bytes in one exchange instead of two phases. Both
  // sides of a swap add the same two values (a + b == b + a in IEEE arithmetic), so
  // every rank ends with bit-identical sums. Worker thread only.
  absl::Status RecursiveDoublingAllReduce(float* data, int64_t n, uint32_t tag) {
    const int w = world_size_;
    int p2 = 1;
    while (p2 * 2 <= w) p2 *= 2;
    // Exchange tags: the collective's sequence number and the protocol step, the same
    // on every rank.
    uint64_t step = uint64_t{tag} << 8;
    if (static_cast<int64_t>(scratch_.size()) < n) scratch_.resize(n);
    // Step 1: fold the ranks beyond the largest power of two into the first ones.
    if (rank_ >= p2) {
      RINGSIDE_RETURN_IF_ERROR(Transfer(rank_ - p2, data, n, step, /*send=*/true, /*recv=*/false, /*add=*/false));
    } else if (rank_ < w - p2) {
      RINGSIDE_RETURN_IF_ERROR(Transfer(rank_ + p2, data, n, step, /*send=*/false, /*recv=*/true, /*add=*/true));
    }
    ++step;
    // Step 2: lg P rounds of pairwise swaps among ranks 0 .. P - 1.
    for (int mask = 1; mask < p2; mask *= 2, ++step) {
      if (rank_ < p2) {
        RINGSIDE_RETURN_IF_ERROR(Transfer(rank_ ^ mask, data, n, step, /*send=*/true, /*recv=*/true, /*add=*/true));
      }
    }
    // Step 3: the folded ranks get the result.
    if (rank_ >= p2) {
      return Transfer(rank_ - p2, data, n, step, /*send=*/false, /*recv=*/true, /*add=*/false);
    }
    if (rank_ < w - p2) {
      return Transfer(rank_ + p2, data, n, step, /*send=*/true, /*recv=*/false, /*add=*/false);
    }
    return absl::OkStatus();
  }

  // Sends `data` to `peer` and/or receives n floats from it, both directions at once.
  // With `add` the received floats go to scratch_ and are added into `data` as they
  // arrive, each float only once its own value has been sent; without, they land in
  // `data` directly. Blocks; bounded by the timeout. Timeouts are worded like Gloo's.
  absl::Status Transfer(int peer, float* data, int64_t n, uint64_t step, bool send, bool recv,
                        bool add) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    float* recv_into = add ? scratch_.data() : data;
    int64_t added = 0;
    auto on_progress = [&](size_t sent, size_t received) {
      if (!add) return;
      const int64_t ready = static_cast<int64_t>((send ? std::min(sent, received) : received) /
                                                 sizeof(float));
      for (int64_t i = added; i < ready; ++i) data[i] += recv_into[i];
      added = std::max(added, ready);
    };
    const absl::Status status =
        pairs_->Exchange(peer, step, send ? data : nullptr, send ? bytes : 0,
                         recv ? recv_into : nullptr, recv ? bytes : 0, absl::Now() + timeout_,
                         on_progress);
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
  std::vector<float> scratch_;  // Worker thread only: recursive doubling's receive buffer.
  // Recursive doubling's connections (null unless it runs); used by the worker thread.
  std::unique_ptr<TcpPairs> pairs_;
  absl::Status broken_;    // Worker thread only: the first failure.

  absl::Mutex mu_;
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
  // Step 3: recursive doubling's own connections, only if it will run.
  std::unique_ptr<TcpPairs> pairs;
  if (MayRunRecursiveDoubling(options.algorithm, options.world_size)) {
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
