#include "common/job_env.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

absl::StatusOr<int> IntFromEnv(const char* name) {
  const char* value = std::getenv(name);
  int parsed = 0;
  if (value == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not set (launch with `ringside launch` or torchrun)"));
  }
  if (!absl::SimpleAtoi(value, &parsed)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", value, "' is not an integer"));
  }
  return parsed;
}

}  // namespace

bool InLaunchedJob() { return std::getenv("RANK") != nullptr; }

absl::StatusOr<JobEnv> ReadJobEnv() {
  JobEnv env;
  RINGSIDE_ASSIGN_OR_RETURN(env.rank, IntFromEnv("RANK"));
  RINGSIDE_ASSIGN_OR_RETURN(env.world_size, IntFromEnv("WORLD_SIZE"));
  RINGSIDE_ASSIGN_OR_RETURN(env.master_port, IntFromEnv("MASTER_PORT"));
  // Optional in torchrun's contract for a single node.
  env.local_rank = IntFromEnv("LOCAL_RANK").value_or(env.rank);
  env.local_world_size = IntFromEnv("LOCAL_WORLD_SIZE").value_or(env.world_size);
  const char* addr = std::getenv("MASTER_ADDR");
  env.master_addr = addr != nullptr ? addr : "";
  const char* run_id = std::getenv("RINGSIDE_RUN_ID");
  env.run_id = run_id != nullptr && *run_id != '\0' ? run_id : "default";
  if (env.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("WORLD_SIZE must be >= 1, got ", env.world_size));
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("RANK=", env.rank, " is outside [0, WORLD_SIZE=", env.world_size, ")"));
  }
  if (env.master_addr.empty()) return absl::InvalidArgumentError("MASTER_ADDR is not set");
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("MASTER_PORT=", env.master_port, " is not a port"));
  }
  return env;
}

}  // namespace ringside
