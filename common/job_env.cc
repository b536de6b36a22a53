#include "common/job_env.h"

#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

// One launcher's placement variables; nullptr where it exports none.
struct LauncherVars {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr LauncherVars kRankVars = {"RANK/WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                    "LOCAL_WORLD_SIZE"};
// After RANK, in this order (see job_env.h). Slurm's sizes are looked up apart.
constexpr LauncherVars kOtherLaunchers[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH (Hydra)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"PMIx", "PMIX_RANK", "WORLD_SIZE", nullptr, nullptr},
    {"Slurm (srun)", "SLURM_PROCID", nullptr, "SLURM_LOCALID", nullptr},
};
constexpr absl::string_view kSlurm = "Slurm (srun)";

// A variable's value, or nullptr when it is unset or empty.
const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

absl::StatusOr<int> IntFromEnv(const char* name, absl::string_view hint) {
  const char* value = Env(name);
  int parsed = 0;
  if (value == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, " is not set (", hint, ")"));
  if (!absl::SimpleAtoi(value, &parsed)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", value, "' is not an integer"));
  }
  return parsed;
}

bool InSlurmStep() { return Env("SLURM_STEP_ID") != nullptr || Env("SLURM_STEPID") != nullptr; }

// The launcher whose variables place this process, or nullptr.
const LauncherVars* DetectLauncher() {
  if (Env("RANK") != nullptr) return &kRankVars;
  for (const LauncherVars& vars : kOtherLaunchers) {
    if (Env(vars.rank) == nullptr) continue;
    if (vars.name == kSlurm && !InSlurmStep()) continue;  // A batch script, not a task.
    return &vars;
  }
  return nullptr;
}

const char* WorldSizeVar(const LauncherVars& vars) {
  if (vars.name != kSlurm) return vars.world_size;
  return Env("SLURM_STEP_NUM_TASKS") != nullptr ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
}

std::string LauncherName(const LauncherVars& vars) {
  if (&vars != &kRankVars) return vars.name;
  if (Env("RINGSIDE_RUN_ID") != nullptr) return "ringside launch";
  if (Env("TORCHELASTIC_RUN_ID") != nullptr) return "torchrun";
  return vars.name;
}

// Slurm's tasks-per-node list, e.g. "2(x3),1" (three nodes with 2 tasks, one with 1):
// the count on node `node`.
absl::StatusOr<int> TasksOnNode(const char* name, absl::string_view list, int node) {
  int first = 0;  // The first node of the current entry.
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    int tasks = 0, repeat = 1;
    std::vector<absl::string_view> parts = absl::StrSplit(entry, "(x");
    const bool ok = absl::SimpleAtoi(parts[0], &tasks) &&
                    (parts.size() == 1 || (parts.size() == 2 && absl::ConsumeSuffix(&parts[1], ")") &&
                                           absl::SimpleAtoi(parts[1], &repeat)));
    if (!ok) return absl::InvalidArgumentError(absl::StrCat(name, "='", list, "' is not a tasks-per-node list"));
    if (node < first + repeat) return tasks;
    first += repeat;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(name, "='", list, "' lists no node ", node, " (SLURM_NODEID)"));
}

// The first host of a Slurm hostlist: "node[07-09,12],gpu1" -> "node07".
std::string FirstSlurmHost(absl::string_view list) {
  const size_t end = list.find_first_of(",[");
  if (end == absl::string_view::npos || list[end] == ',') return std::string(list.substr(0, end));
  const absl::string_view range = list.substr(end + 1);
  return absl::StrCat(list.substr(0, end), range.substr(0, range.find_first_of("-,]")));
}

// rank, world_size, local_rank, local_world_size from `vars`, checked.
absl::Status ReadPlacement(const LauncherVars& vars, JobEnv* env) {
  const std::string hint = absl::StrCat(env->launcher, " set ", vars.rank);
  RINGSIDE_ASSIGN_OR_RETURN(env->rank, IntFromEnv(vars.rank, "launch with `ringside launch` or torchrun"));
  const char* size_var = WorldSizeVar(vars);
  RINGSIDE_ASSIGN_OR_RETURN(env->world_size, IntFromEnv(size_var, hint));
  if (env->world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(size_var, " must be >= 1, got ", env->world_size));
  }
  if (env->rank < 0 || env->rank >= env->world_size) {
    return absl::InvalidArgumentError(absl::StrCat(vars.rank, "=", env->rank, " is outside [0, ",
                                                   size_var, "=", env->world_size, ")"));
  }
  // Optional: one node by default.
  env->local_rank = env->rank;
  env->local_world_size = env->world_size;
  if (vars.local_rank != nullptr && Env(vars.local_rank) != nullptr) {
    RINGSIDE_ASSIGN_OR_RETURN(env->local_rank, IntFromEnv(vars.local_rank, hint));
  }
  const char* local_size_var = vars.local_world_size;
  if (vars.name == kSlurm) {
    if (const char* list = Env("SLURM_STEP_TASKS_PER_NODE"); list != nullptr) {
      const int node = Env("SLURM_NODEID") != nullptr ? IntFromEnv("SLURM_NODEID", hint).value_or(-1) : 0;
      if (node < 0) return absl::InvalidArgumentError("SLURM_NODEID is not a node number");
      RINGSIDE_ASSIGN_OR_RETURN(env->local_world_size, TasksOnNode("SLURM_STEP_TASKS_PER_NODE", list, node));
    }
    local_size_var = Env("SLURM_STEP_TASKS_PER_NODE") == nullptr ? "SLURM_NTASKS_PER_NODE" : nullptr;
  }
  if (local_size_var != nullptr && Env(local_size_var) != nullptr) {
    RINGSIDE_ASSIGN_OR_RETURN(env->local_world_size, IntFromEnv(local_size_var, hint));
  }
  if (env->local_rank < 0 || env->local_rank >= env->local_world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "local rank ", env->local_rank, " is outside [0, ", env->local_world_size,
        ") (", vars.local_rank, ", ", local_size_var != nullptr ? local_size_var : "tasks per node", ")"));
  }
  return absl::OkStatus();
}

