#include "ddp_ring/rank_monitor.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ddp_ring/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr absl::Duration kInterval = absl::Milliseconds(50);
// Diagnose takes about 2 intervals, at most 6; bounds for what should be prompt are
// generous, so that a loaded 2-core machine does not flake, yet far below "hangs".
constexpr absl::Duration kDiagnoseBound = absl::Seconds(1);
constexpr absl::Duration kPrompt = absl::Seconds(1);

// A view of a store whose calls can be made to fail (a rank wedged as a whole: its
// beats stop reaching the store) or to hang (a stopped store host), counting the Sets.
class FaultyStore final : public Store {
 public:
  enum class Mode { kPass, kFail, kHang };
  explicit FaultyStore(Store* base) : base_(base) {}
  ~FaultyStore() override { Release(); }

  void set_mode(Mode mode) { mode_.store(mode); }
  // Ends every hang, now and later (hung calls then fail).
  void Release() {
    if (!released_.HasBeenNotified()) released_.Notify();
  }
  int sets() const { return sets_.load(); }

  absl::Status Set(const std::string& key, const std::string& value) override {
    ++sets_;
    if (absl::Status fault = Fault(); !fault.ok()) return fault;
    return base_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    if (absl::Status fault = Fault(); !fault.ok()) return fault;
    return base_->Get(key, timeout);
  }
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    if (absl::Status fault = Fault(); !fault.ok()) return fault;
    return base_->Wait(keys, timeout);
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    if (absl::Status fault = Fault(); !fault.ok()) return fault;
    return base_->Add(key, delta);
  }

 private:
  absl::Status Fault() {
    switch (mode_.load()) {
      case Mode::kPass:
        return absl::OkStatus();
      case Mode::kHang:
        // Bounded, like a real store's RPC deadline.
        released_.WaitForNotificationWithTimeout(absl::Seconds(30));
        return absl::DeadlineExceededError("faulty store: no answer");
      case Mode::kFail:
        return absl::UnavailableError("faulty store: unreachable");
    }
    return absl::OkStatus();
  }

  Store* const base_;
  std::atomic<Mode> mode_{Mode::kPass};
  std::atomic<int> sets_{0};
  absl::Notification released_;
};

RankMonitor::Options MonitorOptions(int rank, int world_size) {
  RankMonitor::Options options;
  options.rank = rank;
  options.world_size = world_size;
  options.interval = kInterval;
  return options;
}

// One monitor per rank in `ranks` of a world of `world_size`, all on `store`, each
// having issued collective #0.
std::vector<std::unique_ptr<RankMonitor>> StartMonitors(Store* store, int world_size,
                                                        const std::vector<int>& ranks) {
  std::vector<std::unique_ptr<RankMonitor>> monitors(world_size);
  for (int r : ranks) {
    absl::StatusOr<std::unique_ptr<RankMonitor>> monitor =
        RankMonitor::Start(store, MonitorOptions(r, world_size));
    EXPECT_TRUE(monitor.ok()) << monitor.status();
    if (!monitor.ok()) continue;
    monitors[r] = *std::move(monitor);
    monitors[r]->NoteIssued(0);
  }
  return monitors;
}

