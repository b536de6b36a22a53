// `ringside report DIR`: report.md and report.html of a compare directory.
#include "absl/strings/str_format.h"
#include "experiments/cli/verbs.h"
#include "experiments/report/report.h"

namespace ringside {

// The command table (commands.cc) lets exactly one word, DIR, through.
absl::Status RunReportVerb(const CommandArgs& args) {
  absl::Status s = RunReport(args.positional[0]);
  if (s.ok()) absl::PrintF("report: %s/report.html (and report.md)\n", args.positional[0]);
  return s;
}

}  // namespace ringside
