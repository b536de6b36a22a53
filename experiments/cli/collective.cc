// `ringside collective`. Placeholder until its implementation lands (issue #22).
#include "absl/status/status.h"
#include "experiments/cli/verbs.h"

namespace ringside {

absl::Status RunCollectiveVerb(const CommandArgs& args) {
  return absl::UnimplementedError("ringside collective is not implemented yet");
}

}  // namespace ringside
