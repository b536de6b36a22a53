#include "common/metrics.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "common/json_escape.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"

namespace ringside {

using google::protobuf::FieldDescriptor;

namespace {

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.9g", v);
}

}  // namespace

std::string ToJsonLine(const google::protobuf::Message& message) {
  const google::protobuf::Descriptor* d = message.GetDescriptor();
  const google::protobuf::Reflection* r = message.GetReflection();
  std::string out = "{";
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated() || f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (out.size() > 1) out += ",";
    absl::StrAppend(&out, "\"", f->name(), "\":");
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: absl::StrAppend(&out, r->GetInt32(message, f)); break;
      case FieldDescriptor::CPPTYPE_INT64: absl::StrAppend(&out, r->GetInt64(message, f)); break;
      case FieldDescriptor::CPPTYPE_UINT32: absl::StrAppend(&out, r->GetUInt32(message, f)); break;
      case FieldDescriptor::CPPTYPE_UINT64: absl::StrAppend(&out, r->GetUInt64(message, f)); break;
      case FieldDescriptor::CPPTYPE_DOUBLE: out += JsonNumber(r->GetDouble(message, f)); break;
      case FieldDescriptor::CPPTYPE_FLOAT: out += JsonNumber(r->GetFloat(message, f)); break;
      case FieldDescriptor::CPPTYPE_BOOL: out += r->GetBool(message, f) ? "true" : "false"; break;
      case FieldDescriptor::CPPTYPE_ENUM: absl::StrAppend(&out, r->GetEnumValue(message, f)); break;
      case FieldDescriptor::CPPTYPE_STRING:
        absl::StrAppend(&out, "\"", JsonEscape(r->GetString(message, f)), "\"");
        break;
      default: out += "null"; break;
    }
  }
  out += "}";
  return out;
}

absl::Status FromJsonLine(const std::string& line, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(line, message, options);
  if (!status.ok()) {
    return absl::DataLossError(absl::StrCat("bad metrics line: ", status.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StepMetrics>> ReadMetricsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  std::vector<StepMetrics> records;
  std::string line;
  int line_number = 0;
  absl::Status pending;  // A bad line: an error unless it turns out to be the last.
  while (std::getline(in, line)) {
    ++line_number;
    if (!pending.ok()) return pending;
    if (line.empty()) continue;
    StepMetrics m;
    if (absl::Status s = FromJsonLine(line, &m); !s.ok()) {
      pending = absl::DataLossError(absl::StrCat(path, ":", line_number, ": ", s.message()));
      continue;
    }
    records.push_back(std::move(m));
  }
  return records;
}

namespace {

// Keeps the records of `path` for steps before `first_step` and drops the others and
// every line that does not parse (one cut short by a kill), replacing the file
// atomically when anything is dropped. A missing file is left missing.
absl::Status KeepRecordsBefore(const std::string& path, int64_t first_step) {
  std::ifstream in(path);
  if (!in) return absl::OkStatus();
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    StepMetrics record;
    if (FromJsonLine(line, &record).ok() && record.step() < first_step) {
      absl::StrAppend(&kept, line, "\n");
    } else {
      ++dropped;
    }
  }
  in.close();
  if (dropped == 0) return absl::OkStatus();
  // Write the kept records beside the file, then rename over it: a kill leaves either
  // the old file or the new one. (common/ cannot use experiments/sys's
  // WriteFileAtomically; checkpoint.cc does the same for checkpoints.)
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  bool ok = f != nullptr && fwrite(kept.data(), 1, kept.size(), f) == kept.size();
  int err = errno;
  if (f != nullptr && fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rewrite metrics file ", path, ": ", strerror(err)));
  }
  return absl::OkStatus();
}

FILE* OpenFile(const std::string& path, bool append) {
  return fopen(path.c_str(), append ? "a" : "w");
}

absl::Status CannotOpen(const std::string& path) {
  return absl::PermissionDeniedError(
      absl::StrCat("cannot open metrics file ", path, ": ", strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::Open(const std::string& path,
                                                                  bool append) {
  FILE* f = OpenFile(path, append);
  if (f == nullptr) return CannotOpen(path);
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(path, f, append));
}

absl::StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::OpenResumed(const std::string& path,
                                                                         int64_t first_step) {
  if (absl::Status s = KeepRecordsBefore(path, first_step); !s.ok()) return s;
  FILE* f = OpenFile(path, /*append=*/true);
  if (f == nullptr) return CannotOpen(path);
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(path, f, false));
}

MetricsWriter::~MetricsWriter() { Close().IgnoreError(); }

absl::Status MetricsWriter::Write(const StepMetrics& record) {
  const std::string line = ToJsonLine(record) + "\n";
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return absl::FailedPreconditionError("metrics file is closed");
  if (truncate_at_first_write_) {
    // The file was opened to append: drop what this run repeats (Open), then reopen
    // the (possibly replaced) file.
    truncate_at_first_write_ = false;
    fclose(file_);
    file_ = nullptr;
    if (absl::Status s = KeepRecordsBefore(path_, record.step()); !s.ok()) return s;
    file_ = OpenFile(path_, /*append=*/true);
    if (file_ == nullptr) return CannotOpen(path_);
  }
  if (fwrite(line.data(), 1, line.size(), file_) != line.size() || fflush(file_) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path_, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status MetricsWriter::Close() {
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return absl::OkStatus();
  const bool ok = fclose(file_) == 0;
  file_ = nullptr;
  if (!ok) return absl::InternalError(absl::StrCat("cannot close ", path_, ": ", strerror(errno)));
  return absl::OkStatus();
}

}  // namespace ringside
