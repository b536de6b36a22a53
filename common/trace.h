// A Chrome trace-event writer (the JSON array format that chrome://tracing and
// Perfetto open). One file per process; one process track (pid = rank) with a thread
// track per activity (compute, communication, ...), and one complete ("X") event per
// phase. Timestamps are wall-clock microseconds, so files of several processes of one
// run line up when loaded together.
#ifndef RINGSIDE_COMMON_TRACE_H_
#define RINGSIDE_COMMON_TRACE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ringside {

// Wall-clock time in microseconds since the Unix epoch.
int64_t NowMicros();

// Thread-safe.
class TraceWriter {
 public:
  // Creates `path`, names the process track `process_name` (pid = `pid`).
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Open(const std::string& path,
                                                           int pid,
                                                           const std::string& process_name);
  ~TraceWriter();

  // Names thread track `tid` (e.g. 0 "compute", 1 "comm").
  void NameTrack(int tid, const std::string& name);
  // A span [start_us, start_us + dur_us) named `name` on track `tid`.
  void Span(const std::string& name, int tid, int64_t start_us, int64_t dur_us);
  // Terminates the JSON array and closes the file; returns the first write error.
  absl::Status Close();

 private:
  TraceWriter(std::string path, FILE* file, int pid)
      : path_(std::move(path)), pid_(pid), file_(file) {}
  void WriteEvent(const std::string& json) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const int pid_;
  absl::Mutex mu_;
  FILE* file_ ABSL_GUARDED_BY(mu_);
  bool first_ ABSL_GUARDED_BY(mu_) = true;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_TRACE_H_
