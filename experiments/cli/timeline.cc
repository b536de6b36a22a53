// `ringside timeline --run=DIR [--out=FILE]`: one Perfetto timeline of every process's
// trace in a run directory (experiments/timeline/timeline.h); also run by `train` at
// the end of every local PS / DDP job.
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/timeline/timeline.h"

ABSL_FLAG(std::string, run, "",
          "timeline: the run directory whose trace*.json files to merge (a train --out, or a "
          "compare cell's directory)");

namespace ringside {
namespace {

void PrintMerged(const TimelineFiles& files) {
  const MergedTimeline& m = files.merged;
  absl::PrintF("timeline: %s (%d processes, %d spans, %d flows; open in ui.perfetto.dev), "
               "viewer %s\n",
               files.json_path, m.processes, m.spans, m.flows, files.html_path);
  if (!m.truncated.empty()) {
    absl::PrintF("timeline: read up to where they end (a process died?): %s\n",
                 absl::StrJoin(m.truncated, ", "));
  }
}

}  // namespace

absl::Status RunTimelineVerb(const CommandArgs&) {
  const std::string run = absl::GetFlag(FLAGS_run);
  if (run.empty()) return UsageError("timeline needs --run=DIR");
  absl::StatusOr<TimelineFiles> files = WriteRunTimeline(run, absl::GetFlag(FLAGS_out));
  if (!files.ok()) return files.status();
  PrintMerged(*files);
  return absl::OkStatus();
}

void MergeRunTimeline(const std::string& out_dir) {
  if (out_dir.empty()) return;
  absl::StatusOr<TimelineFiles> files = WriteRunTimeline(out_dir);
  if (files.ok()) {
    PrintMerged(*files);
  } else if (!absl::IsNotFound(files.status())) {
    // The job's result stands; only its timeline is missing.
    absl::FPrintF(stderr, "ringside: warning: no timeline: %s\n", files.status().message());
  }
}

}  // namespace ringside