// master_addr and master_port: the environment's, else Slurm's derivation.
absl::Status ReadStoreAddress(bool rank_vars, JobEnv* env) {
  const bool slurm = env->launcher == kSlurm;
  const std::string what = absl::StrCat(
      env->launcher, " does not say where rank 0 runs: export MASTER_ADDR and MASTER_PORT");
  if (const char* addr = Env("MASTER_ADDR"); addr != nullptr) {
    env->master_addr = addr;
  } else if (const char* nodes = slurm ? Env("SLURM_STEP_NODELIST") : nullptr; nodes != nullptr) {
    env->master_addr = FirstSlurmHost(nodes);
  } else if (const char* job_nodes = slurm ? Env("SLURM_JOB_NODELIST") : nullptr; job_nodes != nullptr) {
    env->master_addr = FirstSlurmHost(job_nodes);
  } else {
    return absl::InvalidArgumentError(
        rank_vars ? "MASTER_ADDR is not set" : absl::StrCat("MASTER_ADDR is not set (", what, ")"));
  }
  if (Env("MASTER_PORT") != nullptr || !slurm) {
    RINGSIDE_ASSIGN_OR_RETURN(env->master_port, IntFromEnv("MASTER_PORT", what));
  } else {
    RINGSIDE_ASSIGN_OR_RETURN(int job, IntFromEnv("SLURM_JOB_ID", "needed for MASTER_PORT: or export MASTER_PORT"));
    env->master_port = 20000 + job % 20000;
  }
  if (env->master_port < 1 || env->master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("MASTER_PORT=", env->master_port, " is not a port"));
  }
  return absl::OkStatus();
}

std::string RunId() {
  if (const char* id = Env("RINGSIDE_RUN_ID"); id != nullptr) return id;
  if (const char* id = Env("TORCHELASTIC_RUN_ID"); id != nullptr) return id;
  const char* job = Env("SLURM_JOB_ID");
  const char* step = Env("SLURM_STEP_ID") != nullptr ? Env("SLURM_STEP_ID") : Env("SLURM_STEPID");
  if (job != nullptr && step != nullptr) return absl::StrCat("slurm-", job, ".", step);
  if (const char* ns = Env("PMIX_NAMESPACE"); ns != nullptr) return ns;
  return "default";
}

}  // namespace

bool InLaunchedJob() {
  const LauncherVars* vars = DetectLauncher();
  if (vars == nullptr) return false;
  if (vars == &kRankVars) return true;
  const char* size = Env(WorldSizeVar(*vars));
  int world_size = 0;
  // A size that does not parse counts as launched, so that ReadJobEnv names it.
  return size == nullptr || !absl::SimpleAtoi(size, &world_size) || world_size > 1;
}

absl::StatusOr<JobEnv> ReadJobEnv() {
  const LauncherVars* vars = DetectLauncher();
  if (vars == nullptr) vars = &kRankVars;  // Its error names RANK.
  JobEnv env;
  env.launcher = LauncherName(*vars);
  RINGSIDE_RETURN_IF_ERROR(ReadPlacement(*vars, &env));
  RINGSIDE_RETURN_IF_ERROR(ReadStoreAddress(vars == &kRankVars, &env));
  env.run_id = RunId();
  if (vars == &kRankVars) {
    if (const char* agent = Env("TORCHELASTIC_USE_AGENT_STORE"); agent != nullptr) {
      env.agent_store = absl::string_view(agent) == "True";
    }
    if (Env("TORCHELASTIC_RESTART_COUNT") != nullptr) {
      RINGSIDE_ASSIGN_OR_RETURN(env.restart_count, IntFromEnv("TORCHELASTIC_RESTART_COUNT", "torchrun"));
    }
  }
  return env;
}

}  // namespace ringside
