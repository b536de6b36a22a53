#include "common/dataset.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// ---------------------------------------------------------------------------------
// Helpers that write IDX files.

std::string NewTempDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
  std::string name = absl::StrCat(info->test_suite_name(), ".", info->name());
  std::replace(name.begin(), name.end(), '/', '_');  // Parameterised test names.
  std::string dir = absl::StrCat(root != nullptr ? root : "/tmp", "/", name);
  mkdir(dir.c_str(), 0755);
  return dir;
}

void AppendBigEndian32(uint32_t v, std::string* out) {
  out->push_back(static_cast<char>(v >> 24));
  out->push_back(static_cast<char>(v >> 16));
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

std::string ImagesFile(uint32_t count, uint32_t rows, uint32_t cols,
                       const std::vector<uint8_t>& pixels, uint32_t magic = 0x803) {
  std::string out;
  AppendBigEndian32(magic, &out);
  AppendBigEndian32(count, &out);
  AppendBigEndian32(rows, &out);
  AppendBigEndian32(cols, &out);
  out.append(pixels.begin(), pixels.end());
  return out;
}

std::string LabelsFile(const std::vector<uint8_t>& labels, uint32_t magic = 0x801) {
  std::string out;
  AppendBigEndian32(magic, &out);
  AppendBigEndian32(static_cast<uint32_t>(labels.size()), &out);
  out.append(labels.begin(), labels.end());
  return out;
}

void WritePlain(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), bytes.size());
  ASSERT_TRUE(file.good()) << path;
}

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(gzwrite(file, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

std::string ReadAll(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// Writes `name` (plain or gzipped as "<name>.gz") into `dir`.
void WriteIdx(const std::string& dir, const std::string& name, const std::string& bytes,
              bool gzip) {
  if (gzip) {
    WriteGzip(absl::StrCat(dir, "/", name, ".gz"), bytes);
  } else {
    WritePlain(absl::StrCat(dir, "/", name), bytes);
  }
}

constexpr char kTrainImages[] = "train-images-idx3-ubyte";
constexpr char kTrainLabels[] = "train-labels-idx1-ubyte";
constexpr char kTestImages[] = "t10k-images-idx3-ubyte";
constexpr char kTestLabels[] = "t10k-labels-idx1-ubyte";

// A small valid dataset: 2x3 images, 3 classes.
struct SmallIdx {
  int rows = 2;
  int cols = 3;
  std::vector<uint8_t> train_pixels;
  std::vector<uint8_t> train_labels = {0, 1, 2, 1, 0};
  std::vector<uint8_t> test_pixels;
  std::vector<uint8_t> test_labels = {2, 0};

  SmallIdx() {
    for (int i = 0; i < 5 * 6; ++i) train_pixels.push_back(static_cast<uint8_t>(i * 8));
    for (int i = 0; i < 2 * 6; ++i) test_pixels.push_back(static_cast<uint8_t>(255 - i));
  }

  void Write(const std::string& dir, bool gzip) const {
    WriteIdx(dir, kTrainImages, ImagesFile(5, rows, cols, train_pixels), gzip);
    WriteIdx(dir, kTrainLabels, LabelsFile(train_labels), gzip);
    WriteIdx(dir, kTestImages, ImagesFile(2, rows, cols, test_pixels), gzip);
    WriteIdx(dir, kTestLabels, LabelsFile(test_labels), gzip);
  }
};

std::vector<int64_t> Range(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

void ExpectError(const absl::StatusOr<DatasetSplits>& result, absl::StatusCode code,
                 const std::string& substring) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), substring))
      << result.status() << " does not mention '" << substring << "'";
}

// ---------------------------------------------------------------------------------
// IDX loading.

class IdxLoadTest : public testing::TestWithParam<bool> {};

