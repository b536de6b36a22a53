// The NCCL backend of ProcessGroup: GPU collectives on the group's own CUDA stream.
//
// Protocol of NewNcclProcessGroup:
//   1-3. The rendezvous (nccl_rendezvous.h): a GPU made current, the unique id through
//      the store, the communicator, each bounded by the timeout.
//   4. A non-blocking CUDA stream for the collectives and a one-float device scratch
//      buffer for Barrier.
//
// Each collective is enqueued on the stream (in non-blocking mode an enqueue may return
// ncclInProgress: the communicator is then polled until the enqueue finished) and
// followed by a CUDA event. Work::Wait polls the event and the communicator's
// asynchronous error until the collective finished, failed, or ran past its deadline
// (issue time + timeout); on failure or timeout the communicator is aborted
// (ncclCommAbort), which breaks the group: later collectives fail at once with the
// first error.
//
// Bytes (Work::bytes, total_bytes): NCCL exposes no traffic counters, so each collective
// reports what NCCL's ring algorithm moves for it on this rank (NcclRingBytes), credited
// to the group's total once the collective finished. An estimate, not a measurement:
// NCCL may pick a tree or another channel layout.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cuda_check.h"
#include "common/status_macros.h"
#include "common/wire_format.h"
#include "ddp_ring/nccl_process_group.h"
#include "ddp_ring/nccl_rendezvous.h"
#include "ddp_ring/rank_monitor.h"

namespace ringside {
namespace {

ncclRedOp_t ToNccl(ReduceOp op) { return op == ReduceOp::kAverage ? ncclAvg : ncclSum; }

// The communicator and its health, shared by the group and its Works (a Work may
// outlive the group). Thread-safe.
class NcclShared {
 public:
  NcclShared(int rank, ncclComm_t comm) : rank_(rank), comm_(comm) {}

  absl::Mutex mu;
  // Bytes of the finished collectives (NcclWork adds them; total_bytes reads them).
  std::atomic<int64_t> sent{0};
  std::atomic<int64_t> received{0};

  ncclComm_t comm() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return comm_; }
  const absl::Status& broken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return broken_; }

  // The group's liveness monitor; null once the group is destroyed. A Work copies it
  // under `mu` and diagnoses outside it (Diagnose blocks for a few intervals).
  std::shared_ptr<RankMonitor> monitor ABSL_GUARDED_BY(mu);

  // Replaces the recorded first failure `original` by `explained` (the same failure,
  // with the lost ranks named), so later collectives report the names too.
  void Explain(const absl::Status& original, const absl::Status& explained)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (broken_ == original) broken_ = explained;
  }

  // Records the group's first failure and aborts the communicator (which frees it and
  // makes its pending kernels return).
  void Break(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (broken_.ok()) broken_ = status;
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);  // Its own failure leaves nothing more to do.
      comm_ = nullptr;
    }
  }

  // Orderly teardown by the group's destructor: finalize (flushing issued work, at
  // most `timeout`), then destroy; abort if that fails.
  void Close(absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (comm_ == nullptr) return;
    absl::Status status = broken_;
    if (status.ok()) {
      const ncclResult_t rc = ncclCommFinalize(comm_);
      if (rc != ncclSuccess && rc != ncclInProgress) {
        status = NcclError(rc, "ncclCommFinalize", __FILE__, __LINE__, rank_);
      } else {
        status = AwaitCommReady(comm_, absl::Now() + timeout, rank_, "ncclCommFinalize");
      }
    }
    if (status.ok() && ncclCommDestroy(comm_) == ncclSuccess) {
      comm_ = nullptr;
      if (broken_.ok()) {
        broken_ = absl::CancelledError(
            absl::StrCat("rank ", rank_, ": NCCL process group destroyed"));
      }
      return;
    }
    Break(status.ok() ? absl::CancelledError(absl::StrCat(
                            "rank ", rank_, ": NCCL process group destroyed"))
                      : status);
  }

 private:
  const int rank_;
  ncclComm_t comm_ ABSL_GUARDED_BY(mu);
  absl::Status broken_ ABSL_GUARDED_BY(mu);
};

