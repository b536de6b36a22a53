#include "experiments/cli/cli.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "experiments/cli/argv_parser.h"
#include "experiments/cli/command.h"
#include "experiments/cli/help.h"

namespace ringside {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Finds the verb `words[0]`, parses the rest against its flags, checks and runs it.
absl::Status Dispatch(const std::vector<std::string>& words) {
  const Command* command = FindCommand(words[0]);
  if (command == nullptr) {
    std::vector<std::string> names;
    std::string closest;
    int closest_distance = 3;  // A suggestion only for a typo (at most 2 edits).
    for (const Command& c : Commands()) {
      names.push_back(c.name);
      if (const int d = EditDistance(words[0], c.name); d < closest_distance) {
        closest = c.name;
        closest_distance = d;
      }
    }
    const std::string hint = closest.empty() ? " " : absl::StrCat("; did you mean '", closest, "'? ");
    return UsageError(absl::StrFormat("unknown command '%s'%s(expected %s)", words[0], hint,
                                      absl::StrJoin(names, ", ")));
  }
  absl::StatusOr<ParsedArgs> parsed =
      ParseVerbArgs(*command, absl::MakeConstSpan(words).subspan(1));
  if (!parsed.ok()) return parsed.status();
  if (parsed->help) {
    absl::PrintF("%s", VerbHelp(*command));
    return absl::OkStatus();
  }
  CommandArgs args;
  args.positional = std::move(parsed->positional);
  args.self_args = words;
  args.flags_given = std::move(parsed->given);
  const int n = static_cast<int>(args.positional.size());
  if (command->max_args >= 0 && n > command->max_args) {
    return UsageError(absl::StrCat("unexpected argument '", args.positional[command->max_args], "' to `",
                                   command->name, "` (see ringside ", command->name, " --help)"));
  }
  if (n < command->min_args) {
    return UsageError(absl::StrCat("`", command->name, "` needs ", command->args, " (see ringside ",
                                   command->name, " --help)"));
  }
  if (command->check != nullptr) {
    if (absl::Status s = command->check(args); !s.ok()) return AsUsageError(s);
  }
  return command->run(args);
}

}  // namespace

int RunCli(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  if (words.empty()) {
    absl::FPrintF(stderr, "%s\nringside: error: no verb given (see the list above)\n", UsageText());
    return kExitUsage;
  }
  if (words[0] == "--help" || words[0] == "-h" || words[0] == "-help") words[0] = "help";
  if (words[0] == "--version" || words[0] == "-version") words[0] = "version";
  if (words[0].size() > 1 && words[0][0] == '-') {
    absl::FPrintF(stderr, "ringside: error: expected a verb before %s (ringside VERB [flags]; see ringside --help)\n",
                  words[0]);
    return kExitUsage;
  }
  absl::Status status = Dispatch(words);
  if (status.ok()) return 0;
  // One line, whatever the message holds.
  absl::FPrintF(stderr, "ringside: error: %s\n", absl::StrReplaceAll(status.message(), {{"\n", "; "}}));
  return IsUsageError(status) ? kExitUsage : kExitFailure;
}

}  // namespace ringside
