#include "experiments/timeline/merge.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/json_escape.h"
#include "common/trace.pb.h"
#include "google/protobuf/util/json_util.h"

namespace ringside {
namespace {

enum class Owner { kSingle = 0, kRank = 1, kShard = 2 };

const std::regex& TraceNamePattern() {
  static const std::regex* const kPattern =
      new std::regex(R"(trace(\.(rank|shard)([0-9]+))?(\.run([0-9]+))?\.json)");
  return *kPattern;
}

struct Span {
  int process = 0;  // Index into the sorted processes.
  int tid = 0;
  double start = 0;  // Microseconds since the run's origin.
  double end = 0;
  std::string name;
  std::string cat;
  const google::protobuf::Struct* args = nullptr;
  bool leaf = true;  // No span of its track nests in it.

  std::optional<double> Arg(const std::string& key) const {
    auto it = args->fields().find(key);
    if (it == args->fields().end() ||
        it->second.kind_case() != google::protobuf::Value::kNumberValue) {
      return std::nullopt;
    }
    return it->second.number_value();
  }
  double dur() const { return end - start; }
};

struct Process {
  Owner owner = Owner::kSingle;
  int index = 0;
  int run = 1;
  std::string file;
  std::string role;  // "rank", "worker", "shard", "single" (from its process_name).
  std::string name;  // The merged track's name.
  trace::TraceEventBatch batch;
};

// Parses a TraceWriter file. A file whose process was killed lacks the closing "]"
// and may end inside a batch (one line each): it is read up to its last complete line.
absl::StatusOr<trace::TraceEventBatch> ParseTolerant(const TraceFileText& file,
                                                     bool* truncated) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  std::vector<absl::string_view> lines = absl::StrSplit(file.text, '\n');
  for (size_t n = lines.size(); n >= 1; --n) {
    std::string body = absl::StrJoin(lines.begin(), lines.begin() + n, "\n");
    absl::string_view trimmed = absl::StripTrailingAsciiWhitespace(body);
    const bool closed = absl::EndsWith(trimmed, "]");
    absl::ConsumeSuffix(&trimmed, ",");
    std::string array(trimmed);
    if (!closed) absl::StrAppend(&array, "\n]");
    trace::TraceEventBatch batch;
    if (google::protobuf::util::JsonStringToMessage(absl::StrCat("{\"events\":", array, "}"),
                                                    &batch, options)
            .ok()) {
      *truncated = !closed || n < lines.size();
      return batch;
    }
  }
  return absl::DataLossError(absl::StrCat(file.name, " holds no JSON array of trace events"));
}

std::string Num(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v)) && std::abs(v) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrFormat("%.3f", v);
}

// In key order: protobuf's map order differs between processes, and the file must
// be the same whichever process merges it.
std::string ArgsJson(const google::protobuf::Struct& args) {
  std::map<std::string, const google::protobuf::Value*> sorted;
  for (const auto& [key, value] : args.fields()) sorted[key] = &value;
  std::vector<std::string> fields;
  for (const auto& [key, value] : sorted) {
    std::string text;
    if (value->kind_case() == google::protobuf::Value::kNumberValue) {
      text = Num(value->number_value());
    } else if (!google::protobuf::util::MessageToJsonString(*value, &text).ok()) {
      continue;
    }
    fields.push_back(absl::StrCat("\"", JsonEscape(key), "\":", text));
  }
  return absl::StrCat("{", absl::StrJoin(fields, ","), "}");
}

