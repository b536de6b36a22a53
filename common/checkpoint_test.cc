#include "common/checkpoint.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringside {
namespace {

using google::protobuf::FieldDescriptor;

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

uint32_t U32At(const std::string& bytes, size_t offset) {
  uint32_t v;
  std::memcpy(&v, bytes.data() + offset, sizeof(v));
  return v;
}

void PutU32(std::string* bytes, size_t offset, uint32_t v) {
  std::memcpy(bytes->data() + offset, &v, sizeof(v));
}

// The crc32 trailer of `body` appended: a file that passes the checksum whatever it
// holds (a forger's file, to test the checks behind the checksum).
std::string WithTrailer(std::string body) {
  uint32_t crc = static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()), body.size()));
  body.append(reinterpret_cast<const char*>(&crc), sizeof(crc));
  return body;
}

// The file `bytes` with its header replaced by `header` (header length updated, the
// blobs and the old trailer kept).
std::string WithHeader(const std::string& bytes, const CheckpointHeader& header) {
  const uint32_t h = U32At(bytes, 12);
  std::string out = bytes.substr(0, 16);
  PutU32(&out, 12, static_cast<uint32_t>(header.ByteSizeLong()));
  out += header.SerializeAsString();
  out += bytes.substr(16 + h);
  return out;
}

// The file `bytes` with its header replaced and a checksum that matches (a forger's).
std::string Forged(const std::string& bytes, const CheckpointHeader& header) {
  const std::string out = WithHeader(bytes, header);
  return WithTrailer(out.substr(0, out.size() - 4));
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
    header_.mutable_config()->set_lr(0.05f);
    header_.mutable_config()->set_seed(9);
    for (int i = 0; i < 1000; ++i) params_.push_back(i * 0.5f - 3);
    for (int i = 0; i < 1000; ++i) opt_.push_back(-i * 0.25f);
    ASSERT_TRUE(WriteCheckpoint(path_, header_, params_, opt_).ok());
    bytes_ = ReadFile(path_);
  }

  // DataLoss, its message naming the file ("checkpoint NAME ..." or "NAME is not").
  void ExpectRefused(const std::string& bytes, const std::string& why) {
    absl::StatusOr<Checkpoint> ckpt = ParseCheckpoint(bytes, "test.bin");
    ASSERT_FALSE(ckpt.ok()) << why;
    EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss) << why << ": " << ckpt.status();
    EXPECT_NE(ckpt.status().message().find("test.bin"), std::string::npos) << ckpt.status();
    EXPECT_EQ(ckpt.status().message().find('\n'), std::string::npos) << ckpt.status();
  }

  std::string path_;
  std::string bytes_;
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
  // The layout of checkpoint.h: magic, version 3, header length, header, blobs, crc.
  EXPECT_EQ(bytes_.substr(0, 8), "RINGCKPT");
  EXPECT_EQ(U32At(bytes_, 8), 3u);
  EXPECT_EQ(bytes_.size(), 20 + U32At(bytes_, 12) + 2000 * sizeof(float));
  EXPECT_EQ(WithTrailer(bytes_.substr(0, bytes_.size() - 4)), bytes_);
  // The buffer reader reads the same.
  auto parsed = ParseCheckpoint(bytes_);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->params, params_);
  // No temporary file is left behind.
  EXPECT_EQ(std::fopen((path_ + ".tmp." + std::to_string(getpid())).c_str(), "r"), nullptr);
}

TEST_F(CheckpointTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadCheckpoint(TempPath("nope.bin")).status().code(), absl::StatusCode::kNotFound);
}

// Every field of the header changed in turn (the old checksum kept): refused. These
// are the edits that used to resume from the wrong point without an error.
TEST_F(CheckpointTest, EveryHeaderFieldEditedIsRefused) {
  const google::protobuf::Descriptor* d = CheckpointHeader::descriptor();
  const google::protobuf::Reflection* r = header_.GetReflection();
  CheckpointHeader written;
  ASSERT_TRUE(written.ParseFromString(bytes_.substr(16, U32At(bytes_, 12))));
  int edited = 0;
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    CheckpointHeader h = written;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(&h, f, r->GetInt32(h, f) + 1); break;
      case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(&h, f, r->GetInt64(h, f) + 1); break;
      case FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(&h, f, r->GetUInt32(h, f) + 1); break;
      case FieldDescriptor::CPPTYPE_STRING: r->SetString(&h, f, r->GetString(h, f) + "x"); break;
      case FieldDescriptor::CPPTYPE_MESSAGE: h.mutable_config()->set_lr(0.5f); break;
      default: FAIL() << "a header field of an unhandled type: " << f->name();
    }
    ExpectRefused(WithHeader(bytes_, h), f->name());
    ++edited;
  }
  EXPECT_GE(edited, 7);
  // The sizes edited consistently with the file (the trailer moved along): still the
  // checksum.
  CheckpointHeader h = written;
  h.set_num_params(999);
  h.set_num_optimizer_state(1001);
  ExpectRefused(WithHeader(bytes_, h), "num_params and num_optimizer_state moved");
}