TEST_P(IdxLoadTest, LoadsAndNormalisesWithTrainStatistics) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx data;
  data.Write(dir, gzip);

  absl::StatusOr<DatasetSplits> splits = LoadIdxDataset(dir);
  ASSERT_TRUE(splits.ok()) << splits.status();
  const Dataset& train = *splits->train;
  const Dataset& test = *splits->test;
  EXPECT_EQ(train.size(), 5);
  EXPECT_EQ(test.size(), 2);
  for (const Dataset* d : {&train, &test}) {
    EXPECT_EQ(d->channels(), 1);
    EXPECT_EQ(d->height(), 2);
    EXPECT_EQ(d->width(), 3);
    EXPECT_EQ(d->input_dim(), 6);
    EXPECT_EQ(d->num_classes(), 3);
  }

  double mean = 0;
  for (uint8_t p : data.train_pixels) mean += p / 255.0;
  mean /= data.train_pixels.size();
  double var = 0;
  for (uint8_t p : data.train_pixels) var += (p / 255.0 - mean) * (p / 255.0 - mean);
  const double stddev = std::sqrt(var / data.train_pixels.size());

  std::vector<float> x(5 * 6);
  std::vector<int32_t> y(5);
  train.Gather(Range(5), x.data(), y.data());
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < 30; ++i) {
    EXPECT_NEAR(x[i], (data.train_pixels[i] / 255.0 - mean) / stddev, 1e-5) << i;
    sum += x[i];
    sum_sq += x[i] * x[i];
  }
  EXPECT_NEAR(sum / 30, 0.0, 1e-5);
  EXPECT_NEAR(sum_sq / 30, 1.0, 1e-5);
  EXPECT_EQ(y, (std::vector<int32_t>{0, 1, 2, 1, 0}));

  // The test split uses the training statistics, and Gather follows `indices`.
  std::vector<float> tx(3 * 6);
  std::vector<int32_t> ty(3);
  test.Gather({1, 0, 1}, tx.data(), ty.data());
  EXPECT_EQ(ty, (std::vector<int32_t>{0, 2, 0}));
  for (int j = 0; j < 6; ++j) {
    EXPECT_NEAR(tx[j], (data.test_pixels[6 + j] / 255.0 - mean) / stddev, 1e-5);
    EXPECT_NEAR(tx[6 + j], (data.test_pixels[j] / 255.0 - mean) / stddev, 1e-5);
    EXPECT_EQ(tx[12 + j], tx[j]);
  }
}

TEST_P(IdxLoadTest, MissingFileIsNotFound) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx().Write(dir, gzip);
  const std::string path = absl::StrCat(dir, "/", kTestLabels, gzip ? ".gz" : "");
  ASSERT_EQ(std::remove(path.c_str()), 0);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kNotFound,
              absl::StrCat(dir, "/", kTestLabels));
}

TEST_P(IdxLoadTest, TruncatedPixelsAreDataLoss) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx data;
  data.Write(dir, gzip);
  // Declares 5 images of 6 pixels but holds only 4.
  std::vector<uint8_t> short_pixels(data.train_pixels.begin(),
                                    data.train_pixels.begin() + 24);
  WriteIdx(dir, kTrainImages, ImagesFile(5, 2, 3, short_pixels), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss,
              "truncated: expected 30 bytes of pixels, got 24");
}

TEST_P(IdxLoadTest, TruncatedHeaderIsDataLoss) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx().Write(dir, gzip);
  WriteIdx(dir, kTrainLabels, std::string("\0\0\x08\x01\0\0", 6), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss, kTrainLabels);
  WriteIdx(dir, kTrainLabels, "", gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss, "truncated");
}

TEST_P(IdxLoadTest, BadMagicIsDataLoss) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx data;
  data.Write(dir, gzip);
  // An images file where a labels file belongs.
  WriteIdx(dir, kTestLabels, ImagesFile(2, 2, 3, data.test_pixels), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss, "bad magic");
  data.Write(dir, gzip);
  WriteIdx(dir, kTrainImages, ImagesFile(5, 2, 3, data.train_pixels, 0x0803FFFF), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss, kTrainImages);
}

TEST_P(IdxLoadTest, CountMismatchIsDataLoss) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx().Write(dir, gzip);
  WriteIdx(dir, kTrainLabels, LabelsFile({0, 1, 2, 1}), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss, "has 5 images but");
}

TEST_P(IdxLoadTest, TestLabelOutOfRangeIsDataLoss) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx().Write(dir, gzip);
  WriteIdx(dir, kTestLabels, LabelsFile({1, 3}), gzip);  // Train labels are 0..2.
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss, kTestLabels);
}

