#include "experiments/matrix/spec.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "experiments/matrix/builtin_specs.h"
#include "experiments/sys/files.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

std::string SpecPath(const std::string& name) {
  const char* root = std::getenv("TEST_SRCDIR");
  return absl::StrCat(root != nullptr ? root : ".", "/ringside/experiments/matrix/specs/", name);
}

TEST(SpecTest, EveryShippedSpecLoads) {
  for (const char* name : {"demo.textproto", "quick.textproto", "validate.textproto"}) {
    absl::StatusOr<ExperimentSpec> spec = LoadSpec(SpecPath(name));
    EXPECT_TRUE(spec.ok()) << name << ": " << spec.status();
  }
}

TEST(SpecTest, TheDemoRunsTheSpecFileItDocuments) {
  absl::StatusOr<std::string> file = ReadFile(SpecPath("demo.textproto"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(DemoSpecText(), *file);
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(std::string(DemoSpecText()), "demo");
  ASSERT_TRUE(spec.ok()) << spec.status();
  // single on 1 worker; the PS and DDP on 1, 2 and 4.
  const std::vector<Cell> cells = ExpandCells(*spec);
  std::vector<std::string> ids;
  for (const Cell& c : cells) ids.push_back(c.id);
  EXPECT_EQ(absl::StrJoin(ids, " "),
            "single-n1-r0 ps-1-master-n1-r0 ps-1-master-n2-r0 ps-1-master-n4-r0 ddp-n1-r0 "
            "ddp-n2-r0 ddp-n4-r0");
}

TEST(SpecTest, BadSpecsAreRefusedNamingTheProblem) {
  EXPECT_EQ(ParseSpec("strategies { kind: \"x\" }", "s").status().message(),
            "s: unknown strategy 'x' (expected single, ps or ddp)");
  EXPECT_EQ(ParseSpec("bogus: 1", "s").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadSpec("/nonexistent.textproto").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SpecTest, CellArgsCarryTheStrategysFlags) {
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      "strategies { kind: \"ps\" ps_shards: 2 ps_sync: \"ssp:2\" } workers: 4 model: \"mlp:4-2\" "
      "global_batch: 64 steps: 3 network: \"bw=1gbit\"",
      "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<Cell> cells = ExpandCells(*spec);
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].batch_per_worker, 16);
  const std::string args = absl::StrJoin(CellTrainArgs(*spec, cells[0], "OUT"), " ");
  for (const char* want : {"--strategy=ps", "--batch=16", "--workers=4", "--ps_shards=2",
                           "--ps_sync=ssp:2", "--network=bw=1gbit", "--out=OUT"}) {
    EXPECT_NE(args.find(want), std::string::npos) << want << " not in " << args;
  }
}

TEST(SpecTest, UnsetFieldsTakeTheCommandLineDefaultsSetOnesAreKept) {
  const std::string base = "strategies { kind: \"single\" } model: \"mlp:4-2\" batch_per_worker: 8 steps: 3 ";
  absl::StatusOr<ExperimentSpec> unset = ParseSpec(base, "s");
  ASSERT_TRUE(unset.ok()) << unset.status();
  std::string args = absl::StrJoin(CellTrainArgs(*unset, ExpandCells(*unset)[0], "OUT"), " ");
  for (const char* want : {"--momentum=0.9", "--lr=0.02", "--threads=1", "--seed=1", "--epochs=5",
                           "--dataset=fashion-mnist", "--timeout_s=60"}) {
    EXPECT_NE(args.find(want), std::string::npos) << want << " not in " << args;
  }
  absl::StatusOr<ExperimentSpec> set =
      ParseSpec(base + "momentum: 0 threads: 0 lr: 0.5 seed: 7 epochs: 2", "s");
  ASSERT_TRUE(set.ok()) << set.status();
  args = absl::StrJoin(CellTrainArgs(*set, ExpandCells(*set)[0], "OUT"), " ");
  for (const char* want : {"--momentum=0 ", "--lr=0.5", "--threads=0", "--seed=7", "--epochs=2"}) {
    EXPECT_NE(args.find(want), std::string::npos) << want << " not in " << args;
  }
  EXPECT_EQ(ParseSpec(base + "epochs: 0", "s").status().message(), "s: epochs must be >= 1, got 0");
}

}  // namespace
}  // namespace ringside
