#include "common/job_env.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace ringside {
namespace {

class JobEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
          "RINGSIDE_RUN_ID", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
          "TORCHELASTIC_RESTART_COUNT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
          "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE",
          "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMIX_RANK", "PMIX_NAMESPACE", "SLURM_PROCID",
          "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_NODEID",
          "SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NODELIST",
          "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEPID"}) {
      unsetenv(name);
    }
  }
  void SetJob(const char* rank, const char* world, const char* addr, const char* port) {
    setenv("RANK", rank, 1);
    setenv("WORLD_SIZE", world, 1);
    setenv("MASTER_ADDR", addr, 1);
    setenv("MASTER_PORT", port, 1);
  }
};

TEST_F(JobEnvTest, ReadsTorchrunsVariablesWithDefaults) {
  EXPECT_FALSE(InLaunchedJob());
  SetJob("2", "4", "10.0.0.1", "29500");
  EXPECT_TRUE(InLaunchedJob());
  absl::StatusOr<JobEnv> env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->master_addr, "10.0.0.1");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_EQ(env->run_id, "default");
  setenv("LOCAL_RANK", "0", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("RINGSIDE_RUN_ID", "job7", 1);
  env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->run_id, "job7");
}

TEST_F(JobEnvTest, BadOrMissingVariablesAreNamed) {
  EXPECT_EQ(ReadJobEnv().status().message(),
            "RANK is not set (launch with `ringside launch` or torchrun)");
  SetJob("4", "4", "h", "29500");
  EXPECT_EQ(ReadJobEnv().status().message(), "RANK=4 is outside [0, WORLD_SIZE=4)");
  SetJob("0", "x", "h", "29500");
  EXPECT_EQ(ReadJobEnv().status().message(), "WORLD_SIZE='x' is not an integer");
  SetJob("0", "1", "", "29500");
  EXPECT_EQ(ReadJobEnv().status().message(), "MASTER_ADDR is not set");
  SetJob("0", "1", "h", "70000");
  EXPECT_EQ(ReadJobEnv().status().message(), "MASTER_PORT=70000 is not a port");
}

TEST_F(JobEnvTest, TorchrunsAgentStoreAndRunId) {
  SetJob("1", "2", "127.0.0.1", "29500");
  setenv("TORCHELASTIC_RUN_ID", "tr1", 1);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  setenv("TORCHELASTIC_RESTART_COUNT", "3", 1);
  absl::StatusOr<JobEnv> env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "torchrun");
  EXPECT_EQ(env->run_id, "tr1");
  EXPECT_TRUE(env->agent_store);
  EXPECT_EQ(env->restart_count, 3);
  // --standalone and --rdzv_backend=c10d: the workers host their own store.
  setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->agent_store);
  // ringside launch's own run id wins and names the launcher.
  setenv("RINGSIDE_RUN_ID", "rs1", 1);
  env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "ringside launch");
  EXPECT_EQ(env->run_id, "rs1");
}

TEST_F(JobEnvTest, SlurmStepWithDerivedStoreAddress) {
  setenv("SLURM_JOB_ID", "123456", 1);
  setenv("SLURM_STEP_ID", "2", 1);
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_NTASKS", "99", 1);  // The allocation's; the step's count wins.
  setenv("SLURM_STEP_NUM_TASKS", "5", 1);
  setenv("SLURM_LOCALID", "0", 1);
  setenv("SLURM_NODEID", "1", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "3,2", 1);
  setenv("SLURM_STEP_NODELIST", "gpu[007-009,12],cpu1", 1);
  EXPECT_TRUE(InLaunchedJob());
  absl::StatusOr<JobEnv> env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "Slurm (srun)");
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 5);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->master_addr, "gpu007");
  EXPECT_EQ(env->master_port, 20000 + 123456 % 20000);
  EXPECT_EQ(env->run_id, "slurm-123456.2");
  EXPECT_FALSE(env->agent_store);
  // Explicit MASTER_* win; a repeated tasks-per-node entry; SLURM_NTASKS alone.
  setenv("MASTER_ADDR", "10.1.1.1", 1);
  setenv("MASTER_PORT", "4000", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2),1", 1);
  unsetenv("SLURM_STEP_NUM_TASKS");
  setenv("SLURM_NTASKS", "5", 1);
  env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->world_size, 5);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->master_addr, "10.1.1.1");
  EXPECT_EQ(env->master_port, 4000);
  setenv("SLURM_NODEID", "2", 1);
  setenv("SLURM_LOCALID", "1", 1);
  EXPECT_EQ(ReadJobEnv().status().message(),
            "local rank 1 is outside [0, 1) (SLURM_LOCALID, tasks per node)");
  setenv("SLURM_NODEID", "3", 1);
  EXPECT_EQ(ReadJobEnv().status().message(),
            "SLURM_STEP_TASKS_PER_NODE='2(x2),1' lists no node 3 (SLURM_NODEID)");
}

