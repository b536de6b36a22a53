// `ringside explain`. Placeholder until its implementation lands (issue #22).
#include "absl/status/status.h"
#include "experiments/cli/verbs.h"

namespace ringside {

absl::Status RunExplainVerb(const CommandArgs& args) {
  return absl::UnimplementedError("ringside explain is not implemented yet");
}

}  // namespace ringside
