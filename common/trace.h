// A Chrome trace-event writer (the JSON array format that chrome://tracing and
// Perfetto open). One file per process: one process track (pid) holding thread
// tracks (tid). Each event is a TraceEvent message (trace.proto) printed by
// protobuf's JSON printer, a batch of events per line inside the JSON array.
// Timestamps are wall-clock microseconds, so files of several processes of one run
// line up when loaded together.
//
// Tracks. Every span on one track must be disjoint from, or nested in, every other
// span of that track (Perfetto cannot draw partial overlaps). Spans of one thread in
// program order satisfy that by construction: they go to a fixed track (the training
// thread's is kTrainingTrack). Spans of concurrent activities (several all-reduces or
// push-pulls in flight at once) go through Lane(), which gives each span a track of
// its group where it overlaps nothing.
//
// Categories (`cat`): kCatData (gathering a batch), kCatCompute (forward, backward,
// a shard's aggregation), kCatUpdate (optimizer step), kCatComm (communication work),
// kCatWait (blocked on peers, the network or a shard). Args carry `step` (by default
// the step set with SetStep) and, where they apply, `bytes`, `bucket`, `shard`,
// `chunk`, `worker`.
#ifndef RINGSIDE_COMMON_TRACE_H_
#define RINGSIDE_COMMON_TRACE_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/task_thread.h"
#include "common/trace.pb.h"
#include "google/protobuf/util/type_resolver.h"

namespace ringside {

// Wall-clock time in microseconds since the Unix epoch.
int64_t NowMicros();

// CPU time the calling thread has used, in microseconds (CLOCK_THREAD_CPUTIME_ID):
// unlike wall time it does not grow while the thread waits for a lock or a core.
int64_t ThreadCpuMicros();

// CPU time every thread of this process has used, in microseconds
// (CLOCK_PROCESS_CPUTIME_ID, user and system: the kernel's socket work done in this
// process's system calls included).
int64_t ProcessCpuMicros();

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

// The events of a trace file that a TraceWriter closed (parsed by protobuf's JSON
// parser). NotFound / DataLoss naming the file otherwise.
absl::StatusOr<trace::TraceEventBatch> ReadTraceFile(const std::string& path);

// Thread-safe. Spans cost the caller building a small message: the events are
// printed in batches of kBatchEvents on the writer's own thread, so the training
// thread never waits for the JSON printer (a few microseconds per event). A process
// that dies loses the batch not yet printed, and its file lacks the closing "]"
// (which chrome://tracing and Perfetto tolerate).
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
  // Prints what is pending, terminates the JSON array and closes the file; returns
  // the first write error. Later spans are dropped.
  absl::Status Close();

  static constexpr int kFirstLaneTid = 100;
  // Events per printed batch (one line of the file).
  static constexpr int kBatchEvents = 256;

 private:
  TraceWriter(std::string path, FILE* file, int pid);
  void AddMetadata(absl::string_view what, int tid, absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the pending events to the printer thread (after the previous batch is out).
  void HandOver() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs on printer_: prints `batch` as one line of the array.
  void Print(const trace::TraceEventBatch& batch) ABSL_LOCKS_EXCLUDED(file_mu_);

  const std::string path_;
  const int pid_;
  absl::Mutex mu_;  // Before file_mu_.
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<trace::TraceEventBatch> pending_ ABSL_GUARDED_BY(mu_);
  int64_t step_ ABSL_GUARDED_BY(mu_) = -1;
  // Lane groups: per group, (tid, latest end of any span drawn there) per lane.
  std::map<std::string, std::vector<std::pair<int, int64_t>>> lanes_ ABSL_GUARDED_BY(mu_);
  int next_lane_tid_ ABSL_GUARDED_BY(mu_) = kFirstLaneTid;
  // Run and Wait are called with mu_ held (one caller at a time).
  std::unique_ptr<TaskThread> printer_ ABSL_GUARDED_BY(mu_);

  absl::Mutex file_mu_;
  FILE* file_ ABSL_GUARDED_BY(file_mu_);
  bool first_ ABSL_GUARDED_BY(file_mu_) = true;
  bool failed_ ABSL_GUARDED_BY(file_mu_) = false;
  // Resolves TraceEventBatch for the JSON printer.
  std::unique_ptr<google::protobuf::util::TypeResolver> resolver_ ABSL_GUARDED_BY(file_mu_);
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_TRACE_H_
