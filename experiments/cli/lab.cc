// `ringside lab`. Placeholder until its implementation lands (issue #22).
#include "absl/status/status.h"
#include "experiments/cli/verbs.h"

namespace ringside {

absl::Status RunLabVerb(const CommandArgs& args) {
  return absl::UnimplementedError("ringside lab is not implemented yet");
}

}  // namespace ringside
