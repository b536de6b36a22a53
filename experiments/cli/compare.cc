// `ringside compare --spec=FILE --out=DIR`: an experiment matrix (matrix/compare.h).
#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/matrix/compare.h"

namespace ringside {

// --spec and --out are checked by the command table (commands.cc) before this runs.
absl::Status RunCompareVerb(const CommandArgs& args) {
  CompareOptions o;
  o.spec_path = absl::GetFlag(FLAGS_spec);
  o.out_dir = absl::GetFlag(FLAGS_out);
  o.summary = stdout;
  return RunCompare(o);
}

}  // namespace ringside
