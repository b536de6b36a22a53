// Datasets: an in-memory dataset read from IDX files (Fashion-MNIST from Debian's
// dataset-fashion-mnist package, or any MNIST-format directory) and a deterministic
// synthetic dataset of any size whose labels come from a fixed random teacher network.
#ifndef RINGSIDE_COMMON_DATASET_H_
#define RINGSIDE_COMMON_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ringside {

// Where Debian's dataset-fashion-mnist package puts the gzipped IDX files.
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// A labelled dataset of fixed-size float samples. Implementations are immutable after
// construction: every method is const and thread-safe.
class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  // Shape of one sample as [channels, height, width]; input_dim() = c * h * w.
  virtual int channels() const = 0;
  virtual int height() const = 0;
  virtual int width() const = 0;
  int input_dim() const { return channels() * height() * width(); }
  virtual int num_classes() const = 0;

  // Copies samples `indices` (each in [0, size())) into x [indices.size(), input_dim()]
  // and their labels into y [indices.size()]. Host memory.
  virtual void Gather(absl::Span<const int64_t> indices, float* x,
                      int32_t* y) const = 0;
};

struct DatasetSplits {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> test;
};

// Reads train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte (each optionally with a .gz suffix) from `dir`. Pixels are
// scaled to [0, 1], then normalised to zero mean and unit variance with the training
// set's mean and standard deviation (applied to both splits). Errors name the file:
// NotFound (missing), DataLoss (truncated, bad magic, labels out of range, counts that
// disagree), InvalidArgument (unusable dimensions).
absl::StatusOr<DatasetSplits> LoadIdxDataset(const std::string& dir);

struct SyntheticOptions {
  int64_t train_size = 60000;
  int64_t test_size = 10000;
  int channels = 1;
  int height = 28;
  int width = 28;
  int num_classes = 10;
  uint64_t seed = 1;
  // Memory the process may use for the dataset's sample indices (see
  // MakeSyntheticDataset); 0: what the machine has available now (AvailableMemoryBytes).
  int64_t memory_limit_bytes = 0;
};

// Bytes of index arrays a training process allocates per sample of a split: an epoch's
// permutation and this rank's share of it (common/sharder.cc), 8 bytes each. A
// synthetic dataset costs no memory for its samples, but its size does cost this.
inline constexpr int64_t kIndexBytesPerSample = 2 * static_cast<int64_t>(sizeof(int64_t));

// Memory available to a new allocation now: /proc/meminfo's MemAvailable, else (no
// /proc) the free physical pages. -1 if neither is known.
int64_t AvailableMemoryBytes();

// A synthetic classification task: inputs with mean 0 and variance 1 per feature
// (Irwin-Hall of four uniforms: close to N(0, 1), tails cut at +-3.46), generated on
// the fly from (seed, split, index) by a counter-based hash, so any size costs no
// memory and a sample does not depend on the rank, strategy or batch that gathers it;
// label = argmax of a fixed random teacher MLP (at most 64 block sums of the input ->
// 64 softsign -> classes) drawn from `seed`. Generating a sample costs a few microseconds
// (one hash per feature, no transcendental; about 4K multiply-adds to label it). The
// same options always give the same samples. Errors: InvalidArgument for non-positive
// sizes, and for sizes whose sample indices (kIndexBytesPerSample x (train + test)) do
// not fit in options.memory_limit_bytes (or the memory available), naming both amounts,
// instead of a std::bad_alloc abort when training starts.
absl::StatusOr<DatasetSplits> MakeSyntheticDataset(const SyntheticOptions& options);
// MakeSyntheticDataset's checks alone (cheap: nothing is built).
absl::Status CheckSyntheticOptions(const SyntheticOptions& options);

// Resolves a dataset spec:
//   "fashion-mnist"                      Debian's Fashion-MNIST (kFashionMnistDir)
//   "synthetic"                          SyntheticOptions defaults
//   "synthetic:train=N,test=M,shape=CxHxW,classes=K,seed=S"  (any subset of keys)
//   anything else                        a directory of MNIST-format IDX files
absl::StatusOr<DatasetSplits> LoadDataset(absl::string_view spec);

// The cheap part of LoadDataset, for flag checks before anything starts: parses a
// synthetic spec and checks its sizes, shape, classes and memory as
// MakeSyntheticDataset does, without building anything. OK for fashion-mnist and
// directories (their files are checked when read). Errors as LoadDataset's.
absl::Status CheckDatasetSpec(absl::string_view spec);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_DATASET_H_