// One flipped bit anywhere (magic, version, length, header, either blob, the trailer):
// refused.
TEST_F(CheckpointTest, EveryFlippedByteIsRefused) {
  for (size_t i = 0; i < bytes_.size(); ++i) {
    std::string bytes = bytes_;
    bytes[i] ^= 0x10;
    absl::StatusOr<Checkpoint> ckpt = ParseCheckpoint(bytes, "test.bin");
    ASSERT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
  }
  std::string bytes = bytes_;
  bytes[bytes.size() - 100] ^= 0x40;  // A payload byte: the checksum says so.
  WriteFile(path_, bytes);
  auto ckpt = ReadCheckpoint(path_);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ckpt.status().message().find("fails its checksum"), std::string::npos) << ckpt.status();
  EXPECT_NE(ckpt.status().message().find(path_), std::string::npos) << ckpt.status();
}

TEST_F(CheckpointTest, TruncatedOrPaddedFileIsRefused) {
  for (size_t keep = 0; keep < bytes_.size(); ++keep) {
    absl::StatusOr<Checkpoint> ckpt = ParseCheckpoint(bytes_.substr(0, keep), "test.bin");
    ASSERT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss) << keep;
  }
  ExpectRefused(bytes_ + std::string(4, '\0'), "padded");
  for (size_t keep : {size_t{0}, size_t{10}, size_t{20}, bytes_.size() / 2, bytes_.size() - 1}) {
    WriteFile(path_, bytes_.substr(0, keep));
    absl::StatusOr<Checkpoint> ckpt = ReadCheckpoint(path_);
    EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss) << keep;
    EXPECT_NE(ckpt.status().message().find("truncated"), std::string::npos) << ckpt.status();
  }
}

TEST_F(CheckpointTest, ForeignAndOldFilesAreRefused) {
  ExpectRefused("this is not a checkpoint at all, just text", "text");
  ExpectRefused("RING", "a prefix of the magic");
  // Version 2 (the checksum in the header, over the blobs only): named and refused.
  std::string v2 = bytes_;
  PutU32(&v2, 8, 2);
  absl::StatusOr<Checkpoint> ckpt = ParseCheckpoint(v2, "old.bin");
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ckpt.status().message().find("checkpoint old.bin has format version 2, this build reads version 3"),
            std::string::npos)
      << ckpt.status();
}

// Lengths and counts a forger chose (with a valid checksum): refused before anything
// is allocated for them.
TEST_F(CheckpointTest, HostileLengthsAndCountsAreRefused) {
  const std::string body = bytes_.substr(0, bytes_.size() - 4);
  for (uint32_t h : {0u, 0xffffffffu, 1u << 21, static_cast<uint32_t>(bytes_.size())}) {
    std::string forged = body;
    PutU32(&forged, 12, h);
    ExpectRefused(WithTrailer(forged), "header length " + std::to_string(h));
  }
  CheckpointHeader written;
  ASSERT_TRUE(written.ParseFromString(bytes_.substr(16, U32At(bytes_, 12))));
  for (int64_t n : {int64_t{-1}, int64_t{1} << 40, int64_t{1} << 62, int64_t{1001}}) {
    CheckpointHeader h = written;
    h.set_num_params(n);
    ExpectRefused(Forged(bytes_, h), "num_params " + std::to_string(n));
  }
  CheckpointHeader h = written;
  h.set_step(-5);
  ExpectRefused(Forged(bytes_, h), "negative step");
  // The forger's file with the true header passes: the checks above were not the
  // checksum's.
  EXPECT_TRUE(ParseCheckpoint(Forged(bytes_, written)).ok());
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

// A directory of checkpoints written by WriteCheckpointKeeping.
class KeepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath(::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }

  // Writes the checkpoint of `step` (its parameters say which) keeping `keep`.
  void Write(int64_t step, int keep) {
    CheckpointHeader h;
    h.set_model("mlp:2-2");
    h.set_step(step);
    const std::vector<float> params(6, static_cast<float>(step));
    ASSERT_TRUE(WriteCheckpointKeeping(dir_, keep, h, params, {}).ok()) << step;
  }

  std::set<std::string> Files() const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      names.insert(e.path().filename().string());
    }
    return names;
  }

  void Corrupt(const std::string& name) {
    const std::string path = dir_ + "/" + name;
    std::string bytes = ReadFile(path);
    bytes[bytes.size() - 6] ^= 1;
    // A new file: the kept ones are hard links of earlier checkpoint.bin files.
    std::filesystem::remove(path);
    WriteFile(path, bytes);
  }

  std::string dir_;
};