TEST_P(IdxLoadTest, SingleClassIsRejected) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx().Write(dir, gzip);
  WriteIdx(dir, kTrainLabels, LabelsFile({0, 0, 0, 0, 0}), gzip);
  WriteIdx(dir, kTestLabels, LabelsFile({0, 0}), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kInvalidArgument, "2 classes");
}

TEST_P(IdxLoadTest, BadDimensionsAreInvalid) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx data;
  data.Write(dir, gzip);
  WriteIdx(dir, kTrainImages, ImagesFile(5, 0, 3, {}), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kInvalidArgument, kTrainImages);
  WriteIdx(dir, kTrainImages, ImagesFile(0, 2, 3, {}), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kInvalidArgument, kTrainImages);
  WriteIdx(dir, kTrainImages, ImagesFile(5, 0x80000000u, 3, {}), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kInvalidArgument, kTrainImages);
  // Sizes whose product overflows, or images too large to index with an int.
  WriteIdx(dir, kTrainImages, ImagesFile(0x7fffffff, 0x7fffffff, 0x7fffffff, {}), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kInvalidArgument, "large");
  WriteIdx(dir, kTrainImages, ImagesFile(1, 65536, 65536, {}), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kInvalidArgument, "large");
  // Test images must have the training images' shape.
  data.Write(dir, gzip);
  WriteIdx(dir, kTestImages, ImagesFile(2, 3, 2, data.test_pixels), gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kInvalidArgument, kTestImages);
}

TEST_P(IdxLoadTest, TrailingBytesAreDataLoss) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx().Write(dir, gzip);
  WriteIdx(dir, kTestLabels, LabelsFile({1, 2}) + "xyz", gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss, "3 unexpected bytes");
}

// Issue #23 (hostile input): a header declaring far more than the file holds is
// refused without allocating what it declares (a plain file up front, from its size;
// a gzip stream as it runs dry: the buffer grows only as data arrives).
TEST_P(IdxLoadTest, HugeDeclaredSizeIsRefusedWithoutAllocatingIt) {
  const bool gzip = GetParam();
  const std::string dir = NewTempDir();
  SmallIdx data;
  data.Write(dir, gzip);
  // 2^20 images of 1000x1000 = 1.05e12 bytes declared (under the 2^40 cap); 6 held.
  WriteIdx(dir, kTrainImages, ImagesFile(1 << 20, 1000, 1000, {1, 2, 3, 4, 5, 6}), gzip);
  const auto start = std::chrono::steady_clock::now();
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss,
              "truncated: expected 1048576000000 bytes of pixels, got 6");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // The same for labels.
  data.Write(dir, gzip);
  std::string labels = LabelsFile({0, 1});
  labels[4] = 0x7f;  // Count 0x7f000002.
  WriteIdx(dir, kTrainLabels, labels, gzip);
  ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss,
              "truncated: expected 2130706434 bytes of labels, got 2");
}

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, IdxLoadTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "Gzip" : "Plain";
                         });

TEST(IdxLoadTest, PrefersTheGzippedFile) {
  const std::string dir = NewTempDir();
  SmallIdx().Write(dir, /*gzip=*/true);
  WritePlain(absl::StrCat(dir, "/", kTrainImages), "not an IDX file");
  absl::StatusOr<DatasetSplits> splits = LoadIdxDataset(dir);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train->size(), 5);
}

TEST(IdxLoadTest, MixedPlainAndGzipFiles) {
  const std::string dir = NewTempDir();
  SmallIdx data;
  data.Write(dir, /*gzip=*/false);
  std::remove(absl::StrCat(dir, "/", kTestImages).c_str());
  WriteIdx(dir, kTestImages, ImagesFile(2, 2, 3, data.test_pixels), /*gzip=*/true);
  absl::StatusOr<DatasetSplits> splits = LoadIdxDataset(dir);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->test->size(), 2);
}

