// experiments/cli/: the `ringside` command line. Door of the folder.
//   cli.h       (this) RunCli: parse flags, find the verb, run it, one error line
//   command.h   a verb and the command table (commands.cc); verbs.h their entries
//   flags.h     every flag, defined once; the flags -> RunConfig mapping
//   <verb>.cc   one file per verb: train, ps_roles (ps-server, ps-worker), launch,
//               compare, report, demo, calibrate, simulate, bench
#ifndef RINGSIDE_EXPERIMENTS_CLI_CLI_H_
#define RINGSIDE_EXPERIMENTS_CLI_CLI_H_

namespace ringside {

// Runs `ringside <verb> [flags] [words]` to completion and returns the process's exit
// status: 0, or 1 after printing "ringside: error: <message>" on stderr.
int RunCli(int argc, char** argv);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_CLI_H_