TEST_F(KeepTest, KeepsTheNewestK) {
  for (int64_t step : {10, 20, 30, 40}) Write(step, 3);
  EXPECT_EQ(Files(), (std::set<std::string>{"checkpoint.bin", "checkpoint.30.bin",
                                            "checkpoint.20.bin"}));
  EXPECT_EQ(ReadCheckpoint(dir_ + "/checkpoint.bin")->header.step(), 40);
  EXPECT_EQ(ReadCheckpoint(dir_ + "/checkpoint.20.bin")->params[0], 20.0f);
  // The same step again (an epoch's end, then the run's end) replaces it.
  Write(40, 3);
  EXPECT_EQ(Files().size(), 3u);
  // keep 1: the newest only.
  Write(50, 1);
  EXPECT_EQ(Files(), (std::set<std::string>{"checkpoint.bin"}));
  Write(60, 2);
  EXPECT_EQ(Files(), (std::set<std::string>{"checkpoint.bin", "checkpoint.50.bin"}));
  CheckpointHeader h;
  EXPECT_EQ(WriteCheckpointKeeping(dir_, 0, h, {}, {}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KeepTest, ResumeFallsBackPastDamagedCheckpoints) {
  EXPECT_EQ(ReadNewestCheckpoint(dir_).status().code(), absl::StatusCode::kNotFound);
  for (int64_t step : {10, 20, 30}) Write(step, 3);
  absl::StatusOr<NewestCheckpoint> newest = ReadNewestCheckpoint(dir_);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->checkpoint.header.step(), 30);
  EXPECT_EQ(newest->path, dir_ + "/checkpoint.bin");
  EXPECT_EQ(newest->warning, "");

  Corrupt("checkpoint.bin");
  newest = ReadNewestCheckpoint(dir_);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->checkpoint.header.step(), 20);
  EXPECT_EQ(newest->checkpoint.params[0], 20.0f);
  EXPECT_EQ(newest->path, dir_ + "/checkpoint.20.bin");
  // One line: what is wrong with which file, and which one is used instead.
  const std::string start = "checkpoint " + dir_ + "/checkpoint.bin fails its checksum (stored ";
  const std::string end = "; resuming from " + dir_ + "/checkpoint.20.bin (step 20) instead";
  EXPECT_EQ(newest->warning.substr(0, start.size()), start) << newest->warning;
  ASSERT_GE(newest->warning.size(), end.size());
  EXPECT_EQ(newest->warning.substr(newest->warning.size() - end.size()), end) << newest->warning;
  EXPECT_EQ(newest->warning.find('\n'), std::string::npos);

  Corrupt("checkpoint.20.bin");
  newest = ReadNewestCheckpoint(dir_);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->checkpoint.header.step(), 10);
  EXPECT_NE(newest->warning.find("checkpoint.bin fails its checksum"), std::string::npos);
  EXPECT_NE(newest->warning.find("checkpoint.20.bin fails its checksum"), std::string::npos);
  EXPECT_EQ(newest->warning.find('\n'), std::string::npos);

  // Resumed from 10, the run writes 15: the abandoned 20 and the damaged 30 go.
  Write(15, 3);
  EXPECT_EQ(Files(), (std::set<std::string>{"checkpoint.bin", "checkpoint.10.bin"}));
  EXPECT_EQ(ReadNewestCheckpoint(dir_)->checkpoint.header.step(), 15);

  // Every one damaged: the newest's error, counting the others.
  Corrupt("checkpoint.bin");
  Corrupt("checkpoint.10.bin");
  newest = ReadNewestCheckpoint(dir_);
  EXPECT_EQ(newest.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(newest.status().message().find("checkpoint " + dir_ + "/checkpoint.bin fails its checksum"),
            std::string::npos)
      << newest.status();
  EXPECT_NE(newest.status().message().find("(and 1 older checkpoint(s) are unusable too)"),
            std::string::npos)
      << newest.status();
}

TEST_F(KeepTest, AKeptFileMustHoldTheStepItsNameSays) {
  Write(10, 2);
  Write(20, 2);
  std::filesystem::rename(dir_ + "/checkpoint.10.bin", dir_ + "/checkpoint.25.bin");
  std::filesystem::remove(dir_ + "/checkpoint.bin");
  absl::StatusOr<NewestCheckpoint> newest = ReadNewestCheckpoint(dir_);
  EXPECT_EQ(newest.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(newest.status().message().find("checkpoint.25.bin holds step 10, not the step its name says"),
            std::string::npos)
      << newest.status();
}

// Killed between keeping the old file and renaming the new one in (where hard links
// are not supported it is moved): checkpoint.bin is missing and the kept one is used,
// without a warning.
TEST_F(KeepTest, AMissingNewestIsNotDamage) {
  Write(10, 2);
  Write(20, 2);
  std::filesystem::remove(dir_ + "/checkpoint.bin");
  absl::StatusOr<NewestCheckpoint> newest = ReadNewestCheckpoint(dir_);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->checkpoint.header.step(), 10);
  EXPECT_EQ(newest->warning, "");
}

}  // namespace
}  // namespace ringside