class Merger {
 public:
  absl::Status Add(const TraceFileText& file) {
    std::smatch m;
    if (!std::regex_match(file.name, m, TraceNamePattern())) {
      return absl::InvalidArgumentError(absl::StrCat(file.name, " is not a trace file's name"));
    }
    Process p;
    p.file = file.name;
    if (m[2].matched) {
      p.owner = m[2].str() == "rank" ? Owner::kRank : Owner::kShard;
      p.index = std::stoi(m[3].str());
    }
    if (m[5].matched) p.run = std::stoi(m[5].str());
    bool truncated = false;
    absl::StatusOr<trace::TraceEventBatch> batch = ParseTolerant(file, &truncated);
    if (!batch.ok()) return batch.status();
    p.batch = *std::move(batch);
    if (truncated) out_.truncated.push_back(file.name);
    // Its own name for itself ("worker 1"): the role word, with the file's index.
    p.role = p.owner == Owner::kShard ? "shard" : p.owner == Owner::kSingle ? "single" : "";
    for (const trace::TraceEvent& e : p.batch.events()) {
      if (e.ph() != "M" || e.name() != "process_name") continue;
      auto it = e.args().fields().find("name");
      if (it == e.args().fields().end()) continue;
      std::vector<std::string> words = absl::StrSplit(it->second.string_value(), ' ');
      if (!words.empty() && !words[0].empty()) p.role = words[0];
    }
    processes_.push_back(std::move(p));
    return absl::OkStatus();
  }

  MergedTimeline Finish() {
    // A rank whose file lost its process name (cut in its first batch) is a PS worker
    // when the run has shards.
    const bool has_shards = std::any_of(processes_.begin(), processes_.end(),
                                        [](const Process& p) { return p.owner == Owner::kShard; });
    for (Process& p : processes_) {
      if (p.role.empty()) p.role = has_shards ? "worker" : "rank";
      p.name = p.owner == Owner::kSingle ? "single process" : absl::StrCat(p.role, " ", p.index);
      if (p.run >= 2) absl::StrAppend(&p.name, " (run ", p.run, ")");
    }
    std::sort(processes_.begin(), processes_.end(), [](const Process& a, const Process& b) {
      return std::make_tuple(a.owner, a.index, a.run) < std::make_tuple(b.owner, b.index, b.run);
    });
    origin_ = std::numeric_limits<double>::max();
    for (const Process& p : processes_) {
      for (const trace::TraceEvent& e : p.batch.events()) {
        if (e.ph() == "X") origin_ = std::min(origin_, e.ts());
      }
    }
    if (origin_ == std::numeric_limits<double>::max()) origin_ = 0;
    CollectSpans();
    WriteTracks();
    PsFlows();
    DdpFlows();
    Counters();
    out_.processes = static_cast<int>(processes_.size());
    out_.json = absl::StrCat(
        "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"time_origin_us\":", Num(origin_),
        ",\"merged_by\":\"ringside timeline\",\"flows\":", out_.flows, "},\n\"traceEvents\":[\n",
        absl::StrJoin(events_, ",\n"), "\n]}\n");
    return std::move(out_);
  }

 private:
  int Pid(int process) const { return process + 1; }

  void CollectSpans() {
    for (size_t i = 0; i < processes_.size(); ++i) {
      for (const trace::TraceEvent& e : processes_[i].batch.events()) {
        if (e.ph() != "X") continue;
        Span s;
        s.process = static_cast<int>(i);
        s.tid = e.tid();
        s.start = e.ts() - origin_;
        s.end = s.start + std::max(0.0, e.dur());
        s.name = e.name();
        s.cat = e.cat();
        s.args = &e.args();
        spans_.push_back(std::move(s));
      }
    }
    // Leaves: sorted per track by start (longest first), a span with a successor that
    // starts before it ends holds that successor.
    std::vector<size_t> order(spans_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [this](size_t a, size_t b) {
      const Span& x = spans_[a];
      const Span& y = spans_[b];
      return std::make_tuple(x.process, x.tid, x.start, -x.end) <
             std::make_tuple(y.process, y.tid, y.start, -y.end);
    });
    std::set<std::pair<int, int>> threads;
    for (size_t k = 0; k < order.size(); ++k) {
      Span& s = spans_[order[k]];
      threads.insert({s.process, s.tid});
      if (k + 1 < order.size()) {
        const Span& n = spans_[order[k + 1]];
        if (n.process == s.process && n.tid == s.tid && n.start < s.end) s.leaf = false;
      }
    }
    out_.threads = static_cast<int>(threads.size());
    out_.spans = static_cast<int>(spans_.size());
  }

