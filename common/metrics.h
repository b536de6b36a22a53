// Per-step metric records written as JSON lines: one StepMetrics (ringside.proto) per
// line, every field present, numbers as JSON numbers (unlike proto3's JSON mapping,
// which quotes 64-bit integers), so jq, pandas and gnuplot read them directly.
#ifndef RINGSIDE_COMMON_METRICS_H_
#define RINGSIDE_COMMON_METRICS_H_

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/ringside.pb.h"

namespace ringside {

// Renders a message of scalar fields as one JSON object on one line, fields in
// declaration order.
std::string ToJsonLine(const google::protobuf::Message& message);

// Parses a line written by ToJsonLine back into `message` (via protobuf's JSON parser).
absl::Status FromJsonLine(const std::string& line, google::protobuf::Message* message);

// Every record of a metrics file written by MetricsWriter, in file order. NotFound
// "cannot read PATH" when missing; DataLoss naming PATH and the line for a record that
// does not parse, except a last line cut short (a killed writer), which is dropped.
absl::StatusOr<std::vector<StepMetrics>> ReadMetricsFile(const std::string& path);

// Appends records to a JSON-lines file. Each record reaches the file (the kernel's
// page cache, which outlives a killed process) before Write returns, so a checkpoint
// written after a step never has that step's record missing from the file. Thread-safe.
class MetricsWriter {
 public:
  // Creates (truncates) `path`; or, when `append` (a resumed run whose first step is
  // not known yet, e.g. a parameter-server shard), keeps it, and at the first Write
  // drops the records of that record's step and later ones (steps a killed attempt
  // ran past the checkpoint, which this run repeats) and any line a kill cut short, as
  // OpenResumed does. Records are assumed to come in step order.
  static absl::StatusOr<std::unique_ptr<MetricsWriter>> Open(const std::string& path,
                                                             bool append);
  // For a run resumed at step `first_step` (its checkpoint's): keeps the records of
  // `path` for steps before it and drops the rest (steps a failed attempt ran past the
  // checkpoint, which this run repeats, and a line cut short by a kill), replacing the
  // file atomically, then appends to it. A missing file is created. The file then holds
  // every step once.
  static absl::StatusOr<std::unique_ptr<MetricsWriter>> OpenResumed(const std::string& path,
                                                                    int64_t first_step);
  ~MetricsWriter();

  absl::Status Write(const StepMetrics& record);
  // Flushes and closes; later writes fail.
  absl::Status Close();

 private:
  MetricsWriter(std::string path, FILE* file, bool truncate_at_first_write)
      : path_(std::move(path)), file_(file), truncate_at_first_write_(truncate_at_first_write) {}

  const std::string path_;
  absl::Mutex mu_;
  FILE* file_ ABSL_GUARDED_BY(mu_);
  bool truncate_at_first_write_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_METRICS_H_
