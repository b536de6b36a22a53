// Merges every trace file of a run directory (common/output_files.h: trace.json,
// trace.rank<R>[.run<K>].json, trace.shard<S>[.run<K>].json) into one Chrome trace
// (JSON object format: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData":
// {...}}) that Perfetto (ui.perfetto.dev) and chrome://tracing open, plus a small
// self-contained HTML page (timeline.html) that draws it without either.
//
// Tracks. Each input file becomes one process track of its own (a fresh pid, 1, 2, ...
// in the order single, ranks / workers, shards, then by index and run), named "rank 0",
// "worker 1", "shard 0" (" (run K)" for the trace of a resumed run), with a
// process_sort_index; the file's thread tracks keep their tids and names. Timestamps
// are microseconds since the run's earliest event (otherData.time_origin_us holds that
// origin as wall-clock microseconds since the Unix epoch).
//
// Flows (Chrome flow events v1: "s" and "f" with "bp":"e", one id per flow, category
// "flow"), derived after the fact by matching span args; each end lies strictly
// inside a span that has no span nested in it on its track, so it binds to that span
// alone; where an end cannot be found no flow is written:
//   "push -> aggregate"  worker W's "push" (step K, shard S) to shard S's last
//                        "aggregate" / "update" span of (step K, worker W);
//   "aggregate -> pull"  the last "update" of step K on shard S (else W's own
//                        aggregate) that began before W's "pull" (step K, shard S:
//                        the updated chunks arriving) and ended by its end, to it;
//   "ready -> all-reduce" a DDP rank's training-thread span at the bucket's readiness
//                        (args.ready_us where the span carries it, else the
//                        all-reduce's start) to "all-reduce bucket B".
// A flow's start never begins after its end's span (Perfetto orders a flow by its
// spans' starts).
//
// Counters ("C" events on each process): "in flight" (series "bytes": bytes of the
// process's communication in progress: top-level "comm" spans with a "bytes" arg,
// their bytes_sent + bytes_received where given) and "queue" (series "depth": those
// spans in flight, or for a shard's "step" spans their queue_depth arg, the most
// gradient streams the shard served at once in that step).
#ifndef RINGSIDE_EXPERIMENTS_TIMELINE_MERGE_H_
#define RINGSIDE_EXPERIMENTS_TIMELINE_MERGE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringside {

// One trace file: its name (no directory: what tells its owner) and its text.
struct TraceFileText {
  std::string name;
  std::string text;
};

struct MergedTimeline {
  std::string json;   // The merged trace (see above).
  int processes = 0;  // Process tracks (one per input file).
  int threads = 0;    // Thread tracks holding at least one span.
  int spans = 0;
  int flows = 0;
  int counter_events = 0;
  // Input files that lacked their end (a killed process): read up to their last
  // complete batch.
  std::vector<std::string> truncated;
};

// True when `name` is a trace file's name (output_files.h).
bool IsTraceFileName(const std::string& name);

// Merges `files` (any order). InvalidArgument when a name is not a trace file's or
// none is given; DataLoss naming a file that holds no readable event array.
absl::StatusOr<MergedTimeline> MergeTraceFiles(const std::vector<TraceFileText>& files);

// A self-contained HTML page that draws `merged` (the JSON inlined) and counts what it
// drew into <pre id="summary" data-processes data-threads data-spans data-flows
// data-counters data-errors>: what a headless browser's DOM dump shows.
std::string TimelineViewerHtml(const MergedTimeline& merged, const std::string& title);

struct TimelineFiles {
  std::string json_path;
  std::string html_path;
  MergedTimeline merged;
};

// Reads every trace file of `run_dir`, writes the merged trace to `out_path` (default
// run_dir/timeline.json) and the viewer next to it (same name, .html). NotFound when
// the directory holds no trace file.
absl::StatusOr<TimelineFiles> WriteRunTimeline(const std::string& run_dir,
                                               const std::string& out_path = "");

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_TIMELINE_MERGE_H_
