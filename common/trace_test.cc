#include "common/trace.h"

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/trace.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// The events of a trace file, checking that it is the streamed array: "[", one line
// per printed batch, "]".
std::vector<trace::TraceEvent> ReadEvents(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  EXPECT_GE(lines.size(), 3u);
  EXPECT_EQ(lines.front(), "[");
  EXPECT_EQ(lines.back(), "]");
  absl::StatusOr<trace::TraceEventBatch> batch = ReadTraceFile(path);
  EXPECT_TRUE(batch.ok()) << batch.status();
  if (!batch.ok()) return {};
  return std::vector<trace::TraceEvent>(batch->events().begin(), batch->events().end());
}

double Arg(const trace::TraceEvent& e, const std::string& key) {
  auto it = e.args().fields().find(key);
  return it == e.args().fields().end() ? -1 : it->second.number_value();
}

TEST(TraceTest, WritesEventsWithCategoriesAndArgs) {
  const std::string path = TempPath("t.json");
  auto trace = TraceWriter::Open(path, 2, "rank 2");
  ASSERT_TRUE(trace.ok());
  (*trace)->NameTrack(kTrainingTrack, "training thread");
  (*trace)->Span("before any step", kCatData, kTrainingTrack, 900, 10);
  (*trace)->SetStep(7);
  (*trace)->Span("forward", kCatCompute, kTrainingTrack, 1000, 250);
  (*trace)->Span("all\"reduce", kCatComm, 3, 1100, 0, {{"bytes", 4096}, {"step", 6}});
  ASSERT_TRUE((*trace)->Close().ok());
  const std::vector<trace::TraceEvent> events = ReadEvents(path);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].ph(), "M");
  EXPECT_EQ(events[0].name(), "process_name");
  EXPECT_EQ(events[0].args().fields().at("name").string_value(), "rank 2");
  EXPECT_EQ(events[1].args().fields().at("name").string_value(), "training thread");
  EXPECT_EQ(Arg(events[2], "step"), -1);  // No step set yet.
  const trace::TraceEvent& fwd = events[3];
  EXPECT_EQ(fwd.name(), "forward");
  EXPECT_EQ(fwd.cat(), "compute");
  EXPECT_EQ(fwd.ph(), "X");
  EXPECT_EQ(fwd.pid(), 2);
  EXPECT_EQ(fwd.ts(), 1000);
  EXPECT_EQ(fwd.dur(), 250);
  EXPECT_EQ(Arg(fwd, "step"), 7);
  const trace::TraceEvent& comm = events[4];
  EXPECT_EQ(comm.name(), "all\"reduce");
  EXPECT_EQ(comm.tid(), 3);
  EXPECT_EQ(comm.dur(), 0);
  EXPECT_EQ(Arg(comm, "bytes"), 4096);
  EXPECT_EQ(Arg(comm, "step"), 6);  // Its own step wins over SetStep's.
}

TEST(TraceTest, WallClockTimestampsSurviveTheJsonRoundTrip) {
  const std::string path = TempPath("ts.json");
  auto trace = TraceWriter::Open(path, 0, "single 0");
  ASSERT_TRUE(trace.ok());
  // 16 digits; one of them printed in exponent form by the JSON printer.
  (*trace)->Span("a", kCatCompute, 0, 1763935123456789, 1);
  (*trace)->Span("b", kCatCompute, 0, 1763935123456780, 1);
  ASSERT_TRUE((*trace)->Close().ok());
  const std::vector<trace::TraceEvent> events = ReadEvents(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(static_cast<int64_t>(events[1].ts()), 1763935123456789);
  EXPECT_EQ(static_cast<int64_t>(events[2].ts()), 1763935123456780);
}

TEST(TraceTest, LanesKeepConcurrentSpansApart) {
  const std::string path = TempPath("lanes.json");
  auto trace = TraceWriter::Open(path, 0, "rank 0");
  ASSERT_TRUE(trace.ok());
  // Three buckets in flight at once, then one after all of them, then one that
  // starts before the last one drawn ended.
  const std::vector<TraceInterval> spans = {
      {0, 100}, {10, 50}, {40, 120}, {130, 140}, {20, 30}};
  std::map<int, std::vector<TraceInterval>> by_tid;
  for (const TraceInterval& s : spans) {
    const int tid = (*trace)->Lane("all-reduce", s.start_us, s.end_us);
    EXPECT_GE(tid, TraceWriter::kFirstLaneTid);
    (*trace)->Span("bucket", kCatComm, tid, s.start_us, s.end_us - s.start_us);
    by_tid[tid].push_back(s);
  }
  // A second group never shares the first one's tracks.
  const int other = (*trace)->Lane("push-pull", 0, 1000);
  EXPECT_EQ(by_tid.count(other), 0u);
  for (const auto& [tid, list] : by_tid) {
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t j = i + 1; j < list.size(); ++j) {
        EXPECT_LE(std::min(list[i].end_us, list[j].end_us),
                  std::max(list[i].start_us, list[j].start_us))
            << "lane " << tid << " overlaps";
      }
    }
  }
  EXPECT_EQ(by_tid.size(), 4u);  // {0,100} {10,50}+{130,140} {40,120} {20,30}
  ASSERT_TRUE((*trace)->Close().ok());
  int named = 0;
  for (const trace::TraceEvent& e : ReadEvents(path)) {
    if (e.name() == "thread_name") ++named;
  }
  EXPECT_EQ(named, 5);  // Four all-reduce lanes and one push-pull lane.
}

// More events than a batch: printed on the writer's thread, in order, one line per
// batch.
TEST(TraceTest, BatchesKeepTheOrder) {
  const std::string path = TempPath("many.json");
  auto trace = TraceWriter::Open(path, 0, "rank 0");
  ASSERT_TRUE(trace.ok());
  const int n = 3 * TraceWriter::kBatchEvents;
  for (int i = 0; i < n; ++i) (*trace)->Span("s", kCatCompute, 0, 1000 + i, 1);
  ASSERT_TRUE((*trace)->Close().ok());
  (*trace)->Span("after close", kCatCompute, 0, 0, 1);  // Dropped.
  const std::vector<trace::TraceEvent> events = ReadEvents(path);
  ASSERT_EQ(events.size(), static_cast<size_t>(n + 1));
  for (int i = 0; i < n; ++i) EXPECT_EQ(events[i + 1].ts(), 1000 + i);
  std::ifstream in(path);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, 2 + 4);  // "[", "]", and 3 * kBatchEvents + 1 events in 4 batches.
}

TEST(TraceTest, ReadTraceFileRefusesOtherFiles) {
  EXPECT_EQ(ReadTraceFile(TempPath("missing.json")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string path = TempPath("garbage.json");
  std::ofstream(path) << "[{\"name\": \"cut off";
  EXPECT_EQ(ReadTraceFile(path).status().code(), absl::StatusCode::kDataLoss);
}

TEST(TraceTest, NestOrDisjoint) {
  EXPECT_TRUE(NestOrDisjoint({0, 10}, {10, 20}));
  EXPECT_TRUE(NestOrDisjoint({0, 10}, {2, 8}));
  EXPECT_TRUE(NestOrDisjoint({2, 8}, {0, 10}));
  EXPECT_TRUE(NestOrDisjoint({0, 10}, {0, 10}));
  EXPECT_FALSE(NestOrDisjoint({0, 10}, {5, 15}));
  EXPECT_FALSE(NestOrDisjoint({5, 15}, {0, 10}));
}

TEST(TraceTest, UnwritablePathFails) {
  EXPECT_EQ(TraceWriter::Open("/nonexistent-dir/t.json", 0, "x").status().code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace ringside
