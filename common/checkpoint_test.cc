#include "common/checkpoint.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringside {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TempPath("ckpt.bin");
    header_.set_model("mlp:4-3");
    header_.set_step(17);
    header_.set_epoch(2);
    header_.set_batch_in_epoch(5);
    header_.mutable_config()->set_batch(32);
    for (int i = 0; i < 1000; ++i) params_.push_back(i * 0.5f - 3);
    for (int i = 0; i < 1000; ++i) opt_.push_back(-i * 0.25f);
    ASSERT_TRUE(WriteCheckpoint(path_, header_, params_, opt_).ok());
  }

  std::string path_;
  CheckpointHeader header_;
  std::vector<float> params_, opt_;
};

TEST_F(CheckpointTest, RoundTripIsExact) {
  auto ckpt = ReadCheckpoint(path_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->params, params_);
  EXPECT_EQ(ckpt->optimizer_state, opt_);
  EXPECT_EQ(ckpt->header.model(), "mlp:4-3");
  EXPECT_EQ(ckpt->header.step(), 17);
  EXPECT_EQ(ckpt->header.epoch(), 2);
  EXPECT_EQ(ckpt->header.batch_in_epoch(), 5);
  EXPECT_EQ(ckpt->header.config().batch(), 32);
  EXPECT_EQ(ckpt->header.num_params(), 1000);
  // No temporary file is left behind.
  EXPECT_EQ(std::fopen((path_ + ".tmp." + std::to_string(getpid())).c_str(), "r"), nullptr);
}

TEST_F(CheckpointTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadCheckpoint(TempPath("nope.bin")).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CheckpointTest, TruncatedFileIsDataLoss) {
  const std::string bytes = ReadFile(path_);
  for (size_t keep : {size_t{0}, size_t{4}, size_t{10}, size_t{20}, bytes.size() / 2,
                      bytes.size() - 1}) {
    WriteFile(path_, bytes.substr(0, keep));
    EXPECT_EQ(ReadCheckpoint(path_).status().code(), absl::StatusCode::kDataLoss) << keep;
  }
}

TEST_F(CheckpointTest, FlippedPayloadByteFailsChecksum) {
  std::string bytes = ReadFile(path_);
  bytes[bytes.size() - 100] ^= 0x40;
  WriteFile(path_, bytes);
  auto ckpt = ReadCheckpoint(path_);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ckpt.status().message().find("checksum"), std::string::npos);
}

TEST_F(CheckpointTest, ForeignFileIsRejected) {
  WriteFile(path_, "this is not a checkpoint at all, just text");
  EXPECT_EQ(ReadCheckpoint(path_).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, UnwritableDirectoryFails) {
  EXPECT_FALSE(WriteCheckpoint("/nonexistent-dir/ckpt.bin", header_, params_, opt_).ok());
}

TEST_F(CheckpointTest, OverwriteReplacesAtomically) {
  std::vector<float> other(10, 1.0f);
  ASSERT_TRUE(WriteCheckpoint(path_, header_, other, {}).ok());
  auto ckpt = ReadCheckpoint(path_);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(ckpt->params, other);
  EXPECT_TRUE(ckpt->optimizer_state.empty());
}

}  // namespace
}  // namespace ringside
