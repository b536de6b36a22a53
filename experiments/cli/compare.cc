// `ringside compare --spec=FILE --out=DIR`: an experiment matrix (matrix/compare.h).
#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/matrix/compare.h"

namespace ringside {

absl::Status RunCompareVerb(const CommandArgs& args) {
  RINGSIDE_RETURN_IF_ERROR(ExpectPositional(args, 0));
  CompareOptions o;
  o.spec_path = absl::GetFlag(FLAGS_spec);
  o.out_dir = absl::GetFlag(FLAGS_out);
  if (o.spec_path.empty()) return absl::InvalidArgumentError("compare needs --spec=FILE");
  if (o.out_dir.empty()) return absl::InvalidArgumentError("compare needs --out=DIR");
  o.summary = stdout;
  return RunCompare(o);
}

}  // namespace ringside
