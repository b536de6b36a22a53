// `ringside lab list` and `ringside lab check N`: the labs of docs/labs/
// (experiments/labs/labs.h), each run small here, saying whether its effect showed.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/labs/labs.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

std::string LabNumbers() {
  std::vector<int> numbers;
  for (const Lab& lab : Labs()) numbers.push_back(lab.number);
  return absl::StrJoin(numbers, ", ");
}

void ListLabs() {
  for (const Lab& lab : Labs()) {
    absl::PrintF("%d  %s\n   %s\n   docs/labs/%02d-%s.md\n", lab.number, lab.title, lab.question,
                 lab.number, lab.slug);
  }
}

absl::Status CheckLab(const Lab& lab, const std::string& out_flag, double node_cpus) {
  LabContext context;
  context.node_cpus = node_cpus;
  RINGSIDE_ASSIGN_OR_RETURN(context.ringside, SelfExePath());
  context.out_dir = out_flag.empty() ? absl::StrCat("runs/lab", lab.number) : out_flag;
  absl::PrintF("lab %d: %s\n%s\nexpected: %s\n", lab.number, lab.title, lab.question, lab.expected);
  std::fflush(stdout);
  absl::StatusOr<LabVerdict> verdict = lab.check(context);
  if (!verdict.ok()) {
    return absl::Status(verdict.status().code(),
                        absl::StrCat("lab ", lab.number, ": ", verdict.status().message()));
  }
  absl::PrintF("%s\n", verdict->effect);
  if (!verdict->not_judged.empty()) {
    absl::PrintF("effect not judged: %s (outputs in %s)\n", verdict->not_judged, context.out_dir);
    return absl::UnavailableError(absl::StrCat("lab ", lab.number, ": this host could not hold the lab's setting: ",
                                               verdict->not_judged, "; the effect is not judged"));
  }
  if (!verdict->shown) {
    absl::PrintF("effect shown: NO\n");
    return absl::FailedPreconditionError(
        absl::StrCat("lab ", lab.number, ": the expected effect did not show (", lab.expected,
                     "); outputs in ", context.out_dir));
  }
  absl::PrintF("effect shown: yes (outputs in %s)\n", context.out_dir);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunLabVerb(const CommandArgs& args) {
  const std::string& what = args.positional[0];
  if (what == "list") {
    if (args.positional.size() > 1) return UsageError("`lab list` takes no number");
    ListLabs();
    return absl::OkStatus();
  }
  if (what != "check") {
    return UsageError(absl::StrCat("unknown lab command '", what, "' (expected list or check N)"));
  }
  if (args.positional.size() < 2) {
    return UsageError(absl::StrCat("`lab check` needs a lab number (", LabNumbers(), ")"));
  }
  int number = 0;
  const Lab* lab = absl::SimpleAtoi(args.positional[1], &number) ? FindLab(number) : nullptr;
  if (lab == nullptr) {
    return UsageError(absl::StrCat("there is no lab '", args.positional[1], "' (labs: ",
                                   LabNumbers(), ")"));
  }
  // --node_cpus: every emulated node of the check at this share instead of the lab's own.
  double node_cpus = 0;
  if (const std::string share = absl::GetFlag(FLAGS_node_cpus); !share.empty()) {
    if (!absl::SimpleAtod(share, &node_cpus) || !(node_cpus > 0) || node_cpus > 64) {
      return UsageError(absl::StrCat("--node_cpus=", share, ": `lab check` takes a number of CPUs per node, "
                                     "e.g. 0.3 (\"\": each lab's own share)"));
    }
  }
  return CheckLab(*lab, absl::GetFlag(FLAGS_out), node_cpus);
}

}  // namespace ringside