  void WriteTracks() {
    for (size_t i = 0; i < processes_.size(); ++i) {
      const Process& p = processes_[i];
      const int pid = Pid(static_cast<int>(i));
      events_.push_back(absl::StrFormat(
          R"({"name":"process_name","ph":"M","pid":%d,"tid":0,"args":{"name":"%s"}})", pid,
          JsonEscape(p.name)));
      events_.push_back(absl::StrFormat(
          R"({"name":"process_sort_index","ph":"M","pid":%d,"tid":0,"args":{"sort_index":%d}})",
          pid, pid));
      events_.push_back(absl::StrFormat(
          R"({"name":"process_labels","ph":"M","pid":%d,"tid":0,"args":{"labels":"%s"}})", pid,
          JsonEscape(p.file)));
      for (const trace::TraceEvent& e : p.batch.events()) {
        if (e.ph() == "M" && e.name() == "thread_name") {
          auto it = e.args().fields().find("name");
          if (it == e.args().fields().end()) continue;
          events_.push_back(absl::StrFormat(
              R"({"name":"thread_name","ph":"M","pid":%d,"tid":%d,"args":{"name":"%s"}})", pid,
              e.tid(), JsonEscape(it->second.string_value())));
        }
      }
    }
    for (const Span& s : spans_) {
      events_.push_back(absl::StrFormat(
          R"({"name":"%s","cat":"%s","ph":"X","ts":%s,"dur":%s,"pid":%d,"tid":%d,"args":%s})",
          JsonEscape(s.name), JsonEscape(s.cat), Num(s.start), Num(s.dur()), Pid(s.process),
          s.tid, ArgsJson(*s.args)));
    }
  }

  // A point strictly inside leaf span `s`, as close to `at` as allowed.
  static std::optional<double> Inside(const Span& s, double at) {
    if (!s.leaf || s.dur() <= 0) return std::nullopt;
    const double margin = std::min(0.5, s.dur() / 4);
    return std::clamp(at, s.start + margin, s.end - margin);
  }

  void Flow(const std::string& name, const Span& from, double from_at, const Span& to,
            double to_at) {
    // Perfetto orders a flow by its spans' starts: a flow into a span that started
    // before its source would point backwards.
    if (to.start < from.start) return;
    const std::optional<double> a = Inside(from, from_at);
    const std::optional<double> b = Inside(to, to_at);
    if (!a || !b) return;
    const int id = ++out_.flows;
    events_.push_back(absl::StrFormat(
        R"({"name":"%s","cat":"flow","ph":"s","id":%d,"ts":%s,"pid":%d,"tid":%d})", name, id,
        Num(*a), Pid(from.process), from.tid));
    events_.push_back(absl::StrFormat(
        R"({"name":"%s","cat":"flow","ph":"f","bp":"e","id":%d,"ts":%s,"pid":%d,"tid":%d})",
        name, id, Num(*b), Pid(to.process), to.tid));
  }

  static double Mid(const Span& s) { return (s.start + s.end) / 2; }

