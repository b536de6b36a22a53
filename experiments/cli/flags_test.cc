// The command line and an experiment spec share one set of defaults
// (common/run_config.h DefaultRunConfig()).
#include "experiments/cli/flags.h"

#include <string>
#include <vector>

#include "common/run_config.h"
#include "experiments/cli/argv_parser.h"
#include "experiments/cli/command.h"
#include "experiments/matrix/spec.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

TEST(FlagsTest, FlagDefaultsAreTheRunConfigDefaults) {
  EXPECT_EQ(ConfigDifference(DefaultRunConfig(), RunConfigFromFlags()), "");
}

TEST(FlagsTest, ASpecWithUnsetFieldsTrainsWithTheFlagDefaults) {
  absl::StatusOr<ExperimentSpec> spec = ParseSpec(
      "strategies { kind: \"single\" } model: \"mlp:784-256-256-10\" batch_per_worker: 128 steps: 100", "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<std::string> args = CellTrainArgs(*spec, ExpandCells(*spec)[0], "");
  ASSERT_EQ(args[0], "train");
  args.erase(args.begin());
  absl::StatusOr<ParsedArgs> parsed = ParseVerbArgs(*FindCommand("train"), args);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  RunConfig expected = DefaultRunConfig();
  expected.set_max_steps(100);
  EXPECT_EQ(ConfigDifference(expected, RunConfigFromFlags()), "");
}

}  // namespace
}  // namespace ringside
