#include "experiments/cli/argv_parser.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int32_t, test_count, 3, "a number");
ABSL_FLAG(bool, test_switch, false, "a switch");
ABSL_FLAG(std::string, test_name, "", "a name");
ABSL_FLAG(int32_t, test_nproc_per_node, 1, "torchrun's spelling");
ABSL_FLAG(std::string, test_verb_count, "", "the aliased verb's own --test_count (a list)");

namespace ringside {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::Status Nothing(const CommandArgs&) { return absl::OkStatus(); }

const Command kVerb = {"verb", "summary", "  ringside verb\n", "test_count test_switch test_nproc_per_node",
                       "test_name", "", 0, -1, false, nullptr, Nothing};
// Shows test_verb_count as --test_count.
const Command kAliased = {"aliased", "summary", "  ringside aliased\n", "test_count=test_verb_count test_switch",
                          "", "", 0, -1, false, nullptr, Nothing};
const Command kLauncher = {"launcher", "summary", "  ringside launcher\n", "test_count test_switch", "", "", 0,
                           -1, true, nullptr, Nothing};

class ParseVerbArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::SetFlag(&FLAGS_test_count, 3);
    absl::SetFlag(&FLAGS_test_switch, false);
    absl::SetFlag(&FLAGS_test_name, "");
    absl::SetFlag(&FLAGS_test_nproc_per_node, 1);
    absl::SetFlag(&FLAGS_test_verb_count, "");
  }
};

TEST_F(ParseVerbArgsTest, AliasSetsTheVerbsOwnFlag) {
  const std::vector<std::string> words = {"--test_count=8,32,100"};
  absl::StatusOr<ParsedArgs> p = ParseVerbArgs(kAliased, words);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_test_verb_count), "8,32,100");
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 3);  // The other verb's flag is untouched.
  EXPECT_THAT(p->given, ElementsAre("test_verb_count"));
  EXPECT_THAT(CommandFlagNames(kAliased, false), ElementsAre("test_count", "test_switch"));
  ASSERT_NE(CommandFlag(kAliased, "test_count", false), nullptr);
  EXPECT_EQ(CommandFlag(kAliased, "test_count", false)->Name(), "test_verb_count");
  EXPECT_EQ(CommandFlag(kAliased, "test_verb_count", false), nullptr);  // Only as --test_count.
  EXPECT_FALSE(ParseVerbArgs(kAliased, std::vector<std::string>{"--test_verb_count=1"}).ok());
}

TEST_F(ParseVerbArgsTest, ValueForms) {
  const std::vector<std::string> words = {"a", "--test_count=7", "b", "--test_name", "x y", "-test_switch"};
  absl::StatusOr<ParsedArgs> p = ParseVerbArgs(kVerb, words);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->positional, ElementsAre("a", "b"));
  EXPECT_FALSE(p->help);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 7);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_name), "x y");
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_switch));
}

TEST_F(ParseVerbArgsTest, BooleansAndDashes) {
  absl::SetFlag(&FLAGS_test_switch, true);
  const std::vector<std::string> words = {"--notest_switch", "--test-nproc-per-node", "4"};
  ASSERT_TRUE(ParseVerbArgs(kVerb, words).ok());
  EXPECT_FALSE(absl::GetFlag(FLAGS_test_switch));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_nproc_per_node), 4);
  ASSERT_TRUE(ParseVerbArgs(kVerb, std::vector<std::string>{"--test_switch=true"}).ok());
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_switch));
}

TEST_F(ParseVerbArgsTest, DoubleDashEndsFlags) {
  const std::vector<std::string> words = {"--test_count=2", "--", "--test_count=5", "x"};
  absl::StatusOr<ParsedArgs> p = ParseVerbArgs(kVerb, words);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->positional, ElementsAre("--test_count=5", "x"));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 2);
}

TEST_F(ParseVerbArgsTest, ProgramAfterFlagsIsUntouched) {
  const std::vector<std::string> words = {"--test-count=2", "prog", "--test_count=9", "--help", "--bogus"};
  absl::StatusOr<ParsedArgs> p = ParseVerbArgs(kLauncher, words);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->positional, ElementsAre("prog", "--test_count=9", "--help", "--bogus"));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 2);
  EXPECT_FALSE(p->help);
}

TEST_F(ParseVerbArgsTest, Help) {
  absl::StatusOr<ParsedArgs> p = ParseVerbArgs(kVerb, std::vector<std::string>{"x", "--help"});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->help);
  EXPECT_TRUE(ParseVerbArgs(kVerb, std::vector<std::string>{"-h"})->help);
}

TEST_F(ParseVerbArgsTest, UnknownFlagSuggestsTheClosest) {
  absl::Status s = ParseVerbArgs(kVerb, std::vector<std::string>{"--test_cuont=2"}).status();
  EXPECT_TRUE(IsUsageError(s));
  EXPECT_THAT(s.message(), HasSubstr("unknown flag --test_cuont; did you mean --test_count?"));
  s = ParseVerbArgs(kVerb, std::vector<std::string>{"--zzzzzzzzzzzz"}).status();
  EXPECT_TRUE(IsUsageError(s));
  EXPECT_THAT(s.message(), HasSubstr("unknown flag --zzzzzzzzzzzz"));
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("did you mean")));
}

TEST_F(ParseVerbArgsTest, FlagOfAnotherVerbIsRefused) {
  // test_name is only hidden for kVerb: kLauncher does not take it.
  absl::Status s = ParseVerbArgs(kLauncher, std::vector<std::string>{"--test_name=x", "prog"}).status();
  EXPECT_TRUE(IsUsageError(s));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_name), "");
  // --nobool only for booleans.
  EXPECT_TRUE(IsUsageError(ParseVerbArgs(kVerb, std::vector<std::string>{"--notest_count"}).status()));
}

TEST_F(ParseVerbArgsTest, BadOrMissingValue) {
  absl::Status s = ParseVerbArgs(kVerb, std::vector<std::string>{"--test_count=many"}).status();
  EXPECT_TRUE(IsUsageError(s));
  EXPECT_THAT(s.message(), HasSubstr("bad value for --test_count: Illegal value 'many'"));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 3);
  s = ParseVerbArgs(kVerb, std::vector<std::string>{"--test_count"}).status();
  EXPECT_TRUE(IsUsageError(s));
  EXPECT_THAT(s.message(), HasSubstr("--test_count needs a value"));
  EXPECT_TRUE(IsUsageError(ParseVerbArgs(kVerb, std::vector<std::string>{"--test_switch=maybe"}).status()));
}

TEST(EditDistanceTest, ClosedForm) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("abc", ""), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("workers", "wrokers"), 2);
  EXPECT_EQ(EditDistance("lr", "lr"), 0);
}

TEST(UsageErrorTest, MarksOnlyWhatItWraps) {
  EXPECT_TRUE(IsUsageError(UsageError("x")));
  EXPECT_FALSE(IsUsageError(absl::InvalidArgumentError("x")));
  EXPECT_TRUE(AsUsageError(absl::OkStatus()).ok());
  absl::Status wrapped = AsUsageError(absl::NotFoundError("gone"));
  EXPECT_TRUE(IsUsageError(wrapped));
  EXPECT_EQ(wrapped.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(wrapped.message(), "gone");
}

}  // namespace
}  // namespace ringside
