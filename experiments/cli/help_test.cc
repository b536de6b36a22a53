// `ringside VERB --help` describes each flag as that verb uses it: the command table's
// overrides (FlagHelpOverrides) replace the shared ABSL_FLAG descriptions (train's
// words) for verbs like compare, simulate and calibrate; train keeps the flags' own.
#include "experiments/cli/help.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "experiments/cli/command.h"
#include "experiments/costmodel/calibrate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;

// The description line under "  --NAME (default: ...)" in `verb`'s help; "" if the
// flag is not listed.
std::string HelpLineOf(const std::string& verb, const std::string& flag) {
  const Command* command = FindCommand(verb);
  if (command == nullptr) return "";
  std::vector<std::string> lines = absl::StrSplit(VerbHelp(*command), '\n');
  const std::string head = absl::StrCat("  --", flag, " (default: ");
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i].rfind(head, 0) == 0) return lines[i + 1];
  }
  return "";
}

std::string OwnHelp(const std::string& flag) {
  const absl::CommandLineFlag* f = absl::FindCommandLineFlag(flag);
  return f == nullptr ? "" : f->Help();
}

TEST(VerbHelp, SharedFlagsAreDescribedAsEachVerbUsesThem) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"compare", {"out"}},
      {"simulate", {"model", "batch"}},
      {"calibrate", {"model", "batch", "steps", "out"}},
      {"demo", {"out"}},
      {"lab", {"out"}},
      {"timeline", {"out"}},
      {"bench", {"model", "batch", "steps"}},
      {"explain", {"model", "batch"}},
  };
  for (const auto& [verb, flags] : cases) {
    for (const std::string& flag : flags) {
      const std::string line = HelpLineOf(verb, flag);
      ASSERT_FALSE(line.empty()) << verb << " --help does not list --" << flag;
      ASSERT_FALSE(OwnHelp(flag).empty()) << flag;
      EXPECT_NE(line, "      " + OwnHelp(flag)) << verb << " --" << flag << " shows train's words";
    }
  }
  EXPECT_THAT(HelpLineOf("calibrate", "out"), HasSubstr("calibration.json"));
  EXPECT_THAT(HelpLineOf("compare", "out"), HasSubstr("summary.csv"));
  EXPECT_THAT(HelpLineOf("simulate", "model"), HasSubstr("calibration"));
  // The default the calibrate verb falls back to is CalibrateOptions' own.
  EXPECT_THAT(HelpLineOf("calibrate", "steps"), HasSubstr(absl::StrCat("(0: ", CalibrateOptions().steps, ")")));
}

TEST(VerbHelp, TrainKeepsTheFlagsOwnDescriptions) {
  for (const std::string flag : {"out", "model", "batch", "steps"}) {
    EXPECT_EQ(HelpLineOf("train", flag), "      " + OwnHelp(flag)) << flag;
  }
}

TEST(VerbHelp, EveryOverrideNamesAVerbAndOneOfItsShownFlags) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const FlagHelpOverride& o : FlagHelpOverrides()) {
    const Command* command = FindCommand(o.verb);
    ASSERT_NE(command, nullptr) << "override for unknown verb " << o.verb;
    const std::vector<std::string> shown = CommandFlagNames(*command, /*hidden=*/false);
    EXPECT_NE(std::find(shown.begin(), shown.end(), o.flag), shown.end())
        << o.verb << " does not show --" << o.flag;
    EXPECT_NE(std::string(o.help), "") << o.verb << " --" << o.flag;
    EXPECT_NE(std::string(o.help), OwnHelp(o.flag)) << o.verb << " --" << o.flag << ": not an override";
    EXPECT_TRUE(seen.insert({o.verb, o.flag}).second) << "two overrides of " << o.verb << " --" << o.flag;
    EXPECT_EQ(FlagHelpFor(*command, o.flag), o.help);
  }
  EXPECT_EQ(FlagHelpFor(*FindCommand("train"), "out"), "");
}

}  // namespace
}  // namespace ringside
