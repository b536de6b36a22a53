// RankMonitor: the liveness of a job's ranks through its rendezvous store (store.h), for
// backends whose transport cannot name a lost peer: NCCL reports only a generic
// remote/system error, or its collective just never completes. The NCCL twin of the
// Gloo backend's GlooPeerNaming (gloo_peer_naming.h), which checks in after a failure
// instead of beating; both read the store through liveness.h.
//
// Protocol. Every rank runs one monitor, whose thread sets, every `interval`,
//   "heartbeat/<rank>" = "<beat>:<last issued>"
// where <beat> counts 1, 2, ... and <last issued> is the sequence number of the last
// collective the rank issued (NoteIssued; -1 before the first). That is one Set per
// interval per rank, and no reads, while all is well. A rank whose collective failed or
// timed out calls Diagnose(seq): it reads every other rank's record, waits 2 intervals,
// reads them again, and names
//   - the ranks whose beat did not advance: the process is dead, stopped (SIGSTOP) or
//     wedged as a whole;
//   - the ranks that never set their record;
//   - the ranks that are alive but whose last issued collective is below `seq`: stuck
//     before issuing it (a long compute, a deadlock, a rank on another code path);
//   - or, when the store itself does not answer, that it is unreachable (in the
//     launcher's jobs rank 0 hosts it, so rank 0 is then probably gone).
//
// Timing. Diagnose takes 2 intervals plus two rounds of reads, and at most 6 intervals
// even when the store hangs (the reads run on the monitor's thread, and Diagnose stops
// waiting for them after 2 intervals each). A process group whose collectives time out
// after T should pick interval <= T / 8 (e.g. min(T / 8, 1 s), at least 50 ms): a lost
// rank is then named within T + 6 T / 8 < 2 T of the collective's issue.
//
// Keys. All monitors of one group share the "heartbeat/" keys of `store`: give each
// group that runs a monitor a store of its own (NewPrefixStore) if a job has several.
#ifndef RINGSIDE_DDP_RING_RANK_MONITOR_H_
#define RINGSIDE_DDP_RING_RANK_MONITOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ddp_ring/store.h"

namespace ringside {

// The interval a group whose collectives time out after `timeout` should use (see
// Timing above): timeout / 8, clamped to [50 ms, 1 s].
absl::Duration RankMonitorInterval(absl::Duration timeout);

class RankMonitor {
 public:
  struct Options {
    int rank = 0;
    int world_size = 1;
    // Between two beats; also the unit of Diagnose's wait. Positive.
    absl::Duration interval = absl::Milliseconds(250);
    // The rank whose process hosts the store, named when the store is unreachable;
    // -1 when no rank hosts it (e.g. torchrun's agent store).
    int store_host_rank = 0;
  };

  // Validates `options` (InvalidArgument), publishes the first beat (its error, e.g.
  // Unavailable, if that fails) and starts the heartbeat thread. `store` is borrowed:
  // it must outlive the monitor (all Stores are thread-safe).
  static absl::StatusOr<std::unique_ptr<RankMonitor>> Start(Store* store,
                                                            const Options& options);

  // Stops and joins the thread: returns within moments, or, when the store hangs, once
  // the store call in flight returns (bounded by the store's own RPC deadline).
  // Requires that no Diagnose call is running.
  ~RankMonitor();
  RankMonitor(const RankMonitor&) = delete;
  RankMonitor& operator=(const RankMonitor&) = delete;

  // Records `seq` as the sequence number of the last collective this rank issued,
  // published with the next beat. Thread-safe and lock-free; call with increasing seq.
  void NoteIssued(int64_t seq) { last_issued_.store(seq, std::memory_order_relaxed); }

  // Names the ranks that explain a failure of this rank's collective #failed_seq, as one
  // phrase (lists keep the singular "rank", like Gloo's "peer rank 0, 2", so that
  // /rank ([0-9]+, )*R\b/ finds rank R in it), several joined by "; ":
  //   "rank 2 stopped responding (no heartbeat in 500ms)"
  //   "rank 1, 3 never sent a heartbeat"
  //   "rank 1 is alive but never issued collective #17"
  //   "the job's store is unreachable (rank 0, which hosts it, is probably gone)"
  // or "" when every other rank looks healthy (and at once in a world of one). Blocks
  // about 2 intervals, at most 6 (see Timing above). Thread-safe.
  std::string Diagnose(int64_t failed_seq);

 private:
  // One rank's record as read from the store.
  struct Record {
    int64_t beat = 0;
    int64_t last_issued = -1;
  };
  // Every rank's record at one moment (nullopt: the key does not exist or cannot be
  // parsed), or store_ok == false if the store failed to answer.
  struct Snapshot {
    bool store_ok = true;
    std::vector<std::optional<Record>> records;
  };

  RankMonitor(Store* store, const Options& options);

  absl::Status Beat();
  Snapshot ReadAll();
  // Asks the thread for a snapshot taken after this call; nullopt if none arrives
  // within `bound` (the store hangs).
  std::optional<Snapshot> RequestSnapshot(absl::Duration bound);
  std::string StoreUnreachable() const;
  void Loop();

  Store* const store_;
  const Options options_;
  std::atomic<int64_t> last_issued_{-1};
  int64_t beats_ = 0;  // Thread only (after Start's first beat).

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Snapshot requests: the thread serves all pending ones with one ReadAll.
  int64_t reads_requested_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reads_done_ ABSL_GUARDED_BY(mu_) = 0;
  Snapshot latest_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // Started last, by Start.
};

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_RANK_MONITOR_H_
