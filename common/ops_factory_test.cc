#include "common/ops_factory.h"

#include "gtest/gtest.h"

namespace ringside {
namespace {

TEST(NewOpsTest, CpuBuildsABackendThatComputes) {
  absl::StatusOr<std::unique_ptr<Ops>> ops = NewOps("cpu", 0, 1);
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ((*ops)->kind(), DeviceKind::kCpu);
  float x[3] = {1, 2, 3};
  (*ops)->Scale(x, 3, 2.0f);
  ASSERT_TRUE((*ops)->Synchronize().ok());
  EXPECT_EQ(x[2], 6.0f);
}

TEST(NewOpsTest, CudaIsRefusedInThisBuild) {
  absl::StatusOr<std::unique_ptr<Ops>> ops = NewOps("cuda", 0, 0);
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ops.status().message().find("not part of this build"), absl::string_view::npos);
}

TEST(NewOpsTest, BadArgumentsAreRefused) {
  EXPECT_EQ(NewOps("tpu", 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewOps("cpu", 1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewOps("cpu", 0, -1).status().message(), "--threads must be >= 0, got -1");
}

}  // namespace
}  // namespace ringside
