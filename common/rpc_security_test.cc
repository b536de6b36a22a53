#include "common/rpc_security.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr char kGoodToken[] = "0123456789abcdef0123456789abcdef";

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string WriteFile(const std::string& name, const std::string& text, mode_t mode) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
  return path;
}

// Sets or clears RINGSIDE_TOKEN for one test.
class ScopedTokenEnv {
 public:
  explicit ScopedTokenEnv(const char* value) {
    if (value == nullptr) {
      unsetenv(kTokenEnvVar);
    } else {
      setenv(kTokenEnvVar, value, 1);
    }
  }
  ~ScopedTokenEnv() { unsetenv(kTokenEnvVar); }
};

TEST(ConstantTimeEquals, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals(kGoodToken, kGoodToken));
  EXPECT_FALSE(ConstantTimeEquals(kGoodToken, "0123456789abcdef0123456789abcdeF"));
  EXPECT_FALSE(ConstantTimeEquals(kGoodToken, "0123456789abcdef"));  // A prefix.
  EXPECT_FALSE(ConstantTimeEquals("0123456789abcdef", kGoodToken));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  // Embedded NULs are bytes like any other.
  EXPECT_FALSE(ConstantTimeEquals(std::string("ab\0c", 4), std::string("ab\0d", 4)));
}

TEST(ValidateToken, RefusesEmptyShortAndUnprintable) {
  EXPECT_TRUE(ValidateToken(kGoodToken, "x").ok());
  for (const std::string& bad : {std::string(""), std::string("short"),
                                std::string("0123456789abcdef 0123"), std::string("0123456789abcdef\n0"),
                                std::string(kMaxTokenChars + 1, 'a')}) {
    absl::Status s = ValidateToken(bad, "RINGSIDE_TOKEN");
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_TRUE(absl::StartsWith(s.message(), "RINGSIDE_TOKEN")) << s;
    EXPECT_FALSE(absl::StrContains(s.message(), "\n")) << s;
    if (!bad.empty()) {
      EXPECT_FALSE(absl::StrContains(s.message(), bad)) << "quotes the token: " << s;
    }
  }
}

TEST(ReadTokenFile, ReadsAPrivateFileAndStripsTheNewline) {
  const std::string path = WriteFile("token_ok", std::string(kGoodToken) + "\n", 0600);
  absl::StatusOr<std::string> token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, kGoodToken);
}

TEST(ReadTokenFile, RefusesMissingOpenAndShortFiles) {
  absl::StatusOr<std::string> missing = ReadTokenFile(TempPath("no_such_token"));
  EXPECT_TRUE(absl::IsFailedPrecondition(missing.status())) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "cannot read")) << missing.status();

  const std::string open = WriteFile("token_open", kGoodToken, 0644);
  absl::StatusOr<std::string> shared = ReadTokenFile(open);
  EXPECT_TRUE(absl::IsFailedPrecondition(shared.status())) << shared.status();
  EXPECT_TRUE(absl::StrContains(shared.status().message(), "chmod 600")) << shared.status();

  const std::string short_path = WriteFile("token_short", "abc\n", 0600);
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTokenFile(short_path).status()));
  const std::string empty_path = WriteFile("token_empty", "\n", 0600);
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTokenFile(empty_path).status()));
}

TEST(LoadRpcSecurity, FileBeforeEnvironmentBeforeNone) {
  {
    ScopedTokenEnv env(nullptr);
    absl::StatusOr<RpcSecurity> none = LoadRpcSecurity("", "", "", "");
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->authenticated());
    EXPECT_FALSE(none->tls());
  }
  {
    ScopedTokenEnv env("fedcba9876543210fedcba9876543210");
    absl::StatusOr<RpcSecurity> from_env = LoadRpcSecurity("", "", "", "");
    ASSERT_TRUE(from_env.ok());
    EXPECT_EQ(from_env->token, "fedcba9876543210fedcba9876543210");
    const std::string path = WriteFile("token_pref", kGoodToken, 0600);
    absl::StatusOr<RpcSecurity> from_file = LoadRpcSecurity(path, "", "", "");
    ASSERT_TRUE(from_file.ok());
    EXPECT_EQ(from_file->token, kGoodToken);
  }
  {
    ScopedTokenEnv env("");  // Set but empty: a mistake, not "no token".
    absl::StatusOr<RpcSecurity> empty = LoadRpcSecurity("", "", "", "");
    EXPECT_TRUE(absl::IsInvalidArgument(empty.status())) << empty.status();
  }
}

TEST(LoadRpcSecurity, TlsNeedsAllThreeFiles) {
  ScopedTokenEnv env(nullptr);
  const std::string pem = WriteFile("some.pem", "-----BEGIN X-----\n", 0600);
  absl::StatusOr<RpcSecurity> partial = LoadRpcSecurity("", pem, "", "");
  EXPECT_TRUE(absl::IsInvalidArgument(partial.status())) << partial.status();
  absl::StatusOr<RpcSecurity> missing = LoadRpcSecurity("", pem, pem, TempPath("no_ca.pem"));
  EXPECT_TRUE(absl::IsFailedPrecondition(missing.status())) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "--tls_ca")) << missing.status();
  absl::StatusOr<RpcSecurity> all = LoadRpcSecurity("", pem, pem, pem);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->tls());
}

TEST(LimitsForClients, BoundedAndRoomForEveryClient) {
  EXPECT_GE(LimitsForClients(1, 4).max_threads, 64);
  EXPECT_GE(LimitsForClients(64, 4).max_threads, 64 * 4);
  EXPECT_LT(LimitsForClients(64, 4).max_threads, 64 * 4 + 100);
}

}  // namespace
}  // namespace ringside