// A larger training set so the gzip stream has a long middle to corrupt.
void WriteLargerGzipDataset(const std::string& dir) {
  const int n = 2000;
  std::vector<uint8_t> pixels(n * 28 * 28);
  uint32_t state = 12345;
  for (uint8_t& p : pixels) {
    state = state * 1103515245u + 12345u;
    p = static_cast<uint8_t>((state >> 16) % 64);  // Compressible but not trivial.
  }
  std::vector<uint8_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 10;
  WriteIdx(dir, kTrainImages, ImagesFile(n, 28, 28, pixels), true);
  WriteIdx(dir, kTrainLabels, LabelsFile(labels), true);
  WriteIdx(dir, kTestImages,
           ImagesFile(10, 28, 28,
                      std::vector<uint8_t>(pixels.begin(), pixels.begin() + 10 * 784)),
           true);
  WriteIdx(dir, kTestLabels, LabelsFile({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), true);
}

TEST(IdxLoadTest, CorruptGzipIsDataLoss) {
  const std::string dir = NewTempDir();
  WriteLargerGzipDataset(dir);
  ASSERT_TRUE(LoadIdxDataset(dir).ok());
  const std::string path = absl::StrCat(dir, "/", kTrainImages, ".gz");
  const std::string original = ReadAll(path);
  ASSERT_GT(original.size(), 1000u);
  // Corrupt at several places in the deflate stream and near the trailer; every one
  // must be reported, never crash or load silently.
  for (double where : {0.25, 0.5, 0.75, 0.999}) {
    SCOPED_TRACE(where);
    std::string corrupt = original;
    const size_t at = static_cast<size_t>(where * (corrupt.size() - 8));
    for (size_t i = at; i < at + 4 && i < corrupt.size(); ++i) corrupt[i] ^= 0x5A;
    WritePlain(path, corrupt);
    absl::StatusOr<DatasetSplits> splits = LoadIdxDataset(dir);
    ASSERT_FALSE(splits.ok());
    EXPECT_EQ(splits.status().code(), absl::StatusCode::kDataLoss) << splits.status();
    EXPECT_TRUE(absl::StrContains(splits.status().message(), kTrainImages))
        << splits.status();
  }
  // A cut-off gzip file is truncated data, as is one missing only its trailer.
  for (size_t keep : {original.size() / 2, original.size() - 4}) {
    SCOPED_TRACE(keep);
    WritePlain(path, original.substr(0, keep));
    ExpectError(LoadIdxDataset(dir), absl::StatusCode::kDataLoss, "truncated");
  }
}

// ---------------------------------------------------------------------------------
// LoadDataset specs.

TEST(LoadDatasetTest, DirectorySpec) {
  const std::string dir = NewTempDir();
  SmallIdx().Write(dir, /*gzip=*/true);
  absl::StatusOr<DatasetSplits> splits = LoadDataset(dir);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train->size(), 5);
  EXPECT_EQ(splits->test->num_classes(), 3);
}

TEST(LoadDatasetTest, UnknownSpecIsNotFound) {
  ExpectError(LoadDataset("/no/such/dir"), absl::StatusCode::kNotFound,
              "dataset '/no/such/dir' is not fashion-mnist, synthetic[:...] or a "
              "directory");
  ExpectError(LoadDataset("mnist"), absl::StatusCode::kNotFound, "'mnist'");
  // A directory without IDX files names the missing file.
  ExpectError(LoadDataset(NewTempDir()), absl::StatusCode::kNotFound, kTrainImages);
}

TEST(LoadDatasetTest, SyntheticSpec) {
  absl::StatusOr<DatasetSplits> splits =
      LoadDataset("synthetic:train=100,test=50,shape=3x4x5,classes=7,seed=9");
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train->size(), 100);
  EXPECT_EQ(splits->test->size(), 50);
  for (const auto* d : {splits->train.get(), splits->test.get()}) {
    EXPECT_EQ(d->channels(), 3);
    EXPECT_EQ(d->height(), 4);
    EXPECT_EQ(d->width(), 5);
    EXPECT_EQ(d->input_dim(), 60);
    EXPECT_EQ(d->num_classes(), 7);
  }
  SyntheticOptions options;
  options.train_size = 100;
  options.test_size = 50;
  options.channels = 3;
  options.height = 4;
  options.width = 5;
  options.num_classes = 7;
  options.seed = 9;
  absl::StatusOr<DatasetSplits> direct = MakeSyntheticDataset(options);
  ASSERT_TRUE(direct.ok());
  std::vector<float> a(10 * 60), b(10 * 60);
  std::vector<int32_t> ya(10), yb(10);
  splits->train->Gather(Range(10), a.data(), ya.data());
  direct->train->Gather(Range(10), b.data(), yb.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(ya, yb);

  // Partial specs keep the other defaults.
  absl::StatusOr<DatasetSplits> partial = LoadDataset("synthetic:test=20");
  ASSERT_TRUE(partial.ok()) << partial.status();
  EXPECT_EQ(partial->train->size(), SyntheticOptions().train_size);
  EXPECT_EQ(partial->test->size(), 20);
  EXPECT_EQ(partial->train->input_dim(), 784);
  EXPECT_EQ(partial->train->num_classes(), 10);
}

