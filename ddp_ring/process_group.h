// A process group: the collectives a DDP rank needs, asynchronous, each bounded by a
// timeout. Backends, separate targets: Gloo (CPU, TCP; gloo_process_group.h) and NCCL
// (GPU, its own CUDA stream; nccl_process_group.h, --config=cuda builds only); create
// one by name with process_group_factory.h. Like PyTorch's c10d ProcessGroup, minus the
// parts ringside does not use.
#ifndef RINGSIDE_DDP_RING_PROCESS_GROUP_H_
#define RINGSIDE_DDP_RING_PROCESS_GROUP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/ops.h"
#include "common/wire_format.h"
#include "ddp_ring/allreduce_algorithm.h"
#include "ddp_ring/store.h"

namespace ringside {

enum class ReduceOp { kSum, kAverage };

// Bytes one rank moved through its transport: `sent` handed to it, `received` taken
// from it. Gloo group: the payload, counted where ringside's own algorithms hand it to
// the transport or take it from it (message headers excluded; the barrier, Gloo's,
// moves none). NCCL group: an estimate, since NCCL exposes no counters: what NCCL's
// ring algorithm moves for the collective, and for scatter, gather and all-to-all
// (NCCL sends and receives) their payload to and from the other ranks.
struct CollectiveBytes {
  int64_t sent = 0;
  int64_t received = 0;

  CollectiveBytes& operator+=(const CollectiveBytes& other) {
    sent += other.sent;
    received += other.received;
    return *this;
  }
  friend CollectiveBytes operator-(CollectiveBytes a, const CollectiveBytes& b) {
    a.sent -= b.sent;
    a.received -= b.received;
    return a;
  }
  friend bool operator==(const CollectiveBytes& a, const CollectiveBytes& b) {
    return a.sent == b.sent && a.received == b.received;
  }
};

// Handle of one asynchronous collective. Thread-safe.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation finished, failed, or ran past the group's timeout
  // (DeadlineExceeded). A peer that died surfaces as Unavailable naming the operation
  // and, where the transport knows it, the peer's rank. Idempotent.
  virtual absl::Status Wait() = 0;
  // True once Wait() would return without blocking.
  virtual bool IsCompleted() = 0;
  // Wall-clock microseconds (common/trace.h NowMicros) when the backend started and
  // finished executing the operation; 0 while unknown. Valid after Wait() returned.
  virtual int64_t start_us() const { return 0; }
  virtual int64_t end_us() const { return 0; }
  // What this rank sent and received for the operation (CollectiveBytes says how each
  // backend counts). Final once Wait() returned; a failed operation reports what moved
  // before it failed; a local one (world size 1, zero elements) reports zero.
  virtual CollectiveBytes bytes() const { return {}; }
  // Stream ordering, consumer side (see ProcessGroup): every op enqueued on `ops` after
  // this call runs only once the collective is done, without the host waiting for it
  // (NCCL: `ops`' stream waits for the collective's completion event). A failure or a
  // timeout is still only reported by Wait() and IsCompleted(): whoever queued work
  // behind a collective must Wait() for it before blocking on `ops` (Synchronize, a
  // blocking copy, OpsEvent::Wait), so that a dead peer ends in an error, never in a
  // hang (a failed collective aborts the communicator, which lets the kernels queued
  // behind it run). Host-memory backends (Gloo): the same as Wait().
  virtual absl::Status OrderBefore(Ops* ops) { return Wait(); }
};

struct ProcessGroupOptions {
  int rank = 0;
  int world_size = 1;
  absl::Duration timeout = absl::Seconds(60);  // Rendezvous and every collective.
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;  // Gloo only.
  std::string hostname = "127.0.0.1";  // Address this rank listens on (Gloo).
  int cuda_device = 0;                 // NCCL only.
  // NCCL only. Non-empty: this process's NCCL_HOSTID, set before NCCL's first call in
  // the process. NCCL refuses two ranks on one GPU ("Duplicate GPU detected"); ranks
  // that share a GPU and give themselves different host ids are treated as separate
  // hosts and connected over NCCL's socket transport (an emulation of one-GPU nodes on
  // Ethernet: label results so). Process-wide, like every NCCL setting.
  std::string nccl_host_id;
  // NCCL only: the rank whose process hosts the store (-1: none does, e.g. torchrun's
  // agent). NCCL cannot name a lost peer, so the group runs a RankMonitor
  // (rank_monitor.h) through the store, which names it when a collective fails.
  int store_host_rank = 0;
};

