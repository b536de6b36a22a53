// experiments/cli/: the `ringside` command line. Door of the folder.
//   cli.h          (this) RunCli: find the verb, parse its flags, run it, one error line
//   command.h      a verb and the command table (commands.cc), usage errors and exit
//                  statuses; verbs.h their entries
//   argv_parser.h  a verb's words parsed against its own flags (abseil's registry)
//   help.h         `ringside --help`, `ringside VERB --help`, `ringside --version`
//   version.h      the version, named once
//   flags.h        every flag, defined once; the flags -> JobSpec mapping (JobSpecFromFlags)
//   job_flags.h    the job flags' values -> a checked JobSpec (pure: ParseJobSpec)
//   <verb>.cc      one file per verb: train, ps_roles (ps-server, ps-worker), launch,
//                  compare, report, demo, calibrate, simulate, bench
#ifndef RINGSIDE_EXPERIMENTS_CLI_CLI_H_
#define RINGSIDE_EXPERIMENTS_CLI_CLI_H_

namespace ringside {

// Runs `ringside <verb> [flags] [words]` to completion and returns the process's exit
// status (command.h): 0; 2 after a usage error; 1 after any other error. Each error
// is one line "ringside: error: <message>" on stderr. `ringside` alone prints the
// usage on stderr and returns 2.
int RunCli(int argc, char** argv);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_CLI_H_
