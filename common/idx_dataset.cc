// LoadIdxDataset: MNIST-format IDX files (plain or gzipped) read into memory.
//
// IDX layout: a big-endian uint32 magic 0x000008TD (T = 0x08 unsigned bytes, D = number
// of dimensions), D big-endian int32 sizes, then the payload in row-major order.
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/dataset.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;

// Largest payload a header may declare (elements of one byte).
constexpr int64_t kMaxElements = int64_t{1} << 40;

// Largest gzread request; a payload is read in a few calls of this size.
constexpr int64_t kReadChunk = int64_t{64} << 20;
// First gzread request of a payload; each next one is as large as what has arrived (up
// to kReadChunk), so a header that declares more than the file holds costs at most
// twice the bytes actually there, not the declared size.
constexpr int64_t kFirstReadChunk = int64_t{64} << 10;

// zlib's buffer per open file: the file's size within these bounds.
constexpr int64_t kMinGzBuffer = int64_t{8} << 10;
constexpr int64_t kMaxGzBuffer = int64_t{1} << 20;

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Size of the regular file at `path`, or -1.
int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : -1;
}

// "<dir>/<name>.gz" if it exists, else "<dir>/<name>" (which need not exist).
std::string ResolvePath(const std::string& dir, const std::string& name) {
  std::string base = dir.empty() || dir.back() == '/' ? absl::StrCat(dir, name)
                                                      : absl::StrCat(dir, "/", name);
  std::string gz = absl::StrCat(base, ".gz");
  return FileExists(gz) ? gz : base;
}

// An open gzip (or plain: zlib reads those transparently) file.
class GzReader {
 public:
  static absl::StatusOr<std::unique_ptr<GzReader>> Open(const std::string& path) {
    if (!FileExists(path)) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) {
      const int error = errno;
      const std::string message =
          absl::StrCat(path, ": cannot open: ", std::strerror(error));
      return error == EACCES ? absl::PermissionDeniedError(message)
                             : absl::NotFoundError(message);
    }
    // Fewer, larger reads of the compressed file; no larger than a small file needs
    // (zlib allocates the buffer, and twice that for output, per open file).
    const int64_t size = FileSize(path);
    gzbuffer(file, static_cast<unsigned>(std::clamp<int64_t>(size, kMinGzBuffer, kMaxGzBuffer)));
    return std::unique_ptr<GzReader>(new GzReader(path, file, size));
  }

  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  const std::string& path() const { return path_; }

  // For a plain (not gzipped) file, once something was read: the bytes left to read
  // (the file's size less what was consumed). -1 for a gzip stream, whose
  // uncompressed size is unknown until it ends.
  int64_t PlainBytesLeft() {
    if (size_ < 0 || gzdirect(file_) != 1) return -1;
    return size_ - static_cast<int64_t>(gztell(file_));
  }

  // Appends up to `n` bytes to `out`, stopping early only at the end of the data
  // (including a gzip stream that is cut off). DataLoss if zlib reports corrupt data.
  absl::Status ReadUpTo(int64_t n, std::vector<uint8_t>* out) {
    while (n > 0) {
      const int64_t arrived = static_cast<int64_t>(out->size());
      const int64_t chunk = std::min({n, kReadChunk, std::max(kFirstReadChunk, arrived)});
      const size_t old_size = out->size();
      out->resize(old_size + chunk);
      const int got = gzread(file_, out->data() + old_size, static_cast<unsigned>(chunk));
      out->resize(old_size + std::max(got, 0));
      RINGSIDE_RETURN_IF_ERROR(CheckError(got));
      if (got < chunk) break;  // End of data.
      n -= got;
    }
    return absl::OkStatus();
  }

  // Reads exactly `n` bytes of `what`; DataLoss naming both counts if the file ends
  // early.
  absl::Status ReadExactly(int64_t n, const char* what, std::vector<uint8_t>* out) {
    out->clear();
    // A plain file says up front whether it holds what its header declares.
    if (const int64_t left = PlainBytesLeft(); left >= 0 && left < n) {
      return absl::DataLossError(absl::StrCat(path_, ": truncated: expected ", n, " bytes of ",
                                              what, ", got ", left));
    }
    RINGSIDE_RETURN_IF_ERROR(ReadUpTo(n, out));
    if (static_cast<int64_t>(out->size()) != n) {
      return absl::DataLossError(absl::StrCat(path_, ": truncated: expected ", n,
                                              " bytes of ", what, ", got ", out->size()));
    }
    return absl::OkStatus();
  }

  // Reads to the end of the file, which also makes zlib verify the gzip trailer's
  // CRC and length. DataLoss if anything follows the declared payload.
  absl::Status ExpectEnd() {
    uint8_t buf[4096];
    int64_t extra = 0;
    for (;;) {
      const int got = gzread(file_, buf, sizeof(buf));
      RINGSIDE_RETURN_IF_ERROR(CheckError(got));
      if (got <= 0) break;
      extra += got;
    }
    if (extra > 0) {
      return absl::DataLossError(
          absl::StrCat(path_, ": ", extra, " unexpected bytes after the declared data"));
    }
    int errnum = Z_OK;
    gzerror(file_, &errnum);
    if (errnum == Z_BUF_ERROR) {
      return absl::DataLossError(
          absl::StrCat(path_, ": truncated: the gzip stream ends before its trailer"));
    }
    return absl::OkStatus();
  }

 private:
  GzReader(std::string path, gzFile file, int64_t size)
      : path_(std::move(path)), file_(file), size_(size) {}

  // zlib reports corrupt data (Z_DATA_ERROR, including a CRC mismatch) or a failed
  // read with -1, and a cut-off gzip stream as Z_BUF_ERROR with a short read. The
  // former are DataLoss here; the latter is left to the callers, which see the short
  // read and name what is missing.
  absl::Status CheckError(int got) {
    int errnum = Z_OK;
    const char* message = gzerror(file_, &errnum);
    if (got >= 0 && (errnum == Z_OK || errnum == Z_BUF_ERROR)) return absl::OkStatus();
    if (errnum == Z_ERRNO) message = std::strerror(errno);
    return absl::DataLossError(absl::StrCat(path_, ": corrupt or unreadable data (",
                                            message ? message : "unknown error", ")"));
  }

  std::string path_;
  gzFile file_;
  int64_t size_;  // Of the file on disk (compressed, for gzip); -1 if unknown.
};

