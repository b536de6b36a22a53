// MakeSyntheticDataset: samples generated on demand from (seed, split, index), labelled
// by a fixed random teacher network.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "common/dataset.h"
#include "common/random.h"

namespace ringside {
namespace {

constexpr int kHidden = 64;
// The teacher reads the input through at most kPooled block sums (consecutive
// features), so labelling a sample costs about input_dim adds and kPooled x kHidden
// multiply-adds instead of input_dim x kHidden.
constexpr int kPooled = 64;
// Scratch floats Teacher::Logits needs.
constexpr int kTeacherScratch = kPooled + kHidden;

// Limits that keep the teacher's weights and calibration affordable.
constexpr int64_t kMaxInputDim = int64_t{1} << 20;
constexpr int kMaxClasses = 1024;
// Indices must fit below the split bits of the per-sample stream key.
constexpr int64_t kMaxSize = int64_t{1} << 48;

// Stream ids: the third is private to the teacher's calibration.
constexpr uint64_t kTrainSplit = 0;
constexpr uint64_t kTestSplit = 1;
constexpr uint64_t kCalibrationSplit = 2;
// Calibration samples used to balance the classes: as many as fit a budget of
// first-layer multiply-adds (4096 for 28x28 inputs), within [256, 4096].
constexpr int64_t kCalibrationBudget = int64_t{1} << 30;
constexpr int64_t kMinCalibrationSamples = 256;
constexpr int64_t kMaxCalibrationSamples = 4096;
constexpr int kCalibrationSteps = 200;

// Irwin-Hall(4) standardised: the sum of four uniform 16-bit integers has mean
// 2 x 65535 and variance (2^32 - 1) / 3.
constexpr int32_t kSumOfFourMean = 2 * 65535;
constexpr float kInvSumOfFourStd = 2.6428998e-5f;  // 1 / sqrt((2^32 - 1) / 3)

// Fills x[0, dim) with approximately N(0, 1) features for one sample: feature i is the
// standardised sum of the four 16-bit words of Mix64(key + i), key drawn from (seed,
// split, index). Mean 0 and variance 1 exactly, tails cut at +-3.46 (Irwin-Hall of 4
// uniforms); one hash, integer adds and one float multiply per feature, no
// transcendental (Box-Muller's log, sqrt and cos per feature made generating a batch
// cost more than the small models' forward and backward). Feature i does not depend on
// the others, and the same (seed, split, index) always gives the same bits. Integer
// arithmetic and one rounding per feature, so the AVX-512 clone (8 hashes at a time,
// picked by the loader on CPUs that have it) gives the same bits as the baseline.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=skylake-avx512", "default")))
#endif
void GenerateFeatures(uint64_t seed, uint64_t split, int64_t index, int dim, float* x) {
  const uint64_t key = Mix64(seed ^ Mix64((split << 56) + static_cast<uint64_t>(index)));
  for (int i = 0; i < dim; ++i) {
    const uint64_t h = Mix64(key + static_cast<uint64_t>(i));
    const int32_t sum = static_cast<int32_t>((h & 0xffff) + ((h >> 16) & 0xffff) +
                                             ((h >> 32) & 0xffff) + (h >> 48));
    x[i] = static_cast<float>(sum - kSumOfFourMean) * kInvSumOfFourStd;
  }
}

// The labelling network: logits = W2 softsign(W1 pool(x)) + b2 (softsign(h) =
// h / (1 + |h|)), label = argmax (lowest
// index on ties), where pool(x) sums blocks of ceil(input_dim / kPooled) consecutive
// features (scaled to unit variance). W1 and W2 are N(0, 1 / fan_in); W2's rows and b2 are then calibrated on
// samples from a private stream so that every class has roughly the same frequency
// (an uncalibrated random teacher favours some classes by 2x or more).
class Teacher {
 public:
  Teacher(int input_dim, int num_classes, uint64_t seed)
      : input_dim_(input_dim),
        num_classes_(num_classes),
        block_((input_dim + kPooled - 1) / kPooled),
        pooled_dim_((input_dim + block_ - 1) / block_),
        w1t_(static_cast<size_t>(pooled_dim_) * kHidden),
        w2_(static_cast<size_t>(num_classes) * kHidden),
        b2_(num_classes, 0.0f) {
    Rng rng(Mix64(seed ^ 0x7465616368657221ULL));
    const float scale1 = 1.0f / std::sqrt(static_cast<float>(pooled_dim_));
    // W1 stored transposed, [pooled_dim, kHidden], so the hidden layer is a sequence of
    // contiguous axpys (vectorisable without reordering any sum).
    for (int j = 0; j < kHidden; ++j) {
      for (int k = 0; k < pooled_dim_; ++k) {
        w1t_[static_cast<size_t>(k) * kHidden + j] = rng.Normal() * scale1;
      }
    }
    const float scale2 = 1.0f / std::sqrt(static_cast<float>(kHidden));
    for (float& w : w2_) w = rng.Normal() * scale2;
    Calibrate(seed);
  }

