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

TEST(NewOpsTest, CudaWithoutCudaBuildOrGpuIsOneClearError) {
  absl::StatusOr<std::unique_ptr<Ops>> ops = NewOps("cuda", 0, 0);
  if (ops.ok()) GTEST_SKIP() << "this machine has a GPU: " << (*ops)->name();
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kFailedPrecondition);
  const absl::string_view why = BuiltWithCuda() ? "no usable GPU" : "built without CUDA";
  EXPECT_NE(ops.status().message().find(why), absl::string_view::npos) << ops.status();
  EXPECT_EQ(ops.status().message().find('\n'), absl::string_view::npos);
}

TEST(NewOpsTest, CudaDeviceIndexBeyondTheMachineIsInvalid) {
  absl::StatusOr<std::unique_ptr<Ops>> probe = NewOps("cuda", 0, 0);
  if (!probe.ok()) GTEST_SKIP() << "no CUDA GPU: " << probe.status();
  absl::StatusOr<std::unique_ptr<Ops>> ops = NewOps("cuda", 7, 0);
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument) << ops.status();
  EXPECT_NE(ops.status().message().find("cuda:7"), absl::string_view::npos) << ops.status();
}

TEST(ParseDeviceTest, AcceptsCpuCudaAndCudaK) {
  ASSERT_TRUE(ParseDevice("cpu").ok());
  EXPECT_EQ(ParseDevice("").value().kind, DeviceKind::kCpu);
  EXPECT_EQ(ParseDevice("cuda").value().kind, DeviceKind::kCuda);
  EXPECT_EQ(ParseDevice("cuda").value().index, -1);
  EXPECT_EQ(ParseDevice("cuda:3").value().index, 3);
  EXPECT_EQ(DeviceName(ParseDevice("cuda:3").value()), "cuda:3");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "CUDA", "cuda:1:2"}) {
    EXPECT_EQ(ParseDevice(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(RanksShareGpuTest, MoreRanksThanTheGpusTheyAreSpreadOver) {
  EXPECT_FALSE(RanksShareGpu(-1, 1, 1));  // Single process on one GPU.
  EXPECT_TRUE(RanksShareGpu(-1, 2, 1));   // 2 ranks, 1 GPU: emulated.
  EXPECT_FALSE(RanksShareGpu(-1, 4, 8));  // One rank per GPU.
  EXPECT_FALSE(RanksShareGpu(-1, 8, 8));
  EXPECT_TRUE(RanksShareGpu(-1, 9, 8));   // Round robin wraps: GPU 0 has two.
  EXPECT_TRUE(RanksShareGpu(3, 2, 8));    // cuda:3 on every rank: all on GPU 3.
  EXPECT_FALSE(RanksShareGpu(3, 1, 8));
  EXPECT_TRUE(RanksShareGpu(-1, 2, 0));   // No GPU seen: counted as one.
}

TEST(CudaDeviceForTest, ExplicitIndexElseLocalRankRoundRobin) {
  EXPECT_EQ(CudaDeviceFor(3, 5, 8), 3);   // cuda:3, whatever the local rank.
  EXPECT_EQ(CudaDeviceFor(-1, 0, 8), 0);
  EXPECT_EQ(CudaDeviceFor(-1, 5, 8), 5);  // One rank per GPU.
  EXPECT_EQ(CudaDeviceFor(-1, 5, 4), 1);  // More ranks than GPUs: round robin.
  EXPECT_EQ(CudaDeviceFor(-1, 2, 1), 0);
  EXPECT_EQ(CudaDeviceFor(-1, 2, 0), 0);  // No GPU: NewOps names it.
}

TEST(ParseGemmPrecisionTest, NamesRoundTrip) {
  for (GemmPrecision p : {GemmPrecision::kFp32, GemmPrecision::kTf32, GemmPrecision::kBf16}) {
    EXPECT_EQ(ParseGemmPrecision(GemmPrecisionName(p)).value(), p);
  }
  EXPECT_EQ(ParseGemmPrecision("").value(), GemmPrecision::kFp32);
  EXPECT_EQ(ParseGemmPrecision("fp16").status().message(),
            "--precision must be fp32, tf32 or bf16, got 'fp16'");
}

TEST(NewOpsTest, BadArgumentsAreRefused) {
  EXPECT_EQ(NewOps("tpu", 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewOps("cpu", 1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewOps("cpu", 0, -1).status().message(), "--threads must be >= 0, got -1");
}

}  // namespace
}  // namespace ringside
