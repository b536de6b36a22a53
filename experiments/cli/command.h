// One verb of the `ringside` command line, and the table of all of them. Each verb
// lives in a file of its own (cli/<verb>.cc) and is found here by name: there is no
// if-chain to extend.
#ifndef RINGSIDE_EXPERIMENTS_CLI_COMMAND_H_
#define RINGSIDE_EXPERIMENTS_CLI_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace ringside {

// What a verb gets besides the parsed flags (cli/flags.h).
struct CommandArgs {
  // The words after the verb that are not flags, e.g. {"allreduce"} for `bench
  // allreduce`, {"runs/quick"} for `report runs/quick`, the program for `launch`.
  std::vector<std::string> positional;
  // This process's whole argv[1..] as given, for verbs that re-run this binary with
  // the same flags in each process of a job.
  std::vector<std::string> self_args;
};

struct Command {
  const char* name;   // The verb: "train", "ps-server", ...
  const char* usage;  // Its lines of the usage text (each starts "  ringside <verb>").
  // Runs the verb to completion (blocks). Errors are printed by the caller as one line
  // "ringside: error: <message>".
  absl::Status (*run)(const CommandArgs& args);
};

// Every verb, in the order the usage text lists them.
absl::Span<const Command> Commands();

// The usage text: a summary line and every verb's usage.
std::string UsageText();

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_COMMAND_H_
