#include "experiments/timeline/merge.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

std::string Meta(int pid, int tid, const std::string& what, const std::string& name) {
  return absl::StrFormat(R"({"name":"%s","ph":"M","pid":%d,"tid":%d,"args":{"name":"%s"}})",
                         what, pid, tid, name);
}

std::string X(int pid, int tid, const std::string& name, const std::string& cat, int64_t ts,
              int64_t dur, const std::string& args) {
  return absl::StrFormat(
      R"({"name":"%s","cat":"%s","ph":"X","ts":%d,"dur":%d,"pid":%d,"tid":%d,"args":{%s}})",
      name, cat, ts, dur, pid, tid, args);
}

// As TraceWriter writes it: "[", events (a batch per line), "]".
std::string File(const std::vector<std::string>& events, bool closed = true) {
  return absl::StrCat("[\n", absl::StrJoin(events, ",\n"), closed ? "\n]\n" : "");
}

constexpr int64_t kT = 1'700'000'000'000'000;  // Wall-clock microseconds.

// Two PS workers and one shard, one step: each worker pushes to shard 0 (push nested
// in push-pull, then pull), the shard aggregates both and updates after the second.
std::vector<TraceFileText> PsRun() {
  std::vector<TraceFileText> files;
  for (int w = 0; w < 2; ++w) {
    const int64_t at = kT + w * 10;
    const std::string args = absl::StrFormat(
        R"("step":0,"shard":0,"bytes":2000,"bytes_sent":1000,"bytes_received":1000)");
    files.push_back({absl::StrCat("trace.rank", w, ".json"),
                     File({Meta(w, 0, "process_name", absl::StrCat("worker ", w)),
                           Meta(w, 0, "thread_name", "training thread"),
                           X(w, 0, "backward", "compute", at, 100, R"("step":0)"),
                           Meta(w, 100, "thread_name", "push-pull shard 0"),
                           X(w, 100, "push-pull", "comm", at + 100, 400, args),
                           X(w, 100, "push", "comm", at + 100, 100, args),
                           X(w, 100, "pull", "comm", at + 350, 150, args)})});
  }
  std::vector<std::string> shard = {Meta(1000, 0, "process_name", "shard 0")};
  for (int w = 0; w < 2; ++w) {
    shard.push_back(X(1000, 100 + w, "aggregate", "compute", kT + 220 + w * 40, 20,
                      absl::StrFormat(R"("step":0,"worker":%d,"chunk":0,"bytes":1000)", w)));
  }
  shard.push_back(X(1000, 101, "update", "update", kT + 280, 30,
                    R"("step":0,"worker":1,"chunk":0,"bytes":1000)"));
  shard.push_back(X(1000, 110, "step", "comm", kT + 200, 300,
                    R"("step":0,"bytes":4000,"queue_depth":2)"));
  files.push_back({"trace.shard0.json", File(shard)});
  return files;
}

struct Parsed {
  std::vector<Struct> events;
  std::map<int, std::string> process_names;
  std::map<int, int> sort_index;
};

Parsed Parse(const std::string& json) {
  Struct root;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &root).ok()) << json;
  Parsed p;
  EXPECT_EQ(root.fields().at("displayTimeUnit").string_value(), "ms");
  for (const Value& v : root.fields().at("traceEvents").list_value().values()) {
    const Struct& e = v.struct_value();
    p.events.push_back(e);
    const std::string ph = e.fields().at("ph").string_value();
    const std::string name = e.fields().at("name").string_value();
    const int pid = static_cast<int>(e.fields().at("pid").number_value());
    if (ph == "M" && name == "process_name") {
      p.process_names[pid] = e.fields().at("args").struct_value().fields().at("name").string_value();
    }
    if (ph == "M" && name == "process_sort_index") {
      p.sort_index[pid] = static_cast<int>(
          e.fields().at("args").struct_value().fields().at("sort_index").number_value());
    }
  }
  return p;
}

double Num(const Struct& e, const std::string& key) { return e.fields().at(key).number_value(); }
std::string Str(const Struct& e, const std::string& key) {
  auto it = e.fields().find(key);
  return it == e.fields().end() ? "" : it->second.string_value();
}

