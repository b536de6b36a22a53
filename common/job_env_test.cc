#include "common/job_env.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace ringside {
namespace {

class JobEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                             "MASTER_PORT", "RINGSIDE_RUN_ID"}) {
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

}  // namespace
}  // namespace ringside
