// The checked-call macros turn CUDA, cuBLAS and NCCL failures into Status values that
// name the call, file:line and rank. Error codes are injected, so this runs anywhere.
#include "common/cuda_check.h"

#include <string>

#include "common/device.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

absl::Status FailingCuda(int rank) {
  RINGSIDE_CUDA_RETURN_IF_ERROR(rank, cudaErrorInvalidValue);
  return absl::OkStatus();
}
absl::Status FailingCublas(int rank) {
  RINGSIDE_CUBLAS_RETURN_IF_ERROR(rank, CUBLAS_STATUS_NOT_INITIALIZED);
  return absl::OkStatus();
}
absl::Status FailingNccl(int rank) {
  RINGSIDE_NCCL_RETURN_IF_ERROR(rank, ncclRemoteError);
  return absl::OkStatus();
}
absl::Status Succeeding() {
  RINGSIDE_CUDA_RETURN_IF_ERROR(0, cudaSuccess);
  RINGSIDE_CUBLAS_RETURN_IF_ERROR(0, CUBLAS_STATUS_SUCCESS);
  RINGSIDE_NCCL_RETURN_IF_ERROR(0, ncclSuccess);
  return absl::OkStatus();
}

TEST(CudaCheckTest, CudaFailureNamesCallLineAndRank) {
  const absl::Status s = FailingCuda(3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  const std::string msg(s.message());
  EXPECT_NE(msg.find("cudaErrorInvalidValue"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda_check_test.cc:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("on rank 3"), std::string::npos) << msg;
}

TEST(CudaCheckTest, CublasFailure) {
  const std::string msg(FailingCublas(-1).message());
  EXPECT_NE(msg.find("cuBLAS error 1"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("rank"), std::string::npos) << msg;
}

TEST(CudaCheckTest, NcclRemoteErrorIsUnavailable) {
  const absl::Status s = FailingNccl(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("on rank 1"), std::string::npos);
}

TEST(CudaCheckTest, SuccessPassesThrough) { EXPECT_TRUE(Succeeding().ok()); }

TEST(DeviceTest, DetectionNeverAborts) {
  const DeviceInfo info = DetectDevices();
  EXPECT_GE(info.gpu_count, 0);
  EXPECT_FALSE(info.detail.empty());
  // The runtime agrees with the driver probe (both report "no GPU" on CPU machines).
  int runtime_count = 0;
  if (cudaGetDeviceCount(&runtime_count) != cudaSuccess) runtime_count = 0;
  EXPECT_EQ(info.gpu_count, runtime_count);
}

}  // namespace
}  // namespace ringside