class NcclWork : public Work {
 public:
  // Already finished (trivial, invalid or failed-at-issue collectives).
  explicit NcclWork(absl::Status status) : done_(true), status_(std::move(status)) {}

  // Tracks `event`, recorded on the group's stream after the collective `name`.
  NcclWork(std::shared_ptr<NcclShared> shared, cudaEvent_t event, std::string name,
           int64_t seq, int rank, int device, absl::Time deadline, absl::Duration timeout,
           CollectiveBytes bytes)
      : bytes_(bytes),
        shared_(std::move(shared)),
        event_(event),
        name_(std::move(name)),
        seq_(seq),
        rank_(rank),
        device_(device),
        deadline_(deadline),
        timeout_(timeout) {}

  ~NcclWork() override {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }

  absl::Status Wait() override {
    absl::MutexLock lock(&mu_);
    while (!done_) {
      if (Poll()) break;
      absl::SleepFor(kNcclPollInterval);
    }
    return status_;
  }

  bool IsCompleted() override {
    absl::MutexLock lock(&mu_);
    return done_ || Poll();
  }

  // Consumer side of the stream contract (process_group.h): `ops`' stream waits for
  // the collective's completion event; the host goes on at once.
  absl::Status OrderBefore(Ops* ops) override {
    if (event_ == nullptr) return Wait();  // Finished at issue (trivial or failed).
    if (ops == nullptr || ops->kind() != DeviceKind::kCuda || ops->native_stream() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank_, ": ", name_, ": NCCL results can only be ordered before CUDA ops"));
    }
    absl::Status status;
    if (cudaError_t err = cudaSetDevice(device_); err != cudaSuccess) {
      status = CudaError(err, "cudaSetDevice", __FILE__, __LINE__, rank_);
    } else if (cudaError_t err = cudaStreamWaitEvent(
                   static_cast<cudaStream_t>(ops->native_stream()), event_, 0);
               err != cudaSuccess) {
      status = CudaError(err, "cudaStreamWaitEvent", __FILE__, __LINE__, rank_);
    }
    if (!status.ok()) {
      absl::MutexLock lock(&shared_->mu);
      shared_->Break(status);
      return Annotated(status);
    }
    return absl::OkStatus();
  }

  CollectiveBytes bytes() const override { return bytes_; }

 private:
  // One look at the collective; true (with done_ and status_ set) once it finished,
  // failed or is late. A failure this collective is the first to see aborts the
  // communicator (which makes the peers' collectives fail too, and lets kernels queued
  // behind this one run) and is then explained by the rank monitor, naming the ranks
  // that were lost or stuck.
  bool Poll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const cudaError_t query = cudaEventQuery(event_);
    if (query == cudaSuccess) return Finish(absl::OkStatus());
    absl::Status failure;
    std::shared_ptr<RankMonitor> monitor;
    {
      absl::MutexLock lock(&shared_->mu);
      if (query != cudaErrorNotReady) {
        failure = Annotated(CudaError(query, "cudaEventQuery", __FILE__, __LINE__, rank_));
      } else if (!shared_->broken().ok()) {
        // An earlier failure (explained where it was first seen).
        return Finish(Annotated(shared_->broken()));
      } else {
        ncclResult_t async_error = ncclSuccess;
        const ncclResult_t rc = ncclCommGetAsyncError(shared_->comm(), &async_error);
        if (rc != ncclSuccess) async_error = rc;
        if (async_error != ncclSuccess && async_error != ncclInProgress) {
          failure = Annotated(
              NcclError(async_error, "ncclCommGetAsyncError", __FILE__, __LINE__, rank_));
        } else if (absl::Now() > deadline_) {
          failure = absl::DeadlineExceededError(
              absl::StrCat("rank ", rank_, ": ", name_, " timed out after ",
                           absl::FormatDuration(timeout_), "; communicator aborted"));
        } else {
          return false;
        }
      }
      shared_->Break(failure);
      monitor = shared_->monitor;
    }
    if (monitor != nullptr) {
      const std::string lost = monitor->Diagnose(seq_);
      if (!lost.empty()) {
        const absl::Status explained(failure.code(),
                                     absl::StrCat(failure.message(), "; ", lost));
        absl::MutexLock lock(&shared_->mu);
        shared_->Explain(failure, explained);
        failure = explained;
      }
    }
    return Finish(failure);
  }

  absl::Status Annotated(const absl::Status& status) const {
    if (absl::StartsWith(status.message(), absl::StrCat("rank ", rank_, ": ", name_))) {
      return status;
    }
    return absl::Status(status.code(), absl::StrCat("rank ", rank_, ": ", name_,
                                                    " failed: ", status.message()));
  }

  bool Finish(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shared_ != nullptr) {
      shared_->sent += bytes_.sent;
      shared_->received += bytes_.received;
    }
    status_ = std::move(status);
    done_ = true;
    return true;
  }

  const CollectiveBytes bytes_;
  const std::shared_ptr<NcclShared> shared_;
  cudaEvent_t const event_ = nullptr;
  const std::string name_;
  const int64_t seq_ = -1;
  const int rank_ = -1;
  const int device_ = 0;
  const absl::Time deadline_;
  const absl::Duration timeout_;

  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// What NCCL moves on `rank` for a collective of `kind` over n floats per rank (n floats