// Flow name -> count of flows whose both ends exist and lie strictly inside a span of
// their track that has no span nested in it; fails on any other flow event.
std::map<std::string, int> CheckedFlows(const Parsed& p) {
  std::map<double, std::map<std::string, const Struct*>> by_id;
  for (const Struct& e : p.events) {
    const std::string ph = Str(e, "ph");
    if (ph == "s" || ph == "f") by_id[Num(e, "id")][ph] = &e;
  }
  // The innermost span holding `point` on its track holds no other span.
  const auto leaf_holding = [&p](const Struct& point) {
    std::vector<const Struct*> track;
    const Struct* inner = nullptr;
    for (const Struct& e : p.events) {
      if (Str(e, "ph") != "X" || Num(e, "pid") != Num(point, "pid") ||
          Num(e, "tid") != Num(point, "tid")) {
        continue;
      }
      track.push_back(&e);
      if (Num(e, "ts") < Num(point, "ts") && Num(point, "ts") < Num(e, "ts") + Num(e, "dur") &&
          (inner == nullptr || Num(e, "dur") < Num(*inner, "dur"))) {
        inner = &e;
      }
    }
    if (inner == nullptr) return false;
    for (const Struct* e : track) {
      if (e != inner && Num(*e, "ts") >= Num(*inner, "ts") &&
          Num(*e, "ts") + Num(*e, "dur") <= Num(*inner, "ts") + Num(*inner, "dur")) {
        return false;
      }
    }
    return true;
  };
  std::map<std::string, int> names;
  for (const auto& [id, ends] : by_id) {
    EXPECT_EQ(ends.size(), 2u) << "flow " << id << " lacks an end";
    if (ends.size() != 2) continue;
    const Struct& s = *ends.at("s");
    const Struct& f = *ends.at("f");
    EXPECT_EQ(Str(s, "name"), Str(f, "name"));
    EXPECT_EQ(Str(f, "bp"), "e");
    EXPECT_TRUE(leaf_holding(s)) << "flow " << id << " starts outside a leaf span";
    EXPECT_TRUE(leaf_holding(f)) << "flow " << id << " ends outside a leaf span";
    ++names[Str(s, "name")];
  }
  return names;
}

TEST(MergeTest, OneNamedSortedProcessTrackPerFile) {
  absl::StatusOr<MergedTimeline> merged = MergeTraceFiles(PsRun());
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->processes, 3);
  EXPECT_TRUE(merged->truncated.empty());
  const Parsed p = Parse(merged->json);
  EXPECT_EQ(p.process_names, (std::map<int, std::string>{{1, "worker 0"}, {2, "worker 1"},
                                                         {3, "shard 0"}}));
  EXPECT_EQ(p.sort_index, (std::map<int, int>{{1, 1}, {2, 2}, {3, 3}}));
  // Thread names keep their tids; spans move to the new pids, time from the origin.
  std::set<std::pair<int, int>> named, used;
  for (const Struct& e : p.events) {
    if (Str(e, "name") == "thread_name") named.insert({Num(e, "pid"), Num(e, "tid")});
    if (Str(e, "ph") == "X") {
      used.insert({Num(e, "pid"), Num(e, "tid")});
      EXPECT_GE(Num(e, "ts"), 0);
      EXPECT_LT(Num(e, "ts"), 1000);
    }
  }
  EXPECT_TRUE(named.count({2, 100}));
  EXPECT_EQ(merged->threads, static_cast<int>(used.size()));
  EXPECT_EQ(used.count({3, 110}), 1u);
}

TEST(MergeTest, PsFlowsFromPushToAggregateToPull) {
  absl::StatusOr<MergedTimeline> merged = MergeTraceFiles(PsRun());
  ASSERT_TRUE(merged.ok()) << merged.status();
  const std::map<std::string, int> flows = CheckedFlows(Parse(merged->json));
  EXPECT_EQ(flows, (std::map<std::string, int>{{"push -> aggregate", 2},
                                               {"aggregate -> pull", 2}}));
  EXPECT_EQ(merged->flows, 4);
}

TEST(MergeTest, NoFlowWhereAnEndIsMissing) {
  std::vector<TraceFileText> files = PsRun();
  files.pop_back();  // No shard trace: nothing to match the pushes and pulls with.
  absl::StatusOr<MergedTimeline> merged = MergeTraceFiles(files);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->flows, 0);
  EXPECT_TRUE(CheckedFlows(Parse(merged->json)).empty());
}

TEST(MergeTest, DdpFlowFromReadinessToAllReduce) {
  std::vector<TraceFileText> files;
  for (int r = 0; r < 2; ++r) {
    files.push_back(
        {absl::StrCat("trace.rank", r, ".json"),
         File({Meta(r, 0, "process_name", absl::StrCat("rank ", r)),
               X(r, 0, "forward", "compute", kT, 100, R"("step":0)"),
               X(r, 0, "backward", "compute", kT + 100, 200, R"("step":0)"),
               X(r, 0, "wait for all-reduce", "wait", kT + 300, 50, R"("step":0,"bucket":0)"),
               X(r, 100, "all-reduce bucket 1", "comm", kT + 150, 100,
                 R"("step":0,"bucket":1,"bytes":400,"bytes_sent":300,"bytes_received":300)"),
               X(r, 101, "all-reduce bucket 0", "comm", kT + 200, 140,
                 R"("step":0,"bucket":0,"bytes":400,"bytes_sent":300,"bytes_received":300,)"
                 R"("ready_us":1700000000000180)")})});
  }
  absl::StatusOr<MergedTimeline> merged = MergeTraceFiles(files);
  ASSERT_TRUE(merged.ok()) << merged.status();
  const Parsed p = Parse(merged->json);
  EXPECT_EQ(p.process_names, (std::map<int, std::string>{{1, "rank 0"}, {2, "rank 1"}}));
  EXPECT_EQ(CheckedFlows(p), (std::map<std::string, int>{{"ready -> all-reduce", 4}}));
  // Bucket 0's flow starts at its args.ready_us (180 us after the origin), in backward.
  bool at_ready = false;
  for (const Struct& e : p.events) {
    if (Str(e, "ph") == "s" && Num(e, "ts") == 180) at_ready = true;
  }
  EXPECT_TRUE(at_ready);
  // Bytes in flight: both buckets' sent + received while they overlap.
  double most = 0;
  int queue_samples = 0;
  for (const Struct& e : p.events) {
    if (Str(e, "ph") != "C" || Num(e, "pid") != 1) continue;
    const Struct& args = e.fields().at("args").struct_value();
    if (Str(e, "name") == "in flight") most = std::max(most, Num(args, "bytes"));
    if (Str(e, "name") == "queue") ++queue_samples;
  }
  EXPECT_EQ(most, 1200);
  EXPECT_EQ(queue_samples, 4);
}