TEST_F(JobEnvTest, SlurmWithoutAnAddressOrOutsideAStep) {
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "2", 1);
  // A batch script's own variables: not a task of a step.
  EXPECT_FALSE(InLaunchedJob());
  setenv("SLURM_STEPID", "0", 1);
  EXPECT_TRUE(InLaunchedJob());
  EXPECT_EQ(ReadJobEnv().status().message(),
            "MASTER_ADDR is not set (Slurm (srun) does not say where rank 0 runs: export "
            "MASTER_ADDR and MASTER_PORT)");
  setenv("SLURM_JOB_NODELIST", "n1,n2", 1);
  EXPECT_EQ(ReadJobEnv().status().message(),
            "SLURM_JOB_ID is not set (needed for MASTER_PORT: or export MASTER_PORT)");
  setenv("SLURM_NTASKS_PER_NODE", "1", 1);
  setenv("SLURM_JOB_ID", "7", 1);
  absl::StatusOr<JobEnv> env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->master_addr, "n1");
  EXPECT_EQ(env->master_port, 20007);
  EXPECT_EQ(env->local_world_size, 1);
  EXPECT_EQ(env->run_id, "slurm-7.0");
  // A single task runs ringside as if started by hand.
  setenv("SLURM_NTASKS", "1", 1);
  EXPECT_FALSE(InLaunchedJob());
}

TEST_F(JobEnvTest, OpenMpi) {
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  setenv("PMIX_RANK", "2", 1);
  setenv("PMIX_NAMESPACE", "prterun-host-1234@1", 1);
  EXPECT_TRUE(InLaunchedJob());
  EXPECT_EQ(ReadJobEnv().status().message(),
            "MASTER_ADDR is not set (Open MPI does not say where rank 0 runs: export "
            "MASTER_ADDR and MASTER_PORT)");
  setenv("MASTER_ADDR", "h0", 1);
  EXPECT_EQ(ReadJobEnv().status().message(),
            "MASTER_PORT is not set (Open MPI does not say where rank 0 runs: export "
            "MASTER_ADDR and MASTER_PORT)");
  setenv("MASTER_PORT", "29400", 1);
  absl::StatusOr<JobEnv> env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "Open MPI");
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->run_id, "prterun-host-1234@1");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(ReadJobEnv().status().message(),
            "OMPI_COMM_WORLD_SIZE is not set (Open MPI set OMPI_COMM_WORLD_RANK)");
}

TEST_F(JobEnvTest, MpichHydraAndPmix) {
  setenv("PMI_RANK", "1", 1);
  setenv("PMI_SIZE", "3", 1);
  setenv("MASTER_ADDR", "h0", 1);
  setenv("MASTER_PORT", "29400", 1);
  absl::StatusOr<JobEnv> env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "MPICH (Hydra)");
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 3);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 3);
  EXPECT_EQ(env->run_id, "default");
  setenv("MPI_LOCALRANKID", "0", 1);
  setenv("MPI_LOCALNRANKS", "1", 1);
  env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_world_size, 1);
  setenv("PMI_RANK", "3", 1);
  EXPECT_EQ(ReadJobEnv().status().message(), "PMI_RANK=3 is outside [0, PMI_SIZE=3)");

  // PMIx alone exports no size: WORLD_SIZE gives it.
  unsetenv("PMI_RANK");
  setenv("PMIX_RANK", "1", 1);
  EXPECT_TRUE(InLaunchedJob());
  EXPECT_EQ(ReadJobEnv().status().message(), "WORLD_SIZE is not set (PMIx set PMIX_RANK)");
  setenv("WORLD_SIZE", "2", 1);
  env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "PMIx");
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 2);
}

TEST_F(JobEnvTest, InnerLauncherWinsOverInheritedVariables) {
  // mpirun inside a Slurm step: every process inherited SLURM_PROCID=0.
  setenv("SLURM_STEP_ID", "0", 1);
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "2", 1);
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "h0", 1);
  setenv("MASTER_PORT", "29400", 1);
  absl::StatusOr<JobEnv> env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "Open MPI");
  EXPECT_EQ(env->rank, 1);
  // ringside launch (or torchrun) inside either: RANK wins.
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "3", 1);
  env = ReadJobEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "RANK/WORLD_SIZE");
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 3);
  setenv("LOCAL_RANK", "3", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  EXPECT_EQ(ReadJobEnv().status().message(),
            "local rank 3 is outside [0, 2) (LOCAL_RANK, LOCAL_WORLD_SIZE)");
}

}  // namespace
}  // namespace ringside