// in total for broadcast and reduce), each direction. Its ring: all-reduce
// 2 (w - 1) / w x n, all-gather and reduce-scatter (w - 1) x n; broadcast n, except that
// the root receives nothing and its ring predecessor sends nothing; reduce the same
// chain reversed: n, except that the root sends nothing and its ring successor
// receives nothing (rings assumed in rank order). Scatter, gather and all-to-all are
// sends and receives (NcclProcessGroup::Grouped): the root sends (scatter) or receives
// (gather) (w - 1) x n and every other rank receives or sends n; all-to-all (w - 1) x n
// each way. A rank's transfer to itself is not counted.
CollectiveBytes NcclRingBytes(absl::string_view kind, int64_t n, int rank, int world, int root) {
  const int64_t bytes = n * static_cast<int64_t>(sizeof(float));
  if (world < 2) return {};
  if (kind == "all_reduce" || kind == "barrier") {
    const int64_t each = 2 * (world - 1) * bytes / world;
    return {each, each};
  }
  if (kind == "broadcast") {
    return {rank == (root + world - 1) % world ? 0 : bytes, rank == root ? 0 : bytes};
  }
  if (kind == "reduce") {
    return {rank == root ? 0 : bytes, rank == (root + 1) % world ? 0 : bytes};
  }
  if (kind == "scatter") return {rank == root ? (world - 1) * bytes : 0, rank == root ? 0 : bytes};
  if (kind == "gather") return {rank == root ? 0 : bytes, rank == root ? (world - 1) * bytes : 0};
  return {(world - 1) * bytes, (world - 1) * bytes};  // all_gather, reduce_scatter, all_to_all
}

// Runs `body` (ncclSend and ncclRecv calls) between ncclGroupStart and ncclGroupEnd, so
// that NCCL schedules them together (no deadlock whatever their order). The group is
// closed even when `body` fails; the first error is returned. In non-blocking mode
// ncclGroupEnd may return ncclInProgress: the caller then polls the communicator.
ncclResult_t Grouped(const std::function<ncclResult_t()>& body) {
  const ncclResult_t start = ncclGroupStart();
  if (start != ncclSuccess) return start;
  const ncclResult_t calls = body();
  const ncclResult_t end = ncclGroupEnd();
  if (calls != ncclSuccess && calls != ncclInProgress) return calls;
  return end;
}

