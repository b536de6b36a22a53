#include "ddp_ring/rank_monitor.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ddp_ring/liveness.h"
#include "ddp_ring/store.h"

namespace ringside {

absl::Duration RankMonitorInterval(absl::Duration timeout) {
  return std::clamp(timeout / 8, absl::Milliseconds(50), absl::Seconds(1));
}
namespace {

std::string HeartbeatKey(int rank) { return absl::StrCat("heartbeat/", rank); }

// "rank 2" / "rank 1, 3": singular even for a list (see Diagnose in the header).
std::string Ranks(const std::vector<int>& ranks) { return absl::StrCat("rank ", JoinRanks(ranks)); }

}  // namespace

absl::StatusOr<std::unique_ptr<RankMonitor>> RankMonitor::Start(Store* store,
                                                                const Options& options) {
  if (store == nullptr) return absl::InvalidArgumentError("rank monitor: null store");
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank monitor: rank ", options.rank,
                                                   " is outside [0, ", options.world_size, ")"));
  }
  if (options.interval <= absl::ZeroDuration() || options.interval == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("rank monitor: interval ",
                                                   absl::FormatDuration(options.interval),
                                                   " is not a positive finite duration"));
  }
  std::unique_ptr<RankMonitor> monitor(new RankMonitor(store, options));
  if (absl::Status status = monitor->Beat(); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat("rank ", options.rank,
                                                    ": cannot publish its heartbeat: ",
                                                    status.message()));
  }
  monitor->thread_ = std::thread([m = monitor.get()] { m->Loop(); });
  return monitor;
}

RankMonitor::RankMonitor(Store* store, const Options& options)
    : store_(store), options_(options) {}

RankMonitor::~RankMonitor() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status RankMonitor::Beat() {
  ++beats_;
  return store_->Set(HeartbeatKey(options_.rank),
                     absl::StrCat(beats_, ":", last_issued_.load(std::memory_order_relaxed)));
}

// Thread: wakes at each beat's time or on a snapshot request, whichever comes first. A
// failed Set is not retried before the next beat's time, so an unreachable store costs
// one call per interval, and nothing is logged (Diagnose is where it gets told).
void RankMonitor::Loop() {
  absl::Time next_beat = absl::Now() + options_.interval;
  while (true) {
    int64_t read_generation = 0;
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || reads_requested_ > reads_done_;
      };
      mu_.AwaitWithDeadline(absl::Condition(&woken), next_beat);
      if (stop_) return;
      if (reads_requested_ > reads_done_) read_generation = reads_requested_;
    }
    if (absl::Now() >= next_beat) {
      Beat().IgnoreError();
      // Fixed cadence; a beat overdue (slow store, descheduled thread) goes out at once.
      next_beat = std::max(next_beat + options_.interval, absl::Now());
    }
    if (read_generation > 0) {
      Snapshot snapshot = ReadAll();
      absl::MutexLock lock(&mu_);
      latest_ = std::move(snapshot);
      reads_done_ = read_generation;
    }
  }
}

// Thread only. Zero-timeout reads (liveness.h): a missing key answers at once.
RankMonitor::Snapshot RankMonitor::ReadAll() {
  const RankRecords read =
      ReadRankRecords(store_, options_.rank, options_.world_size, HeartbeatKey);
  Snapshot snapshot;
  snapshot.store_ok = read.store_ok;
  snapshot.records.resize(options_.world_size);
  if (!read.store_ok) return snapshot;
  for (int r = 0; r < options_.world_size; ++r) {
    if (!read.values[r].has_value()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(*read.values[r], ':');
    Record record;
    if (fields.size() == 2 && absl::SimpleAtoi(fields[0], &record.beat) &&
        absl::SimpleAtoi(fields[1], &record.last_issued)) {
      snapshot.records[r] = record;
    }
  }
  return snapshot;
}

std::optional<RankMonitor::Snapshot> RankMonitor::RequestSnapshot(absl::Duration bound) {
  absl::MutexLock lock(&mu_);
  const int64_t generation = ++reads_requested_;
  auto done = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return reads_done_ >= generation;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), bound)) return std::nullopt;
  return latest_;
}

std::string RankMonitor::StoreUnreachable() const {
  const int host = options_.store_host_rank;
  if (host < 0 || host == options_.rank) return "the job's store is unreachable";
  return absl::StrCat("the job's store is unreachable (rank ", host,
                      ", which hosts it, is probably gone)");
}

std::string RankMonitor::Diagnose(int64_t failed_seq) {
  if (options_.world_size == 1) return "";
  // Each read waits for the thread (perhaps mid-beat) and world_size - 1 quick Gets;
  // one that takes longer than this means the store hangs.
  const absl::Duration read_bound = 2 * options_.interval;
  std::optional<Snapshot> first = RequestSnapshot(read_bound);
  if (!first.has_value() || !first->store_ok) return StoreUnreachable();
  const absl::Time first_at = absl::Now();
  // Two intervals: a live rank beats at least once in them even if its thread runs up
  // to one interval late.
  absl::SleepFor(2 * options_.interval);
  std::optional<Snapshot> second = RequestSnapshot(read_bound);
  if (!second.has_value() || !second->store_ok) return StoreUnreachable();
  const absl::Duration silent = absl::Trunc(absl::Now() - first_at, absl::Milliseconds(10));

  std::vector<int> stopped, never_beat, behind;
  for (int r = 0; r < options_.world_size; ++r) {
    if (r == options_.rank) continue;
    const std::optional<Record>& before = first->records[r];
    const std::optional<Record>& after = second->records[r];
    if (!after.has_value()) {
      // Keys are never deleted: a record that vanished reads as silence too.
      (before.has_value() ? stopped : never_beat).push_back(r);
    } else if (before.has_value() && after->beat == before->beat) {
      stopped.push_back(r);
    } else if (after->last_issued < failed_seq) {
      behind.push_back(r);
    }
  }
  std::vector<std::string> phrases;
  if (!stopped.empty()) {
    phrases.push_back(absl::StrCat(Ranks(stopped), " stopped responding (no heartbeat in ",
                                   absl::FormatDuration(silent), ")"));
  }
  if (!never_beat.empty()) {
    phrases.push_back(absl::StrCat(Ranks(never_beat), " never sent a heartbeat"));
  }
  if (!behind.empty()) {
    phrases.push_back(absl::StrCat(Ranks(behind), behind.size() == 1 ? " is" : " are",
                                   " alive but never issued collective #", failed_seq));
  }
  return absl::StrJoin(phrases, "; ");
}

}  // namespace ringside