  int input_dim() const { return input_dim_; }
  int num_classes() const { return num_classes_; }

  // Computes the logits of `x` into logits[0, num_classes). `scratch` holds
  // kTeacherScratch floats.
  void Logits(const float* x, float* scratch, float* logits) const {
    float* pooled = scratch;
    float* hidden = scratch + kPooled;
    for (int p = 0; p < pooled_dim_; ++p) {
      const int begin = p * block_;
      const int end = std::min(input_dim_, begin + block_);
      float sum = 0.0f;
      for (int k = begin; k < end; ++k) sum += x[k];
      pooled[p] = sum / std::sqrt(static_cast<float>(end - begin));
    }
    for (int j = 0; j < kHidden; ++j) hidden[j] = 0.0f;
    for (int k = 0; k < pooled_dim_; ++k) {
      const float xk = pooled[k];
      const float* row = w1t_.data() + static_cast<size_t>(k) * kHidden;
      for (int j = 0; j < kHidden; ++j) hidden[j] += row[j] * xk;
    }
    // Softsign, a tanh-like squashing without a transcendental (tanh was as costly as
    // generating the features).
    for (int j = 0; j < kHidden; ++j) hidden[j] = hidden[j] / (1.0f + std::fabs(hidden[j]));
    for (int c = 0; c < num_classes_; ++c) {
      const float* row = w2_.data() + static_cast<size_t>(c) * kHidden;
      float sum = b2_[c];
      for (int j = 0; j < kHidden; ++j) sum += row[j] * hidden[j];
      logits[c] = sum;
    }
  }

 private:
  static int ArgMax(const float* v, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i) {
      if (v[i] > v[best]) best = i;
    }
    return best;
  }

  // Standardises each logit over the calibration samples, then nudges the biases
  // toward equal class frequencies with a decaying step.
  void Calibrate(uint64_t seed) {
    const int m =
        static_cast<int>(std::clamp(kCalibrationBudget / (int64_t{pooled_dim_} * kHidden),
                                    kMinCalibrationSamples, kMaxCalibrationSamples));
    const int k = num_classes_;
    std::vector<float> x(input_dim_);
    std::vector<float> scratch(kTeacherScratch);
    std::vector<float> logits(static_cast<size_t>(m) * k);
    for (int i = 0; i < m; ++i) {
      GenerateFeatures(seed, kCalibrationSplit, i, input_dim_, x.data());
      Logits(x.data(), scratch.data(), logits.data() + static_cast<size_t>(i) * k);
    }
    for (int c = 0; c < k; ++c) {
      double sum = 0, sum_sq = 0;
      for (int i = 0; i < m; ++i) {
        const double v = logits[static_cast<size_t>(i) * k + c];
        sum += v;
        sum_sq += v * v;
      }
      const double mean = sum / m;
      const double var = sum_sq / m - mean * mean;
      const double inv_std = var > 1e-12 ? 1.0 / std::sqrt(var) : 1.0;
      for (int j = 0; j < kHidden; ++j) {
        w2_[static_cast<size_t>(c) * kHidden + j] *= static_cast<float>(inv_std);
      }
      b2_[c] = static_cast<float>(-mean * inv_std);
      for (int i = 0; i < m; ++i) {
        float& v = logits[static_cast<size_t>(i) * k + c];
        v = static_cast<float>((v - mean) * inv_std);
      }
    }
    std::vector<float> bias(k, 0.0f);
    std::vector<float> shifted(k);
    std::vector<int> counts(k);
    for (int step = 0; step < kCalibrationSteps; ++step) {
      std::fill(counts.begin(), counts.end(), 0);
      for (int i = 0; i < m; ++i) {
        const float* row = logits.data() + static_cast<size_t>(i) * k;
        for (int c = 0; c < k; ++c) shifted[c] = row[c] + bias[c];
        ++counts[ArgMax(shifted.data(), k)];
      }
      const float rate = 1.0f - static_cast<float>(step) / kCalibrationSteps;
      for (int c = 0; c < k; ++c) {
        bias[c] += rate * (1.0f - static_cast<float>(counts[c]) * k / m);
      }
    }
    for (int c = 0; c < k; ++c) b2_[c] += bias[c];
  }

