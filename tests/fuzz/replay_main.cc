// main() for a fuzz entry point outside libFuzzer (the default gcc build): feeds each
// file named on the command line, and each regular file in each directory named (in
// name order), to LLVMFuzzerTestOneInput once. A directory that does not exist is
// skipped (a target without regressions has no regressions/<target>/). A crash or an
// abort in the entry point ends the program, which fails the test that runs it.
// Exit status: 0 after replaying at least one input, 1 when there was none (a seed
// corpus went missing), 2 for an unreadable file.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string path = dir + "/" + e->d_name;
      if (e->d_name[0] != '.' && IsFile(path)) files.push_back(path);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (IsDir(arg)) {
      for (std::string& f : FilesIn(arg)) inputs.push_back(std::move(f));
    } else if (IsFile(arg)) {
      inputs.push_back(arg);
    }
  }
  for (const std::string& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::fprintf(stderr, "replay: %zu inputs, no crash\n", inputs.size());
  return inputs.empty() ? 1 : 0;
}