TEST(LoadDatasetTest, DefaultSynthetic) {
  absl::StatusOr<DatasetSplits> splits = LoadDataset("synthetic");
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train->size(), 60000);
  EXPECT_EQ(splits->test->size(), 10000);
  EXPECT_EQ(splits->train->input_dim(), 784);
  EXPECT_EQ(splits->train->num_classes(), 10);
}

TEST(LoadDatasetTest, BadSyntheticSpecs) {
  const struct {
    const char* spec;
    const char* mentions;
  } kCases[] = {
      {"synthetic:", "key=value"},
      {"synthetic:train", "'train'"},
      {"synthetic:train=", "train"},
      {"synthetic:train=abc", "train"},
      {"synthetic:train=12x", "train"},
      {"synthetic:test=1.5", "test"},
      {"synthetic:classes=ten", "classes"},
      {"synthetic:seed=-1", "seed"},
      {"synthetic:shape=3x4", "shape"},
      {"synthetic:shape=3x4x5x6", "shape"},
      {"synthetic:shape=axbxc", "shape"},
      {"synthetic:size=10", "size"},
      {"synthetic:train=10,train=20", "train"},
      {"synthetic:train=10,,test=5", "key=value"},
      {"synthetic:train=0", "train size"},
      {"synthetic:test=-5", "test size"},
      {"synthetic:classes=1", "classes"},
      {"synthetic:shape=0x28x28", "shape"},
      {"synthetic:shape=1x-2x28", "shape"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.spec);
    ExpectError(LoadDataset(c.spec), absl::StatusCode::kInvalidArgument, c.mentions);
  }
}

// ---------------------------------------------------------------------------------
// Synthetic data.

SyntheticOptions SmallOptions() {
  SyntheticOptions options;
  options.train_size = 10000;
  options.test_size = 500;
  options.seed = 42;
  return options;
}

