#include "experiments/sys/files.h"

#include <sys/stat.h>

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace ringside {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The directory exists under the prefix while held, and goes with its files when the
// last owner is destroyed; a moved-from one removes nothing.
TEST(ScopedTempDir, RemovesItselfAndItsFiles) {
  std::string path;
  {
    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create("ringside-files-test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    path = dir->path();
    EXPECT_NE(path.find("/ringside-files-test-"), std::string::npos) << path;
    ASSERT_TRUE(Exists(path));
    ASSERT_TRUE(WriteFileAtomically(path + "/a", "x").ok());
    ASSERT_EQ(mkdir((path + "/sub").c_str(), 0700), 0);
    ASSERT_TRUE(WriteFileAtomically(path + "/sub/b", "y").ok());
    ScopedTempDir moved = std::move(*dir);
    EXPECT_EQ(moved.path(), path);
    EXPECT_TRUE(dir->path().empty());
  }
  EXPECT_FALSE(Exists(path));
}

// A root that cannot hold a directory is an error naming it, not a crash.
TEST(ScopedTempDir, ARootThatCannotHoldOneIsAnError) {
  const char* old = getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("TMPDIR", "/nonexistent-ringside-root", 1);
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create("x");
  if (old != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(dir.status().message().find("/nonexistent-ringside-root"), std::string::npos) << dir.status();
}

}  // namespace
}  // namespace ringside
