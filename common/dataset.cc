// LoadDataset: resolves a dataset spec string to a loader.
#include "common/dataset.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

constexpr absl::string_view kSynthetic = "synthetic";

absl::Status BadValue(absl::string_view spec, absl::string_view key,
                      absl::string_view value, absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("dataset '", spec, "': ", key, "='", value, "' is not ", expected));
}

// Parses "key=value,..." (the part after "synthetic:") over the defaults. Every key
// may appear at most once.
absl::StatusOr<SyntheticOptions> ParseSyntheticOptions(absl::string_view spec,
                                                       absl::string_view list) {
  SyntheticOptions options;
  std::set<std::string> seen;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset '", spec, "': option '", entry, "' is not of the form key=value"));
    }
    const absl::string_view key = kv[0];
    const absl::string_view value = kv[1];
    if (!seen.insert(std::string(key)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset '", spec, "': option '", key, "' given twice"));
    }
    if (key == "train") {
      if (!absl::SimpleAtoi(value, &options.train_size)) {
        return BadValue(spec, key, value, "an integer");
      }
    } else if (key == "test") {
      if (!absl::SimpleAtoi(value, &options.test_size)) {
        return BadValue(spec, key, value, "an integer");
      }
    } else if (key == "classes") {
      if (!absl::SimpleAtoi(value, &options.num_classes)) {
        return BadValue(spec, key, value, "an integer");
      }
    } else if (key == "seed") {
      if (!absl::SimpleAtoi(value, &options.seed)) {
        return BadValue(spec, key, value, "an unsigned integer");
      }
    } else if (key == "shape") {
      std::vector<absl::string_view> dims = absl::StrSplit(value, 'x');
      if (dims.size() != 3 || !absl::SimpleAtoi(dims[0], &options.channels) ||
          !absl::SimpleAtoi(dims[1], &options.height) ||
          !absl::SimpleAtoi(dims[2], &options.width)) {
        return BadValue(spec, key, value, "of the form CxHxW");
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset '", spec, "': unknown option '", key,
                       "' (expected train, test, shape, classes or seed)"));
    }
  }
  return options;
}

// The "synthetic[:...]" spec's options; nullopt for any other spec.
absl::StatusOr<std::optional<SyntheticOptions>> SyntheticSpecOptions(absl::string_view spec) {
  if (spec == kSynthetic) return std::optional<SyntheticOptions>(SyntheticOptions());
  if (!absl::StartsWith(spec, absl::StrCat(kSynthetic, ":"))) {
    return std::optional<SyntheticOptions>();
  }
  RINGSIDE_ASSIGN_OR_RETURN(SyntheticOptions options,
                            ParseSyntheticOptions(spec, spec.substr(kSynthetic.size() + 1)));
  return std::optional<SyntheticOptions>(options);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

int64_t AvailableMemoryBytes() {
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    long long kib = -1;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
    }
    std::fclose(f);
    if (kib >= 0) return static_cast<int64_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : -1;
}

absl::Status CheckDatasetSpec(absl::string_view spec) {
  RINGSIDE_ASSIGN_OR_RETURN(std::optional<SyntheticOptions> options, SyntheticSpecOptions(spec));
  if (!options.has_value()) return absl::OkStatus();
  if (absl::Status s = CheckSyntheticOptions(*options); !s.ok()) {
    return Annotate(s, absl::StrCat("dataset '", spec, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DatasetSplits> LoadDataset(absl::string_view spec) {
  if (spec == "fashion-mnist") {
    return LoadIdxDataset(kFashionMnistDir);
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::optional<SyntheticOptions> options, SyntheticSpecOptions(spec));
  if (options.has_value()) {
    absl::StatusOr<DatasetSplits> splits = MakeSyntheticDataset(*options);
    if (!splits.ok() && spec != kSynthetic) {
      return Annotate(splits.status(), absl::StrCat("dataset '", spec, "'"));
    }
    return splits;
  }
  const std::string dir(spec);
  if (!IsDirectory(dir)) {
    return absl::NotFoundError(absl::StrCat(
        "dataset '", spec, "' is not fashion-mnist, synthetic[:...] or a directory"));
  }
  return LoadIdxDataset(dir);
}

}  // namespace ringside