struct Gathered {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Gathered GatherAll(const Dataset& d, const std::vector<int64_t>& indices) {
  Gathered g;
  g.x.resize(indices.size() * d.input_dim());
  g.y.resize(indices.size());
  d.Gather(indices, g.x.data(), g.y.data());
  return g;
}

TEST(SyntheticTest, DeterministicBytes) {
  absl::StatusOr<DatasetSplits> a = MakeSyntheticDataset(SmallOptions());
  absl::StatusOr<DatasetSplits> b = MakeSyntheticDataset(SmallOptions());
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<int64_t> indices = {0, 17, 9999, 3, 17};
  const Gathered ga = GatherAll(*a->train, indices);
  const Gathered gb = GatherAll(*b->train, indices);
  ASSERT_EQ(ga.x.size(), gb.x.size());
  EXPECT_EQ(std::memcmp(ga.x.data(), gb.x.data(), ga.x.size() * sizeof(float)), 0);
  EXPECT_EQ(ga.y, gb.y);
  // A sample does not depend on what else is gathered with it.
  const Gathered single = GatherAll(*a->train, {9999});
  EXPECT_EQ(std::memcmp(single.x.data(), ga.x.data() + 2 * 784, 784 * sizeof(float)), 0);
  EXPECT_EQ(single.y[0], ga.y[2]);
  // Repeated indices give repeated samples.
  EXPECT_EQ(std::memcmp(ga.x.data() + 784, ga.x.data() + 4 * 784, 784 * sizeof(float)),
            0);
}

TEST(SyntheticTest, SeedAndSplitChangeTheData) {
  SyntheticOptions other = SmallOptions();
  other.seed = 43;
  absl::StatusOr<DatasetSplits> a = MakeSyntheticDataset(SmallOptions());
  absl::StatusOr<DatasetSplits> b = MakeSyntheticDataset(other);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<int64_t> indices = Range(200);
  const Gathered ga = GatherAll(*a->train, indices);
  const Gathered gb = GatherAll(*b->train, indices);
  const Gathered gt = GatherAll(*a->test, indices);
  int same_x = 0;
  for (size_t i = 0; i < ga.x.size(); ++i) {
    same_x += ga.x[i] == gb.x[i];
    same_x += ga.x[i] == gt.x[i];
  }
  EXPECT_LT(same_x, 10);
  int same_y = 0;
  for (size_t i = 0; i < ga.y.size(); ++i) same_y += ga.y[i] == gb.y[i];
  EXPECT_LT(same_y, 60);  // About 20 of 200 agree by chance with 10 classes.
  // Different samples within a split differ too.
  EXPECT_NE(std::vector<float>(ga.x.begin(), ga.x.begin() + 784),
            std::vector<float>(ga.x.begin() + 784, ga.x.begin() + 2 * 784));
}

TEST(SyntheticTest, FeaturesAreStandardNormal) {
  absl::StatusOr<DatasetSplits> splits = MakeSyntheticDataset(SmallOptions());
  ASSERT_TRUE(splits.ok());
  const Gathered g = GatherAll(*splits->train, Range(500));
  double sum = 0, sum_sq = 0;
  for (float v : g.x) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double mean = sum / g.x.size();
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / g.x.size() - mean * mean, 1.0, 0.01);
}

TEST(SyntheticTest, LabelsInRangeAndBalanced) {
  for (uint64_t seed : {1, 42}) {
    SyntheticOptions options = SmallOptions();
    options.seed = seed;
    absl::StatusOr<DatasetSplits> splits = MakeSyntheticDataset(options);
    ASSERT_TRUE(splits.ok());
    const Gathered g = GatherAll(*splits->train, Range(10000));
    std::vector<int> counts(10);
    for (int32_t label : g.y) {
      ASSERT_GE(label, 0);
      ASSERT_LT(label, 10);
      ++counts[label];
    }
    for (int c = 0; c < 10; ++c) {
      EXPECT_GT(counts[c], 700) << "seed " << seed << " class " << c;
      EXPECT_LT(counts[c], 1300) << "seed " << seed << " class " << c;
    }
  }
}

TEST(SyntheticTest, ShapesAndSizesHonoured) {
  SyntheticOptions options;
  options.train_size = 3;
  options.test_size = 1;
  options.channels = 2;
  options.height = 1;
  options.width = 5;
  options.num_classes = 2;
  absl::StatusOr<DatasetSplits> splits = MakeSyntheticDataset(options);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train->size(), 3);
  EXPECT_EQ(splits->test->size(), 1);
  EXPECT_EQ(splits->train->input_dim(), 10);
  EXPECT_EQ(splits->test->num_classes(), 2);
  const Gathered g = GatherAll(*splits->test, {0});
  EXPECT_EQ(g.x.size(), 10u);
  EXPECT_TRUE(g.y[0] == 0 || g.y[0] == 1);
  // Both classes occur even with a 10-feature input.
  const Gathered many = GatherAll(*splits->train, Range(200));
  const int ones = std::accumulate(many.y.begin(), many.y.end(), 0);
  EXPECT_GT(ones, 40);
  EXPECT_LT(ones, 160);
}