// Runs Diagnose(seq) on every given monitor at once (as every survivor would), each
// result checked to come within kDiagnoseBound.
std::vector<std::string> DiagnoseAll(const std::vector<RankMonitor*>& monitors, int64_t seq) {
  std::vector<std::string> results(monitors.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < monitors.size(); ++i) {
    threads.emplace_back([&, i] {
      const absl::Time start = absl::Now();
      results[i] = monitors[i]->Diagnose(seq);
      EXPECT_LT(absl::Now() - start, kDiagnoseBound) << "monitor #" << i;
    });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

TEST(RankMonitorTest, StartRejectsBadOptions) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  EXPECT_EQ(RankMonitor::Start(store.get(), MonitorOptions(3, 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RankMonitor::Start(nullptr, MonitorOptions(0, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  RankMonitor::Options options = MonitorOptions(0, 2);
  options.interval = absl::ZeroDuration();
  EXPECT_EQ(RankMonitor::Start(store.get(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RankMonitorTest, StartFailsWhenTheFirstBeatCannotBePublished) {
  std::unique_ptr<Store> base = NewInMemoryStore();
  FaultyStore store(base.get());
  store.set_mode(FaultyStore::Mode::kFail);
  absl::StatusOr<std::unique_ptr<RankMonitor>> monitor =
      RankMonitor::Start(&store, MonitorOptions(1, 2));
  EXPECT_EQ(monitor.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(monitor.status().message(), HasSubstr("rank 1: cannot publish its heartbeat"));
}

TEST(RankMonitorTest, StartPublishesTheFirstBeat) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  RankMonitor::Options options = MonitorOptions(1, 2);
  options.interval = absl::Hours(1);  // Only Start's own beat.
  absl::StatusOr<std::unique_ptr<RankMonitor>> monitor = RankMonitor::Start(store.get(), options);
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  absl::StatusOr<std::string> record = store->Get("heartbeat/1", absl::ZeroDuration());
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(*record, "1:-1");
}

TEST(RankMonitorTest, AWorldOfOneIsAlwaysHealthy) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<std::unique_ptr<RankMonitor>> monitors = StartMonitors(store.get(), 1, {0});
  ASSERT_NE(monitors[0], nullptr);
  const absl::Time start = absl::Now();
  EXPECT_EQ(monitors[0]->Diagnose(7), "");
  EXPECT_LT(absl::Now() - start, kInterval);
}

TEST(RankMonitorTest, HealthyRanksAreNotNamed) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<std::unique_ptr<RankMonitor>> monitors = StartMonitors(store.get(), 3, {0, 1, 2});
  for (auto& monitor : monitors) {
    ASSERT_NE(monitor, nullptr);
    monitor->NoteIssued(4);
  }
  for (const std::string& result : DiagnoseAll({monitors[0].get(), monitors[1].get(),
                                                 monitors[2].get()},
                                                4)) {
    EXPECT_EQ(result, "");
  }
  // Ahead of the failed collective is healthy too.
  EXPECT_EQ(monitors[0]->Diagnose(3), "");
}

TEST(RankMonitorTest, EverySurvivorNamesADeadRank) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<std::unique_ptr<RankMonitor>> monitors = StartMonitors(store.get(), 3, {0, 1, 2});
  for (auto& monitor : monitors) ASSERT_NE(monitor, nullptr);
  monitors[2].reset();  // Rank 2 dies.
  for (const std::string& result :
       DiagnoseAll({monitors[0].get(), monitors[1].get()}, /*seq=*/0)) {
    EXPECT_THAT(result, HasSubstr("rank 2 stopped responding (no heartbeat in "));
    // What tests/ddp_faults_test.sh looks for in a survivor's error line.
    EXPECT_THAT(result, ContainsRegex("rank ([0-9]+, )*2\\b"));
    EXPECT_THAT(result, Not(HasSubstr("rank 0")));
    EXPECT_THAT(result, Not(HasSubstr("rank 1")));
  }
}

TEST(RankMonitorTest, SeveralDeadRanksAreListed) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<std::unique_ptr<RankMonitor>> monitors =
      StartMonitors(store.get(), 4, {0, 1, 2, 3});
  for (auto& monitor : monitors) ASSERT_NE(monitor, nullptr);
  monitors[1].reset();
  monitors[3].reset();
  for (const std::string& result :
       DiagnoseAll({monitors[0].get(), monitors[2].get()}, /*seq=*/0)) {
    EXPECT_THAT(result, HasSubstr("rank 1, 3 stopped responding"));
    EXPECT_THAT(result, ContainsRegex("rank ([0-9]+, )*3\\b"));
  }
}

// A rank wedged as a whole (or stopped by SIGSTOP): its process lives on, its beats stop.
// Its own monitor neither crashes nor spins on the failing store.
TEST(RankMonitorTest, AWedgedRankIsNamedAndItsMonitorKeepsItsPace) {
  std::unique_ptr<Store> base = NewInMemoryStore();
  FaultyStore wedged(base.get());
  std::vector<std::unique_ptr<RankMonitor>> monitors = StartMonitors(base.get(), 3, {0, 1});
  absl::StatusOr<std::unique_ptr<RankMonitor>> rank2 =
      RankMonitor::Start(&wedged, MonitorOptions(2, 3));
  ASSERT_TRUE(rank2.ok()) << rank2.status();
  wedged.set_mode(FaultyStore::Mode::kFail);
  const int sets_before = wedged.sets();
  const absl::Time start = absl::Now();
  EXPECT_THAT(monitors[0]->Diagnose(0), HasSubstr("rank 2 stopped responding"));
  // One Set per interval at most (and a beat overdue at once): no retry loop.
  const int64_t intervals = (absl::Now() - start) / kInterval;
  EXPECT_LE(wedged.sets() - sets_before, intervals + 2);
  // The wedged rank's own reads fail too: it blames the store.
  EXPECT_THAT((*rank2)->Diagnose(0), HasSubstr("the job's store is unreachable"));
  const absl::Time destroy = absl::Now();
  rank2->reset();
  EXPECT_LT(absl::Now() - destroy, kPrompt);
}

TEST(RankMonitorTest, ARankThatNeverBeatIsNamed) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<std::unique_ptr<RankMonitor>> monitors = StartMonitors(store.get(), 3, {0, 1});
  ASSERT_NE(monitors[0], nullptr);
  EXPECT_EQ(monitors[0]->Diagnose(0), "rank 2 never sent a heartbeat");
}

TEST(RankMonitorTest, ALiveRankThatLagsIsNamedWithTheCollective) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<std::unique_ptr<RankMonitor>> monitors =
      StartMonitors(store.get(), 4, {0, 1, 2, 3});
  for (auto& monitor : monitors) ASSERT_NE(monitor, nullptr);
  monitors[0]->NoteIssued(17);
  monitors[1]->NoteIssued(16);  // Stuck before issuing #17 (a long compute, a deadlock).
  monitors[2]->NoteIssued(17);
  monitors[3]->NoteIssued(18);
  EXPECT_EQ(monitors[0]->Diagnose(17), "rank 1 is alive but never issued collective #17");
  monitors[2]->NoteIssued(16);  // Not monotonic in a real group; enough to make two lag.
  EXPECT_EQ(monitors[0]->Diagnose(17), "rank 1, 2 are alive but never issued collective #17");
}

TEST(RankMonitorTest, DeadAndLaggingRanksAreBothNamed) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<std::unique_ptr<RankMonitor>> monitors = StartMonitors(store.get(), 3, {0, 1, 2});
  for (auto& monitor : monitors) ASSERT_NE(monitor, nullptr);
  monitors[0]->NoteIssued(5);
  monitors[1]->NoteIssued(4);
  monitors[2].reset();
  const std::string result = monitors[0]->Diagnose(5);
  EXPECT_THAT(result, HasSubstr("rank 2 stopped responding"));
  EXPECT_THAT(result, HasSubstr("; rank 1 is alive but never issued collective #5"));
}

// The store's host stopped (SIGSTOP): calls hang until their RPC deadline. Diagnose does
// not wait for that deadline.
TEST(RankMonitorTest, AHungStoreIsReportedWithinSixIntervals) {
  std::unique_ptr<Store> base = NewInMemoryStore();
  FaultyStore store(base.get());
  RankMonitor::Options options = MonitorOptions(1, 3);
  options.store_host_rank = -1;  // e.g. torchrun's agent store.
  std::vector<std::unique_ptr<RankMonitor>> monitors = StartMonitors(&store, 3, {0, 2});
  absl::StatusOr<std::unique_ptr<RankMonitor>> rank1 = RankMonitor::Start(&store, options);
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  store.set_mode(FaultyStore::Mode::kHang);
  // The hung calls' "deadline", before the monitors are destroyed (even on a failed ASSERT).
  absl::Cleanup release = [&store] { store.Release(); };
  const absl::Time start = absl::Now();
  EXPECT_EQ(monitors[0]->Diagnose(0), "the job's store is unreachable");  // Its own.
  EXPECT_EQ(monitors[2]->Diagnose(0),
            "the job's store is unreachable (rank 0, which hosts it, is probably gone)");
  EXPECT_EQ((*rank1)->Diagnose(0), "the job's store is unreachable");
  EXPECT_LT(absl::Now() - start, 3 * kDiagnoseBound);
}

// Monitors on ringside's gRPC store, whose server then goes away (rank 0 died).
TEST(RankMonitorTest, AnUnreachableStoreIsReportedAndDoesNotDelayShutdown) {
  absl::StatusOr<std::unique_ptr<StoreServer>> server = StoreServer::Start("127.0.0.1", 0, RpcSecurity());
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::unique_ptr<Store>> clients;
  std::vector<std::unique_ptr<RankMonitor>> monitors;
  for (int r = 0; r < 3; ++r) {
    absl::StatusOr<std::unique_ptr<Store>> client =
        ConnectStore("127.0.0.1", (*server)->port(), RpcSecurity(), absl::Seconds(3), absl::Seconds(2));
    ASSERT_TRUE(client.ok()) << client.status();
    clients.push_back(*std::move(client));
    absl::StatusOr<std::unique_ptr<RankMonitor>> monitor =
        RankMonitor::Start(clients.back().get(), MonitorOptions(r, 3));
    ASSERT_TRUE(monitor.ok()) << monitor.status();
    monitors.push_back(*std::move(monitor));
    monitors.back()->NoteIssued(0);
  }
  EXPECT_EQ(monitors[1]->Diagnose(0), "");  // Healthy over gRPC first.
  (*server)->Shutdown();
  for (const std::string& result :
       DiagnoseAll({monitors[1].get(), monitors[2].get()}, /*seq=*/0)) {
    EXPECT_EQ(result,
              "the job's store is unreachable (rank 0, which hosts it, is probably gone)");
  }
  for (auto& monitor : monitors) {
    const absl::Time start = absl::Now();
    monitor.reset();
    EXPECT_LT(absl::Now() - start, kPrompt);
  }
}

}  // namespace
}  // namespace ringside