// Collectives are issued in the same order on every rank and run in that order (one
// worker thread per group). The buffers belong to the caller and must stay valid and
// untouched until Wait() returns. Pointers are host memory for Gloo, device memory for
// NCCL. Thread-compatible: issue operations from one thread. A negative n, a null
// buffer that the rank reads or writes (n > 0), or a root outside [0, world_size): the
// Work fails with InvalidArgument at once, without communicating. n == 0 completes at
// once.
//
// Stream ordering with the model's Ops (common/ops.h), PyTorch c10d's contract
// (ProcessGroupNCCL.hpp): a device group runs its collectives on its own stream,
// alongside the stream of the ops that compute the model.
//  - Producer: after OrderAfter(ops), each collective starts on the device only once
//    every op enqueued on `ops` before it was issued is done (NCCL: an event recorded on
//    the ops' stream at issue, waited for by the group's stream). The host does not wait,
//    so a bucket's all-reduce can be issued the moment backward has enqueued the
//    kernels that produce its gradients.
//  - Consumer: Work::OrderBefore(ops) queues the ops that read a collective's result
//    (a bucket's optimizer step) behind it, again without the host waiting.
//  - Nothing synchronises the whole device per collective; a training step waits for
//    its collectives (Work::Wait, bounded by the timeout) and then for the device once.
//  - Host-memory groups (Gloo) with the CPU backend, whose ops are done when they
//    return: OrderAfter only checks the backend, OrderBefore is Wait().
//
// Failures: the first failed collective breaks the group (its connections are closed,
// which tells the peers at once); every later one fails fast with that first error.
// The timeout bounds each wait inside a collective, so a Wait can exceed it when
// several collectives are queued behind a stuck one, but never blocks forever.
//
// Destruction: collectives not yet started are cancelled (their Works complete with
// Cancelled); a healthy group then waits, at most min(timeout, 10 s), in a final
// barrier for its peers, so that no rank closes connections a peer still needs.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;

  // data [n] = op over ranks of data [n], in place.
  virtual std::shared_ptr<Work> AllReduce(float* data, int64_t n, ReduceOp op) = 0;
  // AllReduce with every value on the wire in `format` (--compress=fp16|bf16; kFp32 is
  // AllReduce): a sum rounded as the backend's compressed algorithm rounds it, the same
  // on every rank. Gloo runs the compressed ring (collective_algorithms.h) whatever
  // --allreduce says; NCCL fails the Work with InvalidArgument for a 2-byte format (its
  // half-precision all-reduce is not wired in yet).
  virtual std::shared_ptr<Work> AllReduceOnWire(float* data, int64_t n, ReduceOp op,
                                                WireFormat format) = 0;
  // data [n] = root's data [n].
  virtual std::shared_ptr<Work> Broadcast(float* data, int64_t n, int root) = 0;
  // out [world_size * n] = concatenation over ranks (in rank order) of in [n].
  virtual std::shared_ptr<Work> AllGather(const float* in, int64_t n, float* out) = 0;
  // out [n] = op over ranks of in [rank * n, (rank + 1) * n), with in [world_size * n].
  virtual std::shared_ptr<Work> ReduceScatter(const float* in, float* out, int64_t n,
                                              ReduceOp op) = 0;
  // Root's data [n] = op over ranks of data [n], in place. Every rank's data [n] is
  // read; only the root's is written (the other ranks' buffers are left untouched).
  virtual std::shared_ptr<Work> Reduce(float* data, int64_t n, ReduceOp op, int root) = 0;
  // out [n] = root's in [rank * n, (rank + 1) * n), with root's in [world_size * n].
  // `in` is read on the root only (it may be null elsewhere); in and out must not
  // overlap.
  virtual std::shared_ptr<Work> Scatter(const float* in, float* out, int64_t n, int root) = 0;
  // Root's out [world_size * n] = concatenation over ranks (in rank order) of in [n].
  // `out` is written on the root only (it may be null elsewhere); in and out must not
  // overlap.
  virtual std::shared_ptr<Work> Gather(const float* in, int64_t n, float* out, int root) = 0;
  // in [world_size * n] and out [world_size * n]: rank r's out [s * n, (s + 1) * n) =
  // rank s's in [r * n, (r + 1) * n) for every rank s (a transpose of the ranks'
  // slices). in and out must not overlap.
  virtual std::shared_ptr<Work> AllToAll(const float* in, float* out, int64_t n) = 0;
  // Completes once every rank has entered it.
  virtual std::shared_ptr<Work> Barrier() = 0;

  // Stream ordering, producer side (see above): collectives issued from now on wait
  // for the work enqueued on `ops` before them. `ops` is borrowed and must outlive the
  // group's collectives. InvalidArgument when `ops` computes where this group cannot
  // read (Gloo: host memory only, so CPU ops; NCCL: CUDA ops on this group's device).
  virtual absl::Status OrderAfter(Ops* ops) = 0;
  // True when this group's ranks share GPUs and reach each other as emulated nodes
  // (ProcessGroupOptions::nccl_host_id): its timings are an emulation, to be labelled.
  virtual bool emulated() const { return false; }

  // The sum of bytes() over every operation this group has finished (or failed), read
  // at any time from any thread: the group's own traffic counter.
  virtual CollectiveBytes total_bytes() const = 0;
};

// InvalidArgument (naming the rank) for a null store, a rank outside [0, world_size)
// or a non-positive timeout. Shared by the backends.
absl::Status ValidateProcessGroupOptions(const Store* store, const ProcessGroupOptions& options);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_PROCESS_GROUP_H_