  int input_dim_;
  int num_classes_;
  int block_;       // Features per pooled input (the last block may be shorter).
  int pooled_dim_;  // ceil(input_dim / block_) <= kPooled.
  std::vector<float> w1t_;  // [pooled_dim, kHidden]
  std::vector<float> w2_;   // [num_classes, kHidden]
  std::vector<float> b2_;   // [num_classes]
};

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(const SyntheticOptions& options, uint64_t split, int64_t size,
                   std::shared_ptr<const Teacher> teacher)
      : options_(options), split_(split), size_(size), teacher_(std::move(teacher)) {}

  int64_t size() const override { return size_; }
  int channels() const override { return options_.channels; }
  int height() const override { return options_.height; }
  int width() const override { return options_.width; }
  int num_classes() const override { return options_.num_classes; }

  void Gather(absl::Span<const int64_t> indices, float* x, int32_t* y) const override {
    const int dim = input_dim();
    std::vector<float> scratch(kTeacherScratch);
    std::vector<float> logits(options_.num_classes);
    for (size_t i = 0; i < indices.size(); ++i) {
      float* row = x + i * static_cast<size_t>(dim);
      GenerateFeatures(options_.seed, split_, indices[i], dim, row);
      teacher_->Logits(row, scratch.data(), logits.data());
      int best = 0;
      for (int c = 1; c < options_.num_classes; ++c) {
        if (logits[c] > logits[best]) best = c;
      }
      y[i] = best;
    }
  }

 private:
  SyntheticOptions options_;
  uint64_t split_;
  int64_t size_;
  std::shared_ptr<const Teacher> teacher_;
};

}  // namespace

absl::Status CheckSyntheticOptions(const SyntheticOptions& options) {
  if (options.train_size <= 0 || options.train_size > kMaxSize) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic dataset: train size ",
                                                   options.train_size, " must be in [1, ",
                                                   kMaxSize, "]"));
  }
  if (options.test_size <= 0 || options.test_size > kMaxSize) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic dataset: test size ",
                                                   options.test_size, " must be in [1, ",
                                                   kMaxSize, "]"));
  }
  if (options.channels <= 0 || options.height <= 0 || options.width <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic dataset: shape ", options.channels, "x", options.height,
                     "x", options.width, " must have positive dimensions"));
  }
  // c * h cannot overflow; with it capped, neither can the product with w.
  const int64_t plane = int64_t{options.channels} * options.height;
  const int64_t input_dim = std::min(plane, kMaxInputDim + 1) * options.width;
  if (input_dim > kMaxInputDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic dataset: shape ", options.channels, "x", options.height,
                     "x", options.width, " has more than ", kMaxInputDim, " features"));
  }
  if (options.num_classes < 2 || options.num_classes > kMaxClasses) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic dataset: ", options.num_classes,
                     " classes, must be in [2, ", kMaxClasses, "]"));
  }
  // Both sizes are below 2^48: the sum and the product cannot overflow.
  const int64_t index_bytes = (options.train_size + options.test_size) * kIndexBytesPerSample;
  const int64_t limit =
      options.memory_limit_bytes > 0 ? options.memory_limit_bytes : AvailableMemoryBytes();
  if (limit > 0 && index_bytes > limit) {
    constexpr double kMiB = 1 << 20;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "synthetic dataset: train=%d, test=%d need %.0f MiB for their sample indices (%d bytes a "
        "sample), more than the %.0f MiB of memory %s",
        options.train_size, options.test_size, index_bytes / kMiB, kIndexBytesPerSample,
        limit / kMiB, options.memory_limit_bytes > 0 ? "allowed" : "available (MemAvailable)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DatasetSplits> MakeSyntheticDataset(const SyntheticOptions& options) {
  if (absl::Status s = CheckSyntheticOptions(options); !s.ok()) return s;
  const int64_t input_dim =
      int64_t{options.channels} * options.height * options.width;  // Checked above.
  auto teacher = std::make_shared<const Teacher>(static_cast<int>(input_dim),
                                                 options.num_classes, options.seed);
  DatasetSplits splits;
  splits.train = std::make_unique<SyntheticDataset>(options, kTrainSplit,
                                                    options.train_size, teacher);
  splits.test =
      std::make_unique<SyntheticDataset>(options, kTestSplit, options.test_size, teacher);
  return splits;
}

}  // namespace ringside
