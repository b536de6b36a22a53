#include "common/trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/trace.pb.h"
#include "google/protobuf/util/json_util.h"

namespace ringside {
namespace {

void SetArg(trace::TraceEvent* event, const std::string& key, double value) {
  (*event->mutable_args()->mutable_fields())[key].set_number_value(value);
}

}  // namespace

int64_t NowMicros() { return absl::GetCurrentTimeNanos() / 1000; }

bool NestOrDisjoint(const TraceInterval& a, const TraceInterval& b) {
  if (a.end_us <= b.start_us || b.end_us <= a.start_us) return true;
  const bool a_in_b = b.start_us <= a.start_us && a.end_us <= b.end_us;
  const bool b_in_a = a.start_us <= b.start_us && b.end_us <= a.end_us;
  return a_in_b || b_in_a;
}

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(
    const std::string& path, int pid, const std::string& process_name) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open trace file ", path, ": ", strerror(errno)));
  }
  std::unique_ptr<TraceWriter> writer(new TraceWriter(path, f, pid));
  absl::MutexLock lock(&writer->mu_);
  if (fputs("[\n", f) < 0) writer->failed_ = true;
  writer->WriteMetadata("process_name", 0, process_name);
  return writer;
}

TraceWriter::~TraceWriter() { Close().IgnoreError(); }

void TraceWriter::WriteEvent(const trace::TraceEvent& event) {
  if (file_ == nullptr) return;
  // Every field printed, so that "X" events of zero duration still carry "dur".
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(event, &json, options).ok()) {
    failed_ = true;
    return;
  }
  if (!first_ && fputs(",\n", file_) < 0) failed_ = true;
  first_ = false;
  if (fputs(json.c_str(), file_) < 0) failed_ = true;
}

void TraceWriter::WriteMetadata(absl::string_view what, int tid, absl::string_view name) {
  trace::TraceEvent event;
  event.set_name(std::string(what));
  event.set_ph("M");
  event.set_pid(pid_);
  event.set_tid(tid);
  (*event.mutable_args()->mutable_fields())["name"].set_string_value(std::string(name));
  WriteEvent(event);
}

void TraceWriter::NameTrack(int tid, absl::string_view name) {
  absl::MutexLock lock(&mu_);
  WriteMetadata("thread_name", tid, name);
}

void TraceWriter::SetStep(int64_t step) {
  absl::MutexLock lock(&mu_);
  step_ = step;
}

void TraceWriter::Span(absl::string_view name, absl::string_view cat, int tid,
                       int64_t start_us, int64_t dur_us, const TraceArgs& args) {
  trace::TraceEvent event;
  event.set_name(std::string(name));
  event.set_cat(std::string(cat));
  event.set_ph("X");
  event.set_ts(static_cast<double>(start_us));
  event.set_dur(static_cast<double>(std::max<int64_t>(0, dur_us)));
  event.set_pid(pid_);
  event.set_tid(tid);
  for (const TraceArg& arg : args) SetArg(&event, arg.key, arg.value);
  absl::MutexLock lock(&mu_);
  if (step_ >= 0 && event.args().fields().count("step") == 0) {
    SetArg(&event, "step", static_cast<double>(step_));
  }
  WriteEvent(event);
}

int TraceWriter::Lane(absl::string_view group, int64_t start_us, int64_t end_us) {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int, int64_t>>& lanes = lanes_[std::string(group)];
  // A lane whose spans all end by start_us (it tracks their latest end).
  for (auto& [tid, latest_end] : lanes) {
    if (latest_end <= start_us) {
      latest_end = std::max(latest_end, end_us);
      return tid;
    }
  }
  const int tid = next_lane_tid_++;
  lanes.emplace_back(tid, end_us);
  WriteMetadata("thread_name", tid,
                lanes.size() == 1 ? std::string(group) : absl::StrCat(group, " ", lanes.size()));
  return tid;
}

absl::Status TraceWriter::Close() {
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return absl::OkStatus();
  if (fputs("\n]\n", file_) < 0) failed_ = true;
  const bool close_ok = fclose(file_) == 0;
  file_ = nullptr;
  if (failed_ || !close_ok) {
    return absl::InternalError(absl::StrCat("cannot write trace file ", path_));
  }
  return absl::OkStatus();
}

}  // namespace ringside