// One IDX file's header: magic and dimension sizes.
struct IdxHeader {
  std::vector<int64_t> dims;
  int64_t num_elements = 1;
};

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) |
         uint32_t{p[3]};
}

// Reads and checks the magic and `num_dims` sizes. DataLoss for a short header or the
// wrong magic; InvalidArgument for zero or negative sizes, or a payload too large to
// index.
absl::StatusOr<IdxHeader> ReadHeader(GzReader* reader, uint32_t magic, int num_dims) {
  std::vector<uint8_t> bytes;
  RINGSIDE_RETURN_IF_ERROR(reader->ReadUpTo(4 + 4 * num_dims, &bytes));
  if (bytes.size() < 4) {
    return absl::DataLossError(absl::StrCat(reader->path(), ": truncated: ", bytes.size(),
                                            "-byte file has no IDX magic"));
  }
  const uint32_t got_magic = BigEndian32(bytes.data());
  if (got_magic != magic) {
    return absl::DataLossError(absl::StrCat(
        reader->path(), ": bad magic 0x", absl::Hex(got_magic, absl::kZeroPad8),
        ", expected 0x", absl::Hex(magic, absl::kZeroPad8)));
  }
  if (static_cast<int>(bytes.size()) < 4 + 4 * num_dims) {
    return absl::DataLossError(absl::StrCat(reader->path(), ": truncated: expected ",
                                            4 + 4 * num_dims, " header bytes, got ",
                                            bytes.size()));
  }
  IdxHeader header;
  for (int i = 0; i < num_dims; ++i) {
    const int32_t dim = static_cast<int32_t>(BigEndian32(bytes.data() + 4 + 4 * i));
    if (dim <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(reader->path(), ": dimension ", i, " is ", dim, ", must be > 0"));
    }
    header.dims.push_back(dim);
    if (header.num_elements > kMaxElements / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(reader->path(), ": declared size is implausibly large"));
    }
    header.num_elements *= dim;
  }
  return header;
}

struct IdxImages {
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<uint8_t> pixels;  // [count, rows * cols]
};

absl::StatusOr<IdxImages> ReadImages(const std::string& path) {
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<GzReader> reader, GzReader::Open(path));
  RINGSIDE_ASSIGN_OR_RETURN(IdxHeader header, ReadHeader(reader.get(), kImagesMagic, 3));
  if (header.dims[1] * header.dims[2] > INT_MAX / 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": images of ", header.dims[1], "x", header.dims[2], " are too large"));
  }
  IdxImages images;
  images.count = header.dims[0];
  images.rows = static_cast<int>(header.dims[1]);
  images.cols = static_cast<int>(header.dims[2]);
  RINGSIDE_RETURN_IF_ERROR(
      reader->ReadExactly(header.num_elements, "pixels", &images.pixels));
  RINGSIDE_RETURN_IF_ERROR(reader->ExpectEnd());
  return images;
}

absl::StatusOr<std::vector<uint8_t>> ReadLabels(const std::string& path) {
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<GzReader> reader, GzReader::Open(path));
  RINGSIDE_ASSIGN_OR_RETURN(IdxHeader header, ReadHeader(reader.get(), kLabelsMagic, 1));
  std::vector<uint8_t> labels;
  RINGSIDE_RETURN_IF_ERROR(reader->ReadExactly(header.num_elements, "labels", &labels));
  RINGSIDE_RETURN_IF_ERROR(reader->ExpectEnd());
  return labels;
}