TEST(SyntheticTest, InvalidOptions) {
  auto code = [](auto mutate) {
    SyntheticOptions options;
    options.train_size = 10;
    options.test_size = 10;
    mutate(options);
    return MakeSyntheticDataset(options).status().code();
  };
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code([](SyntheticOptions& o) { o.train_size = 0; }), kInvalid);
  EXPECT_EQ(code([](SyntheticOptions& o) { o.test_size = -1; }), kInvalid);
  EXPECT_EQ(code([](SyntheticOptions& o) { o.channels = 0; }), kInvalid);
  EXPECT_EQ(code([](SyntheticOptions& o) { o.height = -3; }), kInvalid);
  EXPECT_EQ(code([](SyntheticOptions& o) { o.width = 0; }), kInvalid);
  EXPECT_EQ(code([](SyntheticOptions& o) { o.num_classes = 1; }), kInvalid);
  EXPECT_EQ(code([](SyntheticOptions& o) { o.num_classes = 0; }), kInvalid);
  // Too large to build a teacher for, without overflowing c * h * w.
  EXPECT_EQ(code([](SyntheticOptions& o) {
              o.channels = 1 << 30;
              o.height = 1 << 30;
              o.width = 1 << 30;
            }),
            kInvalid);
  EXPECT_EQ(code([](SyntheticOptions&) {}), absl::StatusCode::kOk);
}

// Issue #23: sizes that pass the range checks but whose sample indices cannot be
// allocated (16 bytes a sample in each training process) are refused in one line,
// instead of a std::bad_alloc abort (rc 134) once training starts.
TEST(SyntheticTest, SizesBeyondMemoryAreRefused) {
  SyntheticOptions options;
  options.train_size = 1000;
  options.test_size = 24;
  options.memory_limit_bytes = 1 << 20;
  EXPECT_TRUE(MakeSyntheticDataset(options).ok());  // 16 KiB of indices.
  options.train_size = 100000;                       // 1.5 MiB.
  absl::Status s = MakeSyntheticDataset(options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "synthetic dataset: train=100000, test=24 need 2 MiB for their sample indices (16 bytes a "
            "sample), more than the 1 MiB of memory allowed");
  EXPECT_EQ(CheckSyntheticOptions(options), s);

  // Against the memory this machine has available: 2^47 samples need 2 PiB.
  ASSERT_GT(AvailableMemoryBytes(), 0);
  const std::string spec = "synthetic:train=140737488355328,test=10";
  s = LoadDataset(spec).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StartsWith(s.message(), "dataset '" + spec +
                                                "': synthetic dataset: train=140737488355328, test=10 need "
                                                "2147483648 MiB for their sample indices"))
      << s;
  EXPECT_TRUE(absl::EndsWith(s.message(), "of memory available (MemAvailable)")) << s;
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  // The flag check says the same without building anything.
  EXPECT_EQ(CheckDatasetSpec(spec), s);
  EXPECT_TRUE(CheckDatasetSpec("synthetic:train=64,test=16").ok());
  EXPECT_TRUE(CheckDatasetSpec("synthetic").ok());
  EXPECT_TRUE(CheckDatasetSpec("fashion-mnist").ok());
  EXPECT_EQ(CheckDatasetSpec("synthetic:train=x").code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------
// The real Fashion-MNIST, when installed.

TEST(FashionMnistTest, LoadsDebianPackage) {
  struct stat st;
  if (stat(kFashionMnistDir, &st) != 0) {
    GTEST_SKIP() << kFashionMnistDir << " is not installed";
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<DatasetSplits> splits = LoadDataset("fashion-mnist");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(splits.ok()) << splits.status();
  std::printf("Loaded Fashion-MNIST in %.3f s\n", seconds);
  EXPECT_LT(seconds, 10.0);

  EXPECT_EQ(splits->train->size(), 60000);
  EXPECT_EQ(splits->test->size(), 10000);
  for (const auto* d : {splits->train.get(), splits->test.get()}) {
    EXPECT_EQ(d->channels(), 1);
    EXPECT_EQ(d->height(), 28);
    EXPECT_EQ(d->width(), 28);
    EXPECT_EQ(d->num_classes(), 10);
  }

  const Gathered g = GatherAll(*splits->train, Range(60000));
  double sum = 0, sum_sq = 0;
  for (float v : g.x) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double mean = sum / g.x.size();
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(std::sqrt(sum_sq / g.x.size() - mean * mean), 1.0, 1e-4);
  std::vector<int> counts(10);
  for (int32_t label : g.y) ++counts[label];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(counts[c], 6000) << c;

  const Gathered t = GatherAll(*splits->test, Range(10000));
  std::vector<int> test_counts(10);
  for (int32_t label : t.y) ++test_counts[label];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(test_counts[c], 1000) << c;
}

}  // namespace
}  // namespace ringside
