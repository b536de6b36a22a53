#include "common/trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>

#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/trace.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver_util.h"

namespace ringside {
namespace {

constexpr char kTypeUrlPrefix[] = "type.googleapis.com";
// How the printer opens and closes a TraceEventBatch; what lies between is the
// batch's events, comma-separated.
constexpr char kBatchOpen[] = "{\"events\":[";
constexpr char kBatchClose[] = "]}";

void SetArg(trace::TraceEvent* event, const std::string& key, double value) {
  (*event->mutable_args()->mutable_fields())[key].set_number_value(value);
}

}  // namespace

int64_t NowMicros() { return absl::GetCurrentTimeNanos() / 1000; }

int64_t ThreadCpuMicros() {
  // The calling thread's own clock always exists on Linux; should it fail, 0 reads
  // as "no CPU time measured".
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

int64_t ProcessCpuMicros() {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

bool NestOrDisjoint(const TraceInterval& a, const TraceInterval& b) {
  if (a.end_us <= b.start_us || b.end_us <= a.start_us) return true;
  const bool a_in_b = b.start_us <= a.start_us && a.end_us <= b.end_us;
  const bool b_in_a = a.start_us <= b.start_us && b.end_us <= a.end_us;
  return a_in_b || b_in_a;
}

TraceWriter::TraceWriter(std::string path, FILE* file, int pid)
    : path_(std::move(path)),
      pid_(pid),
      pending_(std::make_unique<trace::TraceEventBatch>()),
      printer_(std::make_unique<TaskThread>()),
      file_(file),
      resolver_(google::protobuf::util::NewTypeResolverForDescriptorPool(
          kTypeUrlPrefix, trace::TraceEventBatch::descriptor()->file()->pool())) {}

absl::StatusOr<trace::TraceEventBatch> ReadTraceFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read trace file ", path));
  const std::string array((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  trace::TraceEventBatch batch;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(absl::StrCat("{\"events\":", array, "}"),
                                                   &batch, options)
           .ok()) {
    return absl::DataLossError(absl::StrCat(path, " is not a JSON array of trace events"));
  }
  return batch;
}

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(
    const std::string& path, int pid, const std::string& process_name) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open trace file ", path, ": ", strerror(errno)));
  }
  std::unique_ptr<TraceWriter> writer(new TraceWriter(path, f, pid));
  {
    absl::MutexLock lock(&writer->file_mu_);
    if (fputs("[\n", f) < 0) writer->failed_ = true;
  }
  absl::MutexLock lock(&writer->mu_);
  writer->AddMetadata("process_name", 0, process_name);
  return writer;
}

TraceWriter::~TraceWriter() { Close().IgnoreError(); }

void TraceWriter::AddMetadata(absl::string_view what, int tid, absl::string_view name) {
  trace::TraceEvent* event = pending_->add_events();
  event->set_name(std::string(what));
  event->set_ph("M");
  event->set_pid(pid_);
  event->set_tid(tid);
  (*event->mutable_args()->mutable_fields())["name"].set_string_value(std::string(name));
}

void TraceWriter::HandOver() {
  if (pending_->events_size() == 0) return;
  std::shared_ptr<const trace::TraceEventBatch> batch = std::move(pending_);
  pending_ = std::make_unique<trace::TraceEventBatch>();
  printer_->Wait();
  printer_->Run([this, batch] { Print(*batch); });
}

void TraceWriter::Print(const trace::TraceEventBatch& batch) {
  // Every field printed, so that "X" events of zero duration still carry "dur".
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  absl::MutexLock lock(&file_mu_);
  const bool printed =
      google::protobuf::util::BinaryToJsonString(
          resolver_.get(), absl::StrCat(kTypeUrlPrefix, "/", batch.GetTypeName()),
          batch.SerializeAsString(), &json, options)
          .ok();
  absl::string_view events = json;
  // The array's elements are the batch's events: drop the batch's own braces.
  if (!printed || !absl::ConsumePrefix(&events, kBatchOpen) ||
      !absl::ConsumeSuffix(&events, kBatchClose)) {
    failed_ = true;
    return;
  }
  if (file_ == nullptr) return;
  if (!first_ && fputs(",\n", file_) < 0) failed_ = true;
  first_ = false;
  if (fwrite(events.data(), 1, events.size(), file_) != events.size()) failed_ = true;
}

void TraceWriter::NameTrack(int tid, absl::string_view name) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  AddMetadata("thread_name", tid, name);
}

void TraceWriter::SetStep(int64_t step) {
  absl::MutexLock lock(&mu_);
  step_ = step;
}

void TraceWriter::Span(absl::string_view name, absl::string_view cat, int tid,
                       int64_t start_us, int64_t dur_us, const TraceArgs& args) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  trace::TraceEvent* event = pending_->add_events();
  event->set_name(std::string(name));
  event->set_cat(std::string(cat));
  event->set_ph("X");
  event->set_ts(static_cast<double>(start_us));
  event->set_dur(static_cast<double>(std::max<int64_t>(0, dur_us)));
  event->set_pid(pid_);
  event->set_tid(tid);
  for (const TraceArg& arg : args) SetArg(event, arg.key, arg.value);
  if (step_ >= 0 && event->args().fields().count("step") == 0) {
    SetArg(event, "step", static_cast<double>(step_));
  }
  if (pending_->events_size() >= kBatchEvents) HandOver();
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
  if (!closed_) {
    AddMetadata("thread_name", tid,
                lanes.size() == 1 ? std::string(group) : absl::StrCat(group, " ", lanes.size()));
  }
  return tid;
}

absl::Status TraceWriter::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
    HandOver();
    printer_->Wait();
  }
  absl::MutexLock lock(&file_mu_);
  if (fputs("\n]\n", file_) < 0) failed_ = true;
  const bool close_ok = fclose(file_) == 0;
  file_ = nullptr;
  if (failed_ || !close_ok) {
    return absl::InternalError(absl::StrCat("cannot write trace file ", path_));
  }
  return absl::OkStatus();
}

}  // namespace ringside