// A dataset held entirely in memory: float samples [size, input_dim] and labels.
class InMemoryDataset : public Dataset {
 public:
  InMemoryDataset(int height, int width, int num_classes, std::vector<float> x,
                  std::vector<int32_t> y)
      : height_(height),
        width_(width),
        num_classes_(num_classes),
        x_(std::move(x)),
        y_(std::move(y)) {}

  int64_t size() const override { return static_cast<int64_t>(y_.size()); }
  int channels() const override { return 1; }
  int height() const override { return height_; }
  int width() const override { return width_; }
  int num_classes() const override { return num_classes_; }

  void Gather(absl::Span<const int64_t> indices, float* x, int32_t* y) const override {
    const size_t dim = static_cast<size_t>(input_dim());
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t index = indices[i];
      std::memcpy(x + i * dim, x_.data() + static_cast<size_t>(index) * dim,
                  dim * sizeof(float));
      y[i] = y_[index];
    }
  }

 private:
  int height_;
  int width_;
  int num_classes_;
  std::vector<float> x_;
  std::vector<int32_t> y_;
};

// Maps each byte value v to (v / 255 - mean) / std through `table`.
std::vector<float> Normalise(const std::vector<uint8_t>& pixels, const float* table) {
  std::vector<float> out(pixels.size());
  for (size_t i = 0; i < pixels.size(); ++i) out[i] = table[pixels[i]];
  return out;
}

struct Split {
  IdxImages images;
  std::vector<uint8_t> labels;
};

absl::StatusOr<Split> ReadSplit(const std::string& dir, const std::string& images_name,
                                const std::string& labels_name) {
  const std::string images_path = ResolvePath(dir, images_name);
  const std::string labels_path = ResolvePath(dir, labels_name);
  Split split;
  RINGSIDE_ASSIGN_OR_RETURN(split.images, ReadImages(images_path));
  RINGSIDE_ASSIGN_OR_RETURN(split.labels, ReadLabels(labels_path));
  if (static_cast<int64_t>(split.labels.size()) != split.images.count) {
    return absl::DataLossError(absl::StrCat(images_path, " has ", split.images.count,
                                            " images but ", labels_path, " has ",
                                            split.labels.size(), " labels"));
  }
  return split;
}

}  // namespace

absl::StatusOr<DatasetSplits> LoadIdxDataset(const std::string& dir) {
  RINGSIDE_ASSIGN_OR_RETURN(
      Split train, ReadSplit(dir, "train-images-idx3-ubyte", "train-labels-idx1-ubyte"));
  RINGSIDE_ASSIGN_OR_RETURN(
      Split test, ReadSplit(dir, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"));

  if (test.images.rows != train.images.rows || test.images.cols != train.images.cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        ResolvePath(dir, "t10k-images-idx3-ubyte"), ": images are ", test.images.rows,
        "x", test.images.cols, " but the training images are ", train.images.rows, "x",
        train.images.cols));
  }

  const int max_train_label = *std::max_element(train.labels.begin(), train.labels.end());
  const int num_classes = max_train_label + 1;
  if (num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(ResolvePath(dir, "train-labels-idx1-ubyte"),
                     ": every label is 0; need at least 2 classes"));
  }
  for (size_t i = 0; i < test.labels.size(); ++i) {
    if (test.labels[i] >= num_classes) {
      return absl::DataLossError(absl::StrCat(ResolvePath(dir, "t10k-labels-idx1-ubyte"),
                                              ": label ", i, " is ", test.labels[i],
                                              ", but the training labels have only ",
                                              num_classes, " classes"));
    }
  }

  // Mean and standard deviation of the training pixels (scaled to [0, 1]), computed
  // exactly from a histogram of byte values.
  int64_t histogram[256] = {};
  for (uint8_t v : train.images.pixels) ++histogram[v];
  const double count = static_cast<double>(train.images.pixels.size());
  double sum = 0;
  for (int v = 0; v < 256; ++v) sum += histogram[v] * (v / 255.0);
  const double mean = sum / count;
  double sum_sq = 0;
  for (int v = 0; v < 256; ++v) {
    const double d = v / 255.0 - mean;
    sum_sq += histogram[v] * d * d;
  }
  double stddev = std::sqrt(sum_sq / count);
  // A constant training set cannot be scaled to unit variance; only centre it.
  if (!(stddev > 0)) stddev = 1.0;
  float table[256];
  for (int v = 0; v < 256; ++v) {
    table[v] = static_cast<float>((v / 255.0 - mean) / stddev);
  }

  auto make = [&](Split& split) {
    std::vector<float> x = Normalise(split.images.pixels, table);
    std::vector<uint8_t>().swap(split.images.pixels);
    std::vector<int32_t> y(split.labels.begin(), split.labels.end());
    return std::make_unique<InMemoryDataset>(split.images.rows, split.images.cols,
                                             num_classes, std::move(x), std::move(y));
  };
  DatasetSplits splits;
  splits.train = make(train);
  splits.test = make(test);
  return splits;
}

}  // namespace ringside
