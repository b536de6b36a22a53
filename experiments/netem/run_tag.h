// What the emulations create in the system (network namespaces, cgroups) is named after
// its creator: a run tag "rs<creator pid, lower-case hex>_<n>" and then "_<part>"
// ("_n3", "_sw", "_probe"). A later run removes what dead creators left (a run killed
// with SIGKILL cannot clean up); these are the shared rules for that.
#ifndef RINGSIDE_EXPERIMENTS_NETEM_RUN_TAG_H_
#define RINGSIDE_EXPERIMENTS_NETEM_RUN_TAG_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside {

// True when `name` is "rs<pid hex>_<n>_<part>" and pid is another process that no
// longer exists (a zombie still exists: its leftovers wait for the next run).
bool CreatedByDeadProcess(absl::string_view name);

// Removes each of `names` with `remove`, in sorted order, trying every one. The names
// removed, or the first failure.
absl::StatusOr<std::vector<std::string>> RemoveEach(
    std::vector<std::string> names, absl::FunctionRef<absl::Status(const std::string&)> remove);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_NETEM_RUN_TAG_H_
