// The words after a verb, parsed against that verb's flags (Command::flags) in
// abseil's flag registry, instead of absl::ParseCommandLine (which accepts every flag of
// the binary for every verb and exits by itself on errors).
#ifndef RINGSIDE_EXPERIMENTS_CLI_ARGV_PARSER_H_
#define RINGSIDE_EXPERIMENTS_CLI_ARGV_PARSER_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "experiments/cli/command.h"

namespace ringside {

struct ParsedArgs {
  std::vector<std::string> positional;  // Words that are not flags, in order.
  bool help = false;                    // --help or -h was among the flags.
  std::set<std::string> given;          // Names of the flags the words set.
};

// Parses `words` (argv after the verb) for `command` and sets the flags it names
// (CommandLineFlag::ParseFrom, abseil's own value parsers). Accepts --name=value,
// --name value, --bool, --nobool, a single leading dash as well, and `--` (every word
// after it is positional). Dashes inside a name read as underscores (torchrun's
// --nproc-per-node is --nproc_per_node). With command.program_after_flags, the first
// word that is not a flag and everything after it are positional, untouched.
// Errors are usage errors (command.h), one line each: an unknown flag (with "did you
// mean --X?" when a flag's name is close), a flag of another verb, a flag without its
// value, a bad value. Flags set before an error keep their new values. Not
// thread-safe (flags are process-wide).
absl::StatusOr<ParsedArgs> ParseVerbArgs(const Command& command,
                                         absl::Span<const std::string> words);

// Levenshtein distance between `a` and `b` (insertions, deletions, substitutions).
int EditDistance(absl::string_view a, absl::string_view b);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_ARGV_PARSER_H_
