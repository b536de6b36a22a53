#include "experiments/cli/help.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "experiments/cli/build_kind.h"
#include "experiments/cli/verbs.h"
#include "experiments/cli/version.h"

namespace ringside {

std::string UsageText() {
  std::string text =
      "ringside: parameter server vs DDP ring, measured.\n\n"
      "usage: ringside VERB [flags] [args]      (ringside VERB --help: its flags)\n\n"
      "verbs:\n";
  for (const Command& c : Commands()) {
    absl::StrAppendFormat(&text, "  %-10s %s\n", c.name, c.summary);
    if (absl::string_view(c.name) == "bench") {
      text +=
          "    step        one process's training step: forward, backward, update\n"
          "    allreduce   the DDP ring's all-reduce over message sizes, nccl-tests style\n"
          "    pushpull    one worker's push-pull rate against one shard over model sizes\n";
    }
  }
  text += "\nexamples:\n";
  for (const Command& c : Commands()) text += c.usage;
  return text;
}

std::string VerbHelp(const Command& command) {
  std::string text = absl::StrCat("usage:\n", command.usage, "\n", command.summary, "\n");
  std::string flags;
  for (const std::string& name : CommandFlagNames(command, /*hidden=*/false)) {
    const absl::CommandLineFlag* flag = CommandFlag(command, name, /*hidden=*/false);
    if (flag == nullptr) continue;  // Defined by a file this binary does not link.
    std::string default_value = flag->DefaultValue();
    if (flag->IsOfType<std::string>()) default_value = absl::StrCat("\"", default_value, "\"");
    const absl::string_view own = FlagHelpFor(command, name);
    absl::StrAppendFormat(&flags, "  --%s (default: %s)\n      %s\n", name, default_value,
                          own.empty() ? flag->Help() : std::string(own));
  }
  if (!flags.empty()) absl::StrAppend(&text, "\nflags (--name=value or --name value; --bool, --nobool):\n", flags);
  return text;
}

std::string VersionText() {
  return absl::StrCat("ringside ", kRingsideVersion, " (build: ", BuildKind(), ")\n");
}

absl::Status RunHelpVerb(const CommandArgs& args) {
  if (args.positional.empty()) {
    absl::PrintF("%s", UsageText());
  } else if (const Command* c = FindCommand(args.positional[0]); c != nullptr) {
    absl::PrintF("%s", VerbHelp(*c));
  } else {
    return UsageError(absl::StrCat("unknown command '", args.positional[0], "'"));
  }
  return absl::OkStatus();
}

absl::Status RunVersionVerb(const CommandArgs&) {
  absl::PrintF("%s", VersionText());
  return absl::OkStatus();
}

}  // namespace ringside
