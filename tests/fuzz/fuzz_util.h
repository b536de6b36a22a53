// Helpers shared by the fuzz entry points (tests/fuzz/*_fuzzer.cc).
#ifndef RINGSIDE_TESTS_FUZZ_FUZZ_UTIL_H_
#define RINGSIDE_TESTS_FUZZ_FUZZ_UTIL_H_

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ringside {
namespace fuzz {

// A directory private to this process for the files an entry point hands to a reader
// that takes paths: under $TEST_TMPDIR (bazel test), else /dev/shm (no disk writes per
// execution), else $TMPDIR or /tmp. Created once; the same path for the process's
// life. Aborts if it cannot be made (the run would test nothing).
inline const std::string& ScratchDir() {
  static const std::string* dir = [] {
    const char* root = std::getenv("TEST_TMPDIR");
    struct stat st;
    if (root == nullptr && stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
        access("/dev/shm", W_OK) == 0) {
      root = "/dev/shm";
    }
    if (root == nullptr) root = std::getenv("TMPDIR");
    if (root == nullptr) root = "/tmp";
    auto* path = new std::string(std::string(root) + "/ringside_fuzz." +
                                 std::to_string(static_cast<long>(getpid())));
    if (mkdir(path->c_str(), 0700) != 0 && !(stat(path->c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
      std::perror(path->c_str());
      std::abort();
    }
    return path;
  }();
  return *dir;
}

// Replaces `path` with `size` bytes at `data`. Aborts on a write error.
inline void WriteFileOrDie(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) ||
      std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

// Aborts with `what` when `ok` is false: a broken invariant, which libFuzzer reports as
// a crash (and the regression test as a failure).
inline void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace fuzz
}  // namespace ringside

#endif  // RINGSIDE_TESTS_FUZZ_FUZZ_UTIL_H_
