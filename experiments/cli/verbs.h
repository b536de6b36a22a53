// The verbs' entry points, one file each (cli/<verb>.cc); the table in commands.cc
// binds them to their names. See command.h for the contract.
#ifndef RINGSIDE_EXPERIMENTS_CLI_VERBS_H_
#define RINGSIDE_EXPERIMENTS_CLI_VERBS_H_

#include <string>

#include "absl/status/status.h"
#include "experiments/cli/command.h"

namespace ringside {

absl::Status RunTrainVerb(const CommandArgs& args);      // train.cc
absl::Status RunPsServerVerb(const CommandArgs& args);   // ps_roles.cc
absl::Status RunPsWorkerVerb(const CommandArgs& args);   // ps_roles.cc
absl::Status RunLaunchVerb(const CommandArgs& args);     // launch.cc
absl::Status RunCompareVerb(const CommandArgs& args);    // compare.cc
absl::Status RunReportVerb(const CommandArgs& args);     // report.cc
absl::Status RunDemoVerb(const CommandArgs& args);       // demo.cc
absl::Status RunCalibrateVerb(const CommandArgs& args);  // calibrate.cc
absl::Status RunSimulateVerb(const CommandArgs& args);   // simulate.cc
absl::Status RunBenchVerb(const CommandArgs& args);      // bench.cc
absl::Status RunHelpVerb(const CommandArgs& args);       // help.cc
absl::Status RunVersionVerb(const CommandArgs& args);    // help.cc
absl::Status RunTimelineVerb(const CommandArgs& args);   // timeline.cc
absl::Status RunCollectiveVerb(const CommandArgs& args); // collective.cc
absl::Status RunExplainVerb(const CommandArgs& args);    // explain.cc
absl::Status RunLabVerb(const CommandArgs& args);        // lab.cc

// After a local PS / DDP job (train.cc): merges the trace files of `out_dir` into
// out_dir/timeline.json (and .html) and prints where; a run without traces (or no
// `out_dir`) is skipped, a failed merge is a warning on stderr. timeline.cc.
void MergeRunTimeline(const std::string& out_dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_VERBS_H_
