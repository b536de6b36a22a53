// A Chrome trace-event writer (the JSON array format that chrome://tracing and
// Perfetto open). One file per process: one process track (pid) holding thread
// tracks (tid). Each event is a TraceEvent message (trace.proto) printed by
// protobuf's JSON printer, one event per line inside the JSON array. Timestamps are
// wall-clock microseconds, so files of several processes of one run line up when
// loaded together.
//
// Tracks. Every span on one track must be disjoint from, or nested in, every other
// span of that track (Perfetto cannot draw partial overlaps). Spans of one thread in
// program order satisfy that by construction: they go to a fixed track (the training
// thread's is kTrainingTrack). Spans of concurrent activities (several all-reduces or
// push-pulls in flight at once) go through Lane(), which gives each span a track of
// its group where it overlaps nothing.
//
// Categories (`cat`): kCatData (gathering a batch), kCatCompute (forward, backward),
// kCatUpdate (optimizer step), kCatComm (communication work), kCatWait (blocked on
// peers, the network or a shard). Args carry `step` (by default the step set with
// SetStep) and, where they apply, `bytes`, `bucket`, `chunk`, `worker`.
#ifndef RINGSIDE_COMMON_TRACE_H_
#define RINGSIDE_COMMON_TRACE_H_

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ringside {
namespace trace {
class TraceEvent;
}  // namespace trace

// Wall-clock time in microseconds since the Unix epoch.
int64_t NowMicros();

inline constexpr char kCatData[] = "data";
inline constexpr char kCatCompute[] = "compute";
inline constexpr char kCatUpdate[] = "update";
inline constexpr char kCatComm[] = "comm";
inline constexpr char kCatWait[] = "wait";

// The track of the process's main (training or serving) thread.
inline constexpr int kTrainingTrack = 0;

// One numeric argument of an event ("step", "bytes", ...).
struct TraceArg {
  std::string key;
  double value;
};
using TraceArgs = std::vector<TraceArg>;

// A [start_us, end_us) interval of a track, as the nesting check sees it.
struct TraceInterval {
  int64_t start_us = 0;
  int64_t end_us = 0;
};

// True when `a` and `b` are disjoint or one contains the other (the only relations
// spans on one track may have).
bool NestOrDisjoint(const TraceInterval& a, const TraceInterval& b);

// Thread-safe.
class TraceWriter {
 public:
  // Creates (truncates) `path` and names the process track `process_name` (pid =
  // `pid`).
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Open(const std::string& path,
                                                           int pid,
                                                           const std::string& process_name);
  ~TraceWriter();

  // Names thread track `tid` (e.g. kTrainingTrack "training thread").
  void NameTrack(int tid, absl::string_view name);
  // The step that events written from now on carry as args.step unless their args
  // name one; -1 (the start): none.
  void SetStep(int64_t step);
  // A complete span [start_us, start_us + dur_us) named `name` of category `cat` on
  // track `tid`.
  void Span(absl::string_view name, absl::string_view cat, int tid, int64_t start_us,
            int64_t dur_us, const TraceArgs& args = {});
  // A track of group `group` (named after it; further lanes "group 2", "group 3", ...)
  // on which [start_us, end_us) overlaps no span drawn there before through Lane. The
  // first call for a group allocates its tracks after every fixed track (tids from
  // kFirstLaneTid).
  int Lane(absl::string_view group, int64_t start_us, int64_t end_us);
  // Terminates the JSON array and closes the file; returns the first write error.
  absl::Status Close();

  static constexpr int kFirstLaneTid = 100;

 private:
  TraceWriter(std::string path, FILE* file, int pid)
      : path_(std::move(path)), pid_(pid), file_(file) {}
  void WriteMetadata(absl::string_view what, int tid, absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Prints `event` as one line of the array; a failure makes Close fail.
  void WriteEvent(const trace::TraceEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const int pid_;
  absl::Mutex mu_;
  FILE* file_ ABSL_GUARDED_BY(mu_);
  bool first_ ABSL_GUARDED_BY(mu_) = true;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t step_ ABSL_GUARDED_BY(mu_) = -1;
  // Lane groups: per group, (tid, latest end of any span drawn there) per lane.
  std::map<std::string, std::vector<std::pair<int, int64_t>>> lanes_ ABSL_GUARDED_BY(mu_);
  int next_lane_tid_ ABSL_GUARDED_BY(mu_) = kFirstLaneTid;
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_TRACE_H_
