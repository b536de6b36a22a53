#include "common/trace.h"

#include <cerrno>
#include <cstring>

#include "common/json_escape.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringside {

int64_t NowMicros() { return absl::GetCurrentTimeNanos() / 1000; }

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(
    const std::string& path, int pid, const std::string& process_name) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open trace file ", path, ": ", strerror(errno)));
  }
  std::unique_ptr<TraceWriter> writer(new TraceWriter(path, f, pid));
  absl::MutexLock lock(&writer->mu_);
  fputs("[\n", f);
  writer->WriteEvent(absl::StrCat(R"({"name":"process_name","ph":"M","pid":)", pid,
                                  R"(,"tid":0,"args":{"name":")",
                                  JsonEscape(process_name), "\"}}"));
  return writer;
}

TraceWriter::~TraceWriter() { Close().IgnoreError(); }

void TraceWriter::WriteEvent(const std::string& json) {
  if (file_ == nullptr) return;
  if (!first_) fputs(",\n", file_);
  first_ = false;
  if (fputs(json.c_str(), file_) < 0) failed_ = true;
}

void TraceWriter::NameTrack(int tid, const std::string& name) {
  absl::MutexLock lock(&mu_);
  WriteEvent(absl::StrCat(R"({"name":"thread_name","ph":"M","pid":)", pid_, R"(,"tid":)",
                          tid, R"(,"args":{"name":")", JsonEscape(name), "\"}}"));
}

void TraceWriter::Span(const std::string& name, int tid, int64_t start_us, int64_t dur_us) {
  absl::MutexLock lock(&mu_);
  WriteEvent(absl::StrCat(R"({"name":")", JsonEscape(name), R"(","ph":"X","pid":)",
                          pid_, R"(,"tid":)", tid, R"(,"ts":)", start_us, R"(,"dur":)",
                          dur_us, "}"));
}

absl::Status TraceWriter::Close() {
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return absl::OkStatus();
  fputs("\n]\n", file_);
  const bool close_ok = fclose(file_) == 0;
  file_ = nullptr;
  if (failed_ || !close_ok) {
    return absl::InternalError(absl::StrCat("cannot write trace file ", path_));
  }
  return absl::OkStatus();
}

}  // namespace ringside