std::shared_ptr<Work> CompletedWork(absl::Status status) {
  return std::make_shared<NcclWork>(std::move(status));
}

class NcclProcessGroup : public ProcessGroup {
 public:
  NcclProcessGroup(const ProcessGroupOptions& options, std::shared_ptr<NcclShared> shared,
                   cudaStream_t stream, float* scratch, std::shared_ptr<RankMonitor> monitor)
      : monitor_(std::move(monitor)),
        rank_(options.rank),
        world_size_(options.world_size),
        device_(options.cuda_device),
        timeout_(options.timeout),
        shared_(std::move(shared)),
        stream_(stream),
        scratch_(scratch),
        emulated_(!options.nccl_host_id.empty()) {}

  ~NcclProcessGroup() override {
    {
      absl::MutexLock lock(&shared_->mu);
      cudaSetDevice(device_);
      shared_->Close(timeout_);
      shared_->monitor.reset();
    }
    if (producer_event_ != nullptr) cudaEventDestroy(producer_event_);
    cudaStreamDestroy(stream_);
    cudaFree(scratch_);
  }

  bool emulated() const override { return emulated_; }

  // Producer side of the stream contract (process_group.h). One event, re-recorded at
  // each issue: cudaStreamWaitEvent waits for its most recent record at the time of
  // the call, so the event can be reused at once.
  absl::Status OrderAfter(Ops* ops) override {
    if (ops == nullptr || ops->kind() != DeviceKind::kCuda || ops->native_stream() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank_, ": the nccl backend reduces GPU memory; the model computes on ",
          ops == nullptr ? std::string("nothing") : ops->name(), " (use --device=cuda)"));
    }
    if (ops->name() != absl::StrCat("cuda:", device_)) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": the model computes on ",
                                                     ops->name(), ", the NCCL group on cuda:",
                                                     device_));
    }
    RINGSIDE_CUDA_RETURN_IF_ERROR(rank_, cudaSetDevice(device_));
    if (producer_event_ == nullptr) {
      RINGSIDE_CUDA_RETURN_IF_ERROR(
          rank_, cudaEventCreateWithFlags(&producer_event_, cudaEventDisableTiming));
    }
    producer_ = static_cast<cudaStream_t>(ops->native_stream());
    return absl::OkStatus();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "nccl"; }
  CollectiveBytes total_bytes() const override {
    return {shared_->sent.load(), shared_->received.load()};
  }

  std::shared_ptr<Work> AllReduce(float* data, int64_t n, ReduceOp op) override {
    return Launch("all_reduce", data, n, /*root=*/0, [=](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllReduce(data, data, n, ncclFloat, ToNccl(op), comm, stream);
    });
  }

  std::shared_ptr<Work> AllReduceOnWire(float* data, int64_t n, ReduceOp op, WireFormat format) override {
    if (format == WireFormat::kFp32) return AllReduce(data, n, op);
    return CompletedWork(absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, ": all_reduce in ", WireFormatName(format),
        " runs on the gloo backend only (--compress with --backend=nccl is not wired in yet)")));
  }

  std::shared_ptr<Work> Broadcast(float* data, int64_t n, int root) override {
    if (!ValidRoot(root)) return BadRoot("broadcast", root);
    return Launch("broadcast", data, n, root, [=](ncclComm_t comm, cudaStream_t stream) {
      return ncclBroadcast(data, data, n, ncclFloat, root, comm, stream);
    });
  }

  std::shared_ptr<Work> AllGather(const float* in, int64_t n, float* out) override {
    if (n > 0 && out == nullptr) return NullBuffer("all_gather");
    return Launch("all_gather", in, n, /*root=*/0, [=](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllGather(in, out, n, ncclFloat, comm, stream);
    });
  }

  std::shared_ptr<Work> ReduceScatter(const float* in, float* out, int64_t n,
                                      ReduceOp op) override {
    if (n > 0 && out == nullptr) return NullBuffer("reduce_scatter");
    return Launch("reduce_scatter", in, n, /*root=*/0, [=](ncclComm_t comm, cudaStream_t stream) {
      return ncclReduceScatter(in, out, n, ncclFloat, ToNccl(op), comm, stream);
    });
  }

  std::shared_ptr<Work> Reduce(float* data, int64_t n, ReduceOp op, int root) override {
    if (!ValidRoot(root)) return BadRoot("reduce", root);
    // In place: NCCL reads every rank's sendbuff and writes recvbuff on the root only.
    return Launch("reduce", data, n, root, [=](ncclComm_t comm, cudaStream_t stream) {
      return ncclReduce(data, data, n, ncclFloat, ToNccl(op), root, comm, stream);
    });
  }

  // The root sends slice r of `in` to each rank r (itself included: NCCL copies it);
  // every rank receives its slice into `out`.
  std::shared_ptr<Work> Scatter(const float* in, float* out, int64_t n, int root) override {
    if (!ValidRoot(root)) return BadRoot("scatter", root);
    if (n > 0 && rank_ == root && in == nullptr) return NullBuffer("scatter");
    const int rank = rank_, world = world_size_;
    return Launch("scatter", out, n, root, [=](ncclComm_t comm, cudaStream_t stream) {
      return Grouped([&]() -> ncclResult_t {
        if (rank == root) {
          for (int r = 0; r < world; ++r) {
            const ncclResult_t rc =
                ncclSend(in + static_cast<int64_t>(r) * n, n, ncclFloat, r, comm, stream);
            if (rc != ncclSuccess && rc != ncclInProgress) return rc;
          }
        }
        return ncclRecv(out, n, ncclFloat, root, comm, stream);
      });
    });
  }

  // Scatter reversed: every rank sends `in` to the root, which receives slice r of
  // `out` from each rank r (itself included).
  std::shared_ptr<Work> Gather(const float* in, int64_t n, float* out, int root) override {
    if (!ValidRoot(root)) return BadRoot("gather", root);
    if (n > 0 && rank_ == root && out == nullptr) return NullBuffer("gather");
    const int rank = rank_, world = world_size_;
    return Launch("gather", in, n, root, [=](ncclComm_t comm, cudaStream_t stream) {
      return Grouped([&]() -> ncclResult_t {
        if (rank == root) {
          for (int r = 0; r < world; ++r) {
            const ncclResult_t rc =
                ncclRecv(out + static_cast<int64_t>(r) * n, n, ncclFloat, r, comm, stream);
            if (rc != ncclSuccess && rc != ncclInProgress) return rc;
          }
        }
        return ncclSend(in, n, ncclFloat, root, comm, stream);
      });
    });
  }

  // Every rank sends slice r of `in` to rank r and receives rank r's slice into slice r
  // of `out`, for every r (itself included), in one group: NCCL's all-to-all recipe.
  std::shared_ptr<Work> AllToAll(const float* in, float* out, int64_t n) override {
    if (n > 0 && out == nullptr) return NullBuffer("all_to_all");
    const int world = world_size_;
    return Launch("all_to_all", in, n, /*root=*/0, [=](ncclComm_t comm, cudaStream_t stream) {
      return Grouped([&]() -> ncclResult_t {
        for (int r = 0; r < world; ++r) {
          const int64_t at = static_cast<int64_t>(r) * n;
          ncclResult_t rc = ncclSend(in + at, n, ncclFloat, r, comm, stream);
          if (rc != ncclSuccess && rc != ncclInProgress) return rc;
          rc = ncclRecv(out + at, n, ncclFloat, r, comm, stream);
          if (rc != ncclSuccess && rc != ncclInProgress) return rc;
        }
        return ncclSuccess;
      });
    });
  }

  std::shared_ptr<Work> Barrier() override {
    // An all-reduce of one float: completes only once every rank contributed.
    float* scratch = scratch_;
    return Launch("barrier", scratch, 1, /*root=*/0, [=](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllReduce(scratch, scratch, 1, ncclFloat, ncclSum, comm, stream);
    });
  }

 private:
  using Call = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;

  bool ValidRoot(int root) const { return root >= 0 && root < world_size_; }
  std::shared_ptr<Work> BadRoot(absl::string_view op, int root) const {
    return CompletedWork(absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, ": ", op, " root ", root, " is not in [0, ", world_size_, ")")));
  }

  std::shared_ptr<Work> NullBuffer(absl::string_view op) const {
    return CompletedWork(absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": ", op, " with a null buffer")));
  }

  // Validates, enqueues `call` on the stream and records the completion event.
  std::shared_ptr<Work> Launch(absl::string_view kind, const float* ptr, int64_t n, int root,
                               Call call) {
    if (n < 0) {
      return CompletedWork(absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": ", kind, " with negative count ", n)));
    }
    if (n > 0 && ptr == nullptr) return NullBuffer(kind);
    if (n == 0) return CompletedWork(absl::OkStatus());
    const int64_t seq = next_seq_++;
    const std::string name = absl::StrCat(kind, " #", seq);
    cudaEvent_t event = nullptr;
    const absl::Status status = Enqueue(name, call, &event);
    if (!status.ok()) {
      if (event != nullptr) cudaEventDestroy(event);
      return CompletedWork(status);
    }
    if (monitor_ != nullptr) monitor_->NoteIssued(seq);
    return std::make_shared<NcclWork>(shared_, event, name, seq, rank_, device_,
                                      absl::Now() + timeout_, timeout_,
                                      NcclRingBytes(kind, n, rank_, world_size_, root));
  }

  absl::Status Enqueue(const std::string& name, const Call& call, cudaEvent_t* event) {
    absl::MutexLock lock(&shared_->mu);
    if (!shared_->broken().ok()) {
      return absl::Status(shared_->broken().code(),
                          absl::StrCat("rank ", rank_, ": ", name,
                                       " not run: the process group failed earlier: ",
                                       shared_->broken().message()));
    }
    absl::Status status = EnqueueLocked(name, call, event);
    if (!status.ok()) shared_->Break(status);
    return status;
  }

  absl::Status EnqueueLocked(const std::string& name, const Call& call,
                             cudaEvent_t* event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared_->mu) {
    // The issuing thread may not be the one that created the group.
    RINGSIDE_CUDA_RETURN_IF_ERROR(rank_, cudaSetDevice(device_));
    if (producer_ != nullptr) {
      // Stream contract, producer side: the collective waits for the ops enqueued
      // before it (the kernels that wrote its input), on the device.
      RINGSIDE_CUDA_RETURN_IF_ERROR(rank_, cudaEventRecord(producer_event_, producer_));
      RINGSIDE_CUDA_RETURN_IF_ERROR(rank_, cudaStreamWaitEvent(stream_, producer_event_, 0));
    }
    RINGSIDE_NCCL_RETURN_IF_ERROR(rank_, call(shared_->comm(), stream_));
    // Non-blocking communicator: the enqueue may still be in progress.
    absl::Status ready =
        AwaitCommReady(shared_->comm(), absl::Now() + timeout_, rank_, name);
    if (!ready.ok()) return ready;
    RINGSIDE_CUDA_RETURN_IF_ERROR(
        rank_, cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    RINGSIDE_CUDA_RETURN_IF_ERROR(rank_, cudaEventRecord(*event, stream_));
    return absl::OkStatus();
  }

  // The group's monitor (also in shared_, for the Works); its heartbeats stop when
  // the last holder lets go.
  const std::shared_ptr<RankMonitor> monitor_;
  const int rank_;
  const int world_size_;
  const int device_;
  const absl::Duration timeout_;
  const std::shared_ptr<NcclShared> shared_;
  cudaStream_t const stream_;
  float* const scratch_;
  const bool emulated_;
  int64_t next_seq_ = 0;  // Issuing thread only.
  // OrderAfter's stream (borrowed) and the event that orders each collective after it.
  cudaStream_t producer_ = nullptr;
  cudaEvent_t producer_event_ = nullptr;
};