  void PsFlows() {
    // Shard spans by (shard index, step): aggregate / update ones.
    std::map<int, int> shard_process;  // Shard index -> process (its first run).
    for (size_t i = 0; i < processes_.size(); ++i) {
      if (processes_[i].owner == Owner::kShard) shard_process.emplace(processes_[i].index, i);
    }
    std::map<std::pair<int, int64_t>, std::vector<const Span*>> shard_spans;
    for (const Span& s : spans_) {
      if (processes_[s.process].owner != Owner::kShard) continue;
      if (s.name != "aggregate" && s.name != "update") continue;
      const std::optional<double> step = s.Arg("step");
      if (!step) continue;
      shard_spans[{processes_[s.process].index, static_cast<int64_t>(*step)}].push_back(&s);
    }
    for (const Span& s : spans_) {
      const Process& p = processes_[s.process];
      if (p.owner != Owner::kRank || p.role != "worker") continue;
      if (s.name != "push" && s.name != "pull") continue;
      const std::optional<double> step = s.Arg("step");
      const std::optional<double> shard = s.Arg("shard");
      if (!step || !shard) continue;
      auto sp = shard_process.find(static_cast<int>(*shard));
      if (sp == shard_process.end()) continue;
      auto it = shard_spans.find({static_cast<int>(*shard), static_cast<int64_t>(*step)});
      if (it == shard_spans.end()) continue;
      // The worker's own aggregate: the last-ending shard span of (step, worker).
      const Span* own = nullptr;
      for (const Span* t : it->second) {
        if (t->process != sp->second) continue;
        if (t->Arg("worker") != static_cast<double>(p.index)) continue;
        if (own == nullptr || t->end > own->end) own = t;
      }
      if (s.name == "push") {
        if (own != nullptr) Flow("push -> aggregate", s, Mid(s), *own, Mid(*own));
        continue;
      }
      // The pull (the updated chunks arriving): the last update of the step that began
      // before the first arrived and ended by the last (else the worker's own
      // aggregate, so bounded).
      const auto before = [&s](const Span* t) { return t->start <= s.start && t->end <= s.end; };
      const Span* from = nullptr;
      for (const Span* t : it->second) {
        if (t->process != sp->second || t->name != "update" || !before(t)) continue;
        if (from == nullptr || t->end > from->end) from = t;
      }
      if (from == nullptr && own != nullptr && before(own)) from = own;
      if (from != nullptr) Flow("aggregate -> pull", *from, Mid(*from), s, Mid(s));
    }
  }

  void DdpFlows() {
    // Per process, its training-thread spans by start.
    std::map<int, std::vector<const Span*>> training;
    for (const Span& s : spans_) {
      if (s.tid == 0) training[s.process].push_back(&s);
    }
    for (auto& [process, list] : training) {
      std::sort(list.begin(), list.end(),
                [](const Span* a, const Span* b) { return a->start < b->start; });
    }
    for (const Span& s : spans_) {
      const Process& p = processes_[s.process];
      if (p.owner != Owner::kRank || !absl::StartsWith(s.name, "all-reduce bucket")) continue;
      double ready = s.start;
      if (std::optional<double> r = s.Arg("ready_us")) ready = *r - origin_;
      // The training thread's innermost span holding the readiness (the track is flat
      // or shallow: a few spans back from the last one starting by then suffice).
      const std::vector<const Span*>& list = training[s.process];
      auto it = std::upper_bound(list.begin(), list.end(), ready,
                                 [](double at, const Span* t) { return at < t->start; });
      const Span* from = nullptr;
      for (int back = 0; it != list.begin() && back < 64; ++back) {
        const Span* t = *--it;
        if (t->end <= ready) continue;
        if (from == nullptr || t->dur() < from->dur()) from = t;
      }
      if (from != nullptr) Flow("ready -> all-reduce", *from, ready, s, Mid(s));
    }
  }

