// Fuzz entry point for the IDX reader (common/idx_dataset.cc, LoadIdxDataset).
//
// Input: up to four files separated by kSeparator, in the order train images, train
// labels, test images, test labels; each is written to a scratch directory under its
// IDX name (a missing part leaves its file absent). Gzipped parts are read through
// zlib like the real .gz files (gzread decodes a gzip stream whatever the name).
// A load that succeeds must describe a usable dataset: every sample gathers.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/dataset.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

constexpr char kSeparator[] = "|IDX|";
constexpr const char* kNames[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

void CheckGathers(const ringside::Dataset& d) {
  using ringside::fuzz::Require;
  Require(d.size() > 0 && d.input_dim() > 0 && d.num_classes() >= 2, "dataset shape");
  std::vector<float> x(static_cast<size_t>(d.input_dim()));
  int32_t y = -1;
  for (int64_t index : {int64_t{0}, d.size() - 1}) {
    d.Gather({&index, 1}, x.data(), &y);
    Require(y >= 0 && y < d.num_classes(), "label in range");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = ringside::fuzz::ScratchDir();
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<absl::string_view> parts = absl::StrSplit(input, kSeparator);
  for (size_t i = 0; i < 4; ++i) {
    const std::string path = dir + "/" + kNames[i];
    std::remove(path.c_str());
    if (i < parts.size()) ringside::fuzz::WriteFileOrDie(path, parts[i].data(), parts[i].size());
  }
  absl::StatusOr<ringside::DatasetSplits> splits = ringside::LoadIdxDataset(dir);
  if (splits.ok()) {
    CheckGathers(*splits->train);
    CheckGathers(*splits->test);
    ringside::fuzz::Require(splits->train->input_dim() == splits->test->input_dim(),
                            "splits share a shape");
  }
  return 0;
}
