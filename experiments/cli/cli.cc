#include "experiments/cli/cli.h"

#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/cli/command.h"

namespace ringside {
namespace {

absl::Status Dispatch(const std::vector<char*>& words, int argc, char** argv) {
  std::vector<std::string> names;
  for (const Command& c : Commands()) names.push_back(c.name);
  if (words.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing command (", absl::StrJoin(names, ", "), "); see --help"));
  }
  const std::string verb = words[1];
  for (const Command& c : Commands()) {
    if (verb != c.name) continue;
    CommandArgs args;
    for (size_t i = 2; i < words.size(); ++i) args.positional.push_back(words[i]);
    for (int i = 1; i < argc; ++i) args.self_args.push_back(argv[i]);
    return c.run(args);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown command '%s' (expected %s)", verb, absl::StrJoin(names, ", ")));
}

}  // namespace

int RunCli(int argc, char** argv) {
  const std::string usage = UsageText();
  absl::SetProgramUsageMessage(usage);
  std::vector<char*> words = absl::ParseCommandLine(argc, argv);
  absl::Status status = Dispatch(words, argc, argv);
  if (!status.ok()) {
    absl::FPrintF(stderr, "ringside: error: %s\n", status.message());
    return 1;
  }
  return 0;
}

}  // namespace ringside
