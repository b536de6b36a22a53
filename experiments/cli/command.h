// One verb of the `ringside` command line, and the table of all of them. Each verb
// lives in a file of its own (cli/<verb>.cc) and is found here by name: there is no
// if-chain to extend.
//
// Exit statuses and errors (cli.h prints them, one line "ringside: error: <message>"):
//   0  success (also `--help`, `--version`);
//   2  a usage error: unknown verb or flag, a flag of another verb, a bad flag value,
//      a wrong positional word, or an invalid combination found before anything runs.
//      The parser (argv_parser.h) and Command::check report these; a verb reports one
//      by returning UsageError(...) or AsUsageError(status);
//   1  any other error: a failure while running (missing dataset, unreachable peer).
#ifndef RINGSIDE_EXPERIMENTS_CLI_COMMAND_H_
#define RINGSIDE_EXPERIMENTS_CLI_COMMAND_H_

#include <set>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ringside {

// What a verb gets besides the parsed flags (cli/flags.h).
struct CommandArgs {
  // The words after the verb that are not flags, e.g. {"allreduce"} for `bench
  // allreduce`, {"runs/quick"} for `report runs/quick`; for `launch`, the program and
  // its arguments, untouched.
  std::vector<std::string> positional;
  // This process's whole argv[1..] as given (the verb first), for verbs that re-run
  // this binary with the same flags in each process of a job (launch/local_job.h):
  // the child parses them with the same parser.
  std::vector<std::string> self_args;
  // The flags the command line named (by their ABSL_FLAG names: an alias's target,
  // see Command::flags), for verbs whose
  // behaviour differs between a flag left at its default and one given.
  std::set<std::string> flags_given;
};

struct Command {
  const char* name;     // The verb: "train", "ps-server", ...
  const char* summary;  // One line for `ringside --help`.
  const char* usage;    // Its lines of the usage text (each starts "  ringside <verb>").
  // The flags the verb accepts and `ringside VERB --help` lists, by their ABSL_FLAG
  // names, separated by spaces. A name absent from this binary's flag registry is
  // skipped (so the table may name flags that another file defines). "NAME=FLAG" shows
  // the registry's FLAG as --NAME for this verb alone: a verb whose --NAME means
  // something else than another verb's (simulate's --workers is a list) gets a flag of
  // its own type and help text under the common name.
  const char* flags;
  // Flags the verb also accepts but help never shows: the ones ringside passes to its
  // own child processes (e.g. train's --ps_servers) and test hooks.
  const char* hidden_flags;
  // What its positional words are, for the error when they are missing, e.g. "a
  // directory (DIR)"; "" when it takes none.
  const char* args;
  // Positional words the verb takes: [min_args, max_args]; max_args < 0: any number.
  int min_args;
  int max_args;
  // True for `launch`: parsing stops at the first word that is not a flag (or at
  // `--`); that word and everything after it are positional, untouched.
  bool program_after_flags;
  // Checks the parsed flags and words before anything runs; an error is a usage error
  // (exit status 2). May be null.
  absl::Status (*check)(const CommandArgs& args);
  // Runs the verb to completion (blocks). See the top of this file for errors.
  absl::Status (*run)(const CommandArgs& args);
};

// A verb's own one-line meaning of a flag it shares with other verbs. An ABSL_FLAG has
// one description, written for the verb that owns the flag (mostly train's: --out is
// "output directory: metrics.jsonl, ..."); `ringside VERB --help` shows the verb's
// override instead where one exists.
struct FlagHelpOverride {
  const char* verb;  // A Command::name.
  const char* flag;  // An ABSL_FLAG name among that verb's shown flags.
  const char* help;
};

// Every verb, in the order the usage text lists them.
absl::Span<const Command> Commands();

// Every flag-help override (commands.cc), grouped by verb.
absl::Span<const FlagHelpOverride> FlagHelpOverrides();

// What `command`'s help says of `flag`: its override, or "" where the flag's own
// description stands.
absl::string_view FlagHelpFor(const Command& command, absl::string_view flag);

// The verb called `name`, or null.
const Command* FindCommand(absl::string_view name);

// The flag names of `command` as its command line spells them: shown ones, then (with
// `hidden`) hidden ones.
std::vector<std::string> CommandFlagNames(const Command& command, bool hidden);

// The registry flag that `command` reads for --`name` (a name of CommandFlagNames; an
// alias "NAME=FLAG" resolved), or null when the verb does not take it or this binary
// does not define it.
absl::CommandLineFlag* CommandFlag(const Command& command, absl::string_view name, bool hidden);

// A usage error (exit status 2): InvalidArgument with a payload that marks it.
absl::Status UsageError(absl::string_view message);
// `status` marked as a usage error; OK stays OK.
absl::Status AsUsageError(absl::Status status);
// Whether `status` was made by UsageError or AsUsageError.
bool IsUsageError(const absl::Status& status);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_COMMAND_H_
