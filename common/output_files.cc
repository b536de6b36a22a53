#include "common/output_files.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace ringside {

std::string OutputFileName(OutputFile file, OutputOwner owner, int index, int run) {
  std::string name = file == OutputFile::kMetrics ? "metrics" : "trace";
  switch (owner) {
    case OutputOwner::kSingle: break;
    case OutputOwner::kRank: absl::StrAppend(&name, ".rank", index); break;
    case OutputOwner::kShard: absl::StrAppend(&name, ".shard", index); break;
  }
  if (file == OutputFile::kTrace && run >= 2) absl::StrAppend(&name, ".run", run);
  absl::StrAppend(&name, file == OutputFile::kMetrics ? ".jsonl" : ".json");
  return name;
}

std::string TraceFileForNewRun(const std::string& out_dir, OutputOwner owner, int index,
                               bool resuming) {
  for (int run = 1;; ++run) {
    const std::string path =
        absl::StrCat(out_dir, "/", OutputFileName(OutputFile::kTrace, owner, index, run));
    std::error_code error;
    if (!resuming || !std::filesystem::exists(path, error)) return path;
  }
}

}  // namespace ringside
