// What `ringside --help`, `ringside VERB --help` and `ringside --version` print.
#ifndef RINGSIDE_EXPERIMENTS_CLI_HELP_H_
#define RINGSIDE_EXPERIMENTS_CLI_HELP_H_

#include <string>

#include "experiments/cli/command.h"

namespace ringside {

// Every verb with its one-line summary (the `bench` benchmarks too), then every verb's
// usage lines.
std::string UsageText();

// `command`'s usage lines, summary and flags it shows (name, default, and the verb's
// own description of the flag where the command table has one (FlagHelpFor), else
// the flag's, read from abseil's flag registry; names the registry lacks are skipped).
std::string VerbHelp(const Command& command);

// "ringside <version> (build: CPU)" or "(build: CUDA <major>.<minor>)", a newline.
std::string VersionText();

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_HELP_H_
