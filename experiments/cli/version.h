// The version of ringside: named here, once.
#ifndef RINGSIDE_EXPERIMENTS_CLI_VERSION_H_
#define RINGSIDE_EXPERIMENTS_CLI_VERSION_H_

namespace ringside {

inline constexpr char kRingsideVersion[] = "0.20.0";

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_VERSION_H_
