// `ringside compare` refuses a spec with GPU cells where they cannot run, before it
// creates anything or starts a cell.
#include "experiments/matrix/compare.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/ops_factory.h"
#include "experiments/sys/files.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

TEST(CompareTest, AGpuSpecIsRefusedBeforeAnyCellWhereNoGpuCanRunIt) {
  const bool can_run = BuiltWithCuda() && DetectDevices().gpu_count > 0;
  if (can_run) GTEST_SKIP() << "this build has CUDA and this machine a GPU: GPU cells would run here";
  const std::string spec = TempDir() + "/gpu.textproto";
  ASSERT_TRUE(WriteFileAtomically(spec,
                                  "strategies { kind: \"ddp\" backend: \"nccl\" device: \"cuda\" } "
                                  "workers: 2 model: \"mlp:4-2\" batch_per_worker: 8 steps: 3\n")
                  .ok());
  CompareOptions o;
  o.spec_path = spec;
  o.out_dir = TempDir() + "/out";
  o.self_exe = "/bin/false";  // Never reached.
  o.progress = nullptr;
  const absl::Status s = RunCompare(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StartsWith(s.message(), spec + ": the spec has cells on the GPU (device cuda), but ")) << s;
  EXPECT_EQ(s.message().find('\n'), absl::string_view::npos) << s;
  EXPECT_FALSE(std::filesystem::exists(o.out_dir)) << "compare created " << o.out_dir;
}

// Two strategies whose cells share an id (here two DDPs differing only in
// bucket_cap_mb, both labelled "ddp"): compare refuses the spec in one line naming both,
// before it creates anything, instead of running one and reporting it for both.
TEST(CompareTest, CollidingLabelsAreRefusedBeforeAnyCell) {
  const std::string spec = TempDir() + "/collide.textproto";
  ASSERT_TRUE(WriteFileAtomically(spec,
                                  "strategies { kind: \"ddp\" bucket_cap_mb: 1 } "
                                  "strategies { kind: \"ddp\" bucket_cap_mb: 100 } "
                                  "workers: 2 model: \"mlp:4-2\" batch_per_worker: 8 steps: 3\n")
                  .ok());
  CompareOptions o;
  o.spec_path = spec;
  o.out_dir = TempDir() + "/collide_out";
  o.self_exe = "/bin/false";  // Never reached.
  o.progress = nullptr;
  const absl::Status s = RunCompare(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), spec + ": strategies {kind: \"ddp\" bucket_cap_mb: 1} and {kind: \"ddp\" "
                                "bucket_cap_mb: 100} both make cell ddp-n2-r0 (labels 'ddp' and 'ddp'): "
                                "give them distinct labels");
  EXPECT_FALSE(std::filesystem::exists(o.out_dir)) << "compare created " << o.out_dir;
}

}  // namespace
}  // namespace ringside
