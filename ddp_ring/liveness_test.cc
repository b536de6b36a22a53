// liveness.h on the in-memory store, and on one that stops answering.
#include "ddp_ring/liveness.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "ddp_ring/store.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// A store whose every call fails, as when its host is gone.
class GoneStore final : public Store {
 public:
  absl::Status Set(const std::string&, const std::string&) override { return Gone(); }
  absl::StatusOr<std::string> Get(const std::string&, absl::Duration) override { return Gone(); }
  absl::Status Wait(const std::vector<std::string>&, absl::Duration) override { return Gone(); }
  absl::StatusOr<int64_t> Add(const std::string&, int64_t) override { return Gone(); }

 private:
  static absl::Status Gone() { return absl::UnavailableError("gone"); }
};

std::string Key(int r) { return absl::StrCat("record/", r); }

TEST(LivenessTest, ReadRankRecordsSkipsThisRankAndTellsMissingKeys) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  ASSERT_TRUE(store->Set(Key(0), "a").ok());
  ASSERT_TRUE(store->Set(Key(1), "b").ok());
  ASSERT_TRUE(store->Set(Key(3), "d").ok());
  const RankRecords records = ReadRankRecords(store.get(), /*rank=*/1, 4, Key);
  EXPECT_TRUE(records.store_ok);
  ASSERT_EQ(records.values.size(), 4u);
  EXPECT_EQ(records.values[0], "a");
  EXPECT_FALSE(records.values[1].has_value());  // This rank's own: not read.
  EXPECT_FALSE(records.values[2].has_value());  // Missing.
  EXPECT_EQ(records.values[3], "d");
}

TEST(LivenessTest, ReadRankRecordsTellsAStoreThatDoesNotAnswer) {
  GoneStore store;
  EXPECT_FALSE(ReadRankRecords(&store, 0, 3, Key).store_ok);
}

TEST(LivenessTest, JoinRanksListsThemForMessages) {
  EXPECT_EQ(JoinRanks({2}), "2");
  EXPECT_EQ(JoinRanks({1, 3}), "1, 3");
  EXPECT_EQ(JoinRanks({}), "");
}

TEST(LivenessTest, CheckInNamesTheRanksThatNeverCheckIn) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  // Ranks 0 and 2 survive; 1 and 3 are gone.
  std::thread other([&] { CheckInAfterFailure(store.get(), 2, 4, absl::Milliseconds(300)); });
  const CheckIn check_in = CheckInAfterFailure(store.get(), 0, 4, absl::Milliseconds(300));
  other.join();
  EXPECT_FALSE(check_in.store_unreachable);
  EXPECT_EQ(check_in.missing, (std::vector<int>{1, 3}));
}

TEST(LivenessTest, CheckInReturnsAtOnceWhenEveryoneChecksIn) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::thread other([&] { CheckInAfterFailure(store.get(), 1, 2, absl::Seconds(10)); });
  const absl::Time start = absl::Now();
  const CheckIn check_in = CheckInAfterFailure(store.get(), 0, 2, absl::Seconds(10));
  other.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(check_in.store_unreachable);
  EXPECT_TRUE(check_in.missing.empty());
}

TEST(LivenessTest, CheckInTellsAStoreThatDoesNotAnswer) {
  GoneStore store;
  const CheckIn check_in = CheckInAfterFailure(&store, 1, 3, absl::Milliseconds(100));
  EXPECT_TRUE(check_in.store_unreachable);
  EXPECT_TRUE(check_in.missing.empty());
}

}  // namespace
}  // namespace ringside