TEST(MergeTest, CountersOfWorkersAndShards) {
  absl::StatusOr<MergedTimeline> merged = MergeTraceFiles(PsRun());
  ASSERT_TRUE(merged.ok()) << merged.status();
  std::map<int, double> bytes, depth;
  for (const Struct& e : Parse(merged->json).events) {
    if (Str(e, "ph") != "C") continue;
    const Struct& args = e.fields().at("args").struct_value();
    const int pid = static_cast<int>(Num(e, "pid"));
    if (Str(e, "name") == "in flight") bytes[pid] = std::max(bytes[pid], Num(args, "bytes"));
    if (Str(e, "name") == "queue") depth[pid] = std::max(depth[pid], Num(args, "depth"));
  }
  // A worker counts its push-pull once (not the push and pull nested in it); the shard
  // its step, with the step's queue depth.
  EXPECT_EQ(bytes, (std::map<int, double>{{1, 2000}, {2, 2000}, {3, 4000}}));
  EXPECT_EQ(depth, (std::map<int, double>{{1, 1}, {2, 1}, {3, 2}}));
}

TEST(MergeTest, ReadsTheTraceOfAKilledProcess) {
  std::vector<TraceFileText> files = PsRun();
  // Worker 1 died: no closing "]", and its last batch only half written.
  files[1].text = absl::StrCat(File({Meta(1, 0, "process_name", "worker 1"),
                                     X(1, 0, "backward", "compute", kT, 100, R"("step":0)")},
                                    /*closed=*/false),
                               ",\n{\"name\":\"push\",\"ph\":\"X\",\"ts\":17");
  absl::StatusOr<MergedTimeline> merged = MergeTraceFiles(files);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->truncated, std::vector<std::string>{"trace.rank1.json"});
  EXPECT_EQ(merged->processes, 3);
  EXPECT_EQ(Parse(merged->json).process_names.at(2), "worker 1");
  // Only worker 0's flows remain.
  EXPECT_EQ(CheckedFlows(Parse(merged->json)),
            (std::map<std::string, int>{{"push -> aggregate", 1}, {"aggregate -> pull", 1}}));
}

TEST(MergeTest, AWorkerCutInItsFirstBatchIsStillAWorker) {
  std::vector<TraceFileText> files = PsRun();
  files[1].text = "[\n{\"name\":\"process_na";  // Not even its name got out.
  absl::StatusOr<MergedTimeline> merged = MergeTraceFiles(files);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->truncated, std::vector<std::string>{"trace.rank1.json"});
  EXPECT_EQ(Parse(merged->json).process_names.at(2), "worker 1");
}

TEST(MergeTest, ResumedRunsGetTracksOfTheirOwn) {
  std::vector<TraceFileText> files = PsRun();
  files.push_back({"trace.rank0.run2.json",
                   File({Meta(0, 0, "process_name", "worker 0"),
                         X(0, 0, "backward", "compute", kT + 5000, 100, R"("step":1)")})});
  absl::StatusOr<MergedTimeline> merged = MergeTraceFiles(files);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(Parse(merged->json).process_names,
            (std::map<int, std::string>{
                {1, "worker 0"}, {2, "worker 0 (run 2)"}, {3, "worker 1"}, {4, "shard 0"}}));
}

TEST(MergeTest, BadInput) {
  EXPECT_EQ(MergeTraceFiles({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MergeTraceFiles({{"metrics.jsonl", "[]"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MergeTraceFiles({{"trace.rank0.json", "not json"}}).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_TRUE(IsTraceFileName("trace.shard12.run3.json"));
  EXPECT_FALSE(IsTraceFileName("timeline.json"));
}

TEST(MergeTest, ViewerInlinesTheTrace) {
  absl::StatusOr<MergedTimeline> merged = MergeTraceFiles(PsRun());
  ASSERT_TRUE(merged.ok()) << merged.status();
  const std::string html = TimelineViewerHtml(*merged, "a</script>b");
  EXPECT_NE(html.find("id=\"summary\""), std::string::npos);
  EXPECT_NE(html.find("\"traceEvents\""), std::string::npos);
  EXPECT_EQ(html.find("a</script>b"), std::string::npos);
}

}  // namespace
}  // namespace ringside
