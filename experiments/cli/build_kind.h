// Which build of ringside this is, for `ringside --version`: the only file of the
// command line compiled differently under --config=cuda (so the rest of the tree
// compiles to the same actions in both configurations; docs/build.md).
#ifndef RINGSIDE_EXPERIMENTS_CLI_BUILD_KIND_H_
#define RINGSIDE_EXPERIMENTS_CLI_BUILD_KIND_H_

#include <string>

namespace ringside {

// "CUDA <major>.<minor>" (the CUDA runtime the build compiled against) under
// --config=cuda, "CPU" otherwise.
std::string BuildKind();

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_BUILD_KIND_H_