  void Counters() {
    for (size_t i = 0; i < processes_.size(); ++i) {
      // Top-level communication spans with bytes: (time, bytes delta, depth delta).
      std::vector<const Span*> comm;
      for (const Span& s : spans_) {
        if (s.process == static_cast<int>(i) && s.cat == "comm" && s.Arg("bytes")) {
          comm.push_back(&s);
        }
      }
      std::sort(comm.begin(), comm.end(), [](const Span* a, const Span* b) {
        return std::make_tuple(a->tid, a->start, -a->end) < std::make_tuple(b->tid, b->start, -b->end);
      });
      std::vector<std::tuple<double, double, double>> deltas;
      const Span* outer = nullptr;
      for (const Span* s : comm) {
        if (outer != nullptr && outer->tid == s->tid && s->start < outer->end &&
            s->end <= outer->end) {
          continue;  // Nested in a counted span (a push in its push-pull).
        }
        outer = s;
        const std::optional<double> sent = s->Arg("bytes_sent");
        const std::optional<double> received = s->Arg("bytes_received");
        const double bytes = sent || received ? sent.value_or(0) + received.value_or(0)
                                              : *s->Arg("bytes");
        const double depth = s->Arg("queue_depth").value_or(1);
        deltas.emplace_back(s->start, bytes, depth);
        deltas.emplace_back(s->end, -bytes, -depth);
      }
      if (deltas.empty()) continue;
      // Ends before starts at one instant.
      std::sort(deltas.begin(), deltas.end(), [](const auto& a, const auto& b) {
        return std::make_pair(std::get<0>(a), std::get<1>(a)) <
               std::make_pair(std::get<0>(b), std::get<1>(b));
      });
      double bytes = 0, depth = 0;
      for (size_t k = 0; k < deltas.size(); ++k) {
        bytes += std::get<1>(deltas[k]);
        depth += std::get<2>(deltas[k]);
        if (k + 1 < deltas.size() && std::get<0>(deltas[k + 1]) == std::get<0>(deltas[k])) {
          continue;  // One sample per instant.
        }
        const std::string ts = Num(std::get<0>(deltas[k]));
        events_.push_back(absl::StrFormat(
            R"({"name":"in flight","ph":"C","ts":%s,"pid":%d,"tid":0,"args":{"bytes":%s}})", ts,
            Pid(static_cast<int>(i)), Num(std::max(0.0, bytes))));
        events_.push_back(absl::StrFormat(
            R"({"name":"queue","ph":"C","ts":%s,"pid":%d,"tid":0,"args":{"depth":%s}})", ts,
            Pid(static_cast<int>(i)), Num(std::max(0.0, depth))));
        out_.counter_events += 2;
      }
    }
  }

  std::vector<Process> processes_;
  std::vector<Span> spans_;
  std::vector<std::string> events_;
  double origin_ = 0;
  MergedTimeline out_;
};

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code error;
  std::filesystem::rename(tmp, path, error);
  if (error) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

bool IsTraceFileName(const std::string& name) {
  return std::regex_match(name, TraceNamePattern());
}

absl::StatusOr<MergedTimeline> MergeTraceFiles(const std::vector<TraceFileText>& files) {
  if (files.empty()) return absl::InvalidArgumentError("no trace file to merge");
  Merger merger;
  for (const TraceFileText& f : files) {
    if (absl::Status s = merger.Add(f); !s.ok()) return s;
  }
  return merger.Finish();
}

absl::StatusOr<TimelineFiles> WriteRunTimeline(const std::string& run_dir,
                                               const std::string& out_path) {
  namespace fs = std::filesystem;
  std::vector<TraceFileText> files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || !IsTraceFileName(name)) continue;
    absl::StatusOr<std::string> text = ReadText(entry.path().string());
    if (!text.ok()) return text.status();
    files.push_back({name, *std::move(text)});
  }
  if (error) return absl::NotFoundError(absl::StrCat("cannot list ", run_dir, ": ", error.message()));
  if (files.empty()) return absl::NotFoundError(absl::StrCat("no trace*.json in ", run_dir));
  std::sort(files.begin(), files.end(),
            [](const TraceFileText& a, const TraceFileText& b) { return a.name < b.name; });
  TimelineFiles out;
  absl::StatusOr<MergedTimeline> merged = MergeTraceFiles(files);
  if (!merged.ok()) return merged.status();
  out.merged = *std::move(merged);
  out.json_path = out_path.empty() ? absl::StrCat(run_dir, "/timeline.json") : out_path;
  out.html_path = absl::StrCat(absl::StripSuffix(out.json_path, ".json"), ".html");
  if (absl::Status s = WriteText(out.json_path, out.merged.json); !s.ok()) return s;
  const std::string title = fs::path(run_dir).filename().string();
  if (absl::Status s = WriteText(out.html_path, TimelineViewerHtml(out.merged, title)); !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace ringside