// Protocol step 4: the group's stream and the barrier's scratch float. On failure
// frees what it made (null members) and returns the error.
struct StreamAndScratch {
  cudaStream_t stream = nullptr;
  float* scratch = nullptr;

  void Free() {
    if (scratch != nullptr) cudaFree(scratch);
    if (stream != nullptr) cudaStreamDestroy(stream);
    scratch = nullptr;
    stream = nullptr;
  }
};
absl::Status CreateStreamAndScratch(int rank, StreamAndScratch& made) {
  absl::Status status;
  if (cudaError_t err = cudaStreamCreateWithFlags(&made.stream, cudaStreamNonBlocking);
      err != cudaSuccess) {
    status = CudaError(err, "cudaStreamCreateWithFlags", __FILE__, __LINE__, rank);
  } else if (cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&made.scratch), sizeof(float));
             err != cudaSuccess) {
    status = CudaError(err, "cudaMalloc", __FILE__, __LINE__, rank);
  } else if (cudaError_t err = cudaMemset(made.scratch, 0, sizeof(float)); err != cudaSuccess) {
    status = CudaError(err, "cudaMemset", __FILE__, __LINE__, rank);
  }
  if (!status.ok()) made.Free();
  return status;
}

// Protocol step 5: the liveness monitor (rank_monitor.h), under its own keys of the
// store. The monitor keeps its prefix view alive (the deleter owns it).
absl::StatusOr<std::shared_ptr<RankMonitor>> StartRankMonitor(
    Store* store, const ProcessGroupOptions& options) {
  auto monitor_store = std::shared_ptr<Store>(NewPrefixStore("monitor", store));
  RankMonitor::Options monitor_options;
  monitor_options.rank = options.rank;
  monitor_options.world_size = options.world_size;
  monitor_options.interval = RankMonitorInterval(options.timeout);
  monitor_options.store_host_rank = options.store_host_rank;
  absl::StatusOr<std::unique_ptr<RankMonitor>> started =
      RankMonitor::Start(monitor_store.get(), monitor_options);
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        absl::StrCat("rank ", options.rank, ": cannot start the rank monitor: ",
                                     started.status().message()));
  }
  RankMonitor* raw = started->release();
  return std::shared_ptr<RankMonitor>(raw, [monitor_store](RankMonitor* m) { delete m; });
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessGroup>> NewNcclProcessGroup(
    Store* store, const ProcessGroupOptions& options) {
  RINGSIDE_RETURN_IF_ERROR(ValidateProcessGroupOptions(store, options));
  absl::StatusOr<ncclComm_t> comm = ConnectNccl(store, options);  // Protocol steps 1-3.
  if (!comm.ok()) return comm.status();
  StreamAndScratch made;
  if (absl::Status status = CreateStreamAndScratch(options.rank, made); !status.ok()) {
    ncclCommAbort(*comm);
    return status;
  }
  absl::StatusOr<std::shared_ptr<RankMonitor>> monitor = StartRankMonitor(store, options);
  if (!monitor.ok()) {
    made.Free();
    ncclCommAbort(*comm);
    return monitor.status();
  }
  auto shared = std::make_shared<NcclShared>(options.rank, *comm);
  {
    absl::MutexLock lock(&shared->mu);
    shared->monitor = *monitor;
  }
  return std::unique_ptr<ProcessGroup>(new NcclProcessGroup(
      options, std::move(shared), made.stream, made.scratch, *std::move(monitor)));
}

}  // namespace ringside
