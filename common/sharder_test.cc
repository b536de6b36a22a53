#include "common/sharder.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

const int64_t kSizes[] = {1, 2, 7, 8, 10, 17, 100, 1001};

Sharder MakeSharder(int64_t n, int world, int rank, ShardMode mode, uint64_t seed = 7,
                    bool shuffle = true) {
  ShardOptions options;
  options.dataset_size = n;
  options.world_size = world;
  options.rank = rank;
  options.seed = seed;
  options.shuffle = shuffle;
  options.mode = mode;
  absl::StatusOr<Sharder> sharder = Sharder::Create(options);
  EXPECT_TRUE(sharder.ok()) << sharder.status();
  return *std::move(sharder);
}

// Every rank's indices for one epoch.
std::vector<std::vector<int64_t>> AllRanks(int64_t n, int world, ShardMode mode,
                                           int64_t epoch, uint64_t seed = 7,
                                           bool shuffle = true) {
  std::vector<std::vector<int64_t>> out;
  for (int rank = 0; rank < world; ++rank) {
    Sharder sharder = MakeSharder(n, world, rank, mode, seed, shuffle);
    out.push_back(sharder.Indices(epoch));
    EXPECT_EQ(static_cast<int64_t>(out.back().size()), sharder.num_samples());
  }
  return out;
}

TEST(SharderTest, PadGivesEqualCountsAndCoversEverything) {
  for (int world = 1; world <= 8; ++world) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << "world=" << world << " n=" << n);
      const int64_t per_rank = (n + world - 1) / world;
      std::map<int64_t, int> counts;
      for (const auto& indices : AllRanks(n, world, ShardMode::kPad, 3)) {
        ASSERT_EQ(static_cast<int64_t>(indices.size()), per_rank);
        for (int64_t i : indices) {
          ASSERT_GE(i, 0);
          ASSERT_LT(i, n);
          ++counts[i];
        }
      }
      EXPECT_EQ(static_cast<int64_t>(counts.size()), n);  // Every index is covered.
      // Padding repeats the order evenly: no index appears more than ceil(total / n)
      // times.
      const int64_t max_copies = (per_rank * world + n - 1) / n;
      int64_t total = 0;
      for (const auto& [index, count] : counts) {
        EXPECT_LE(count, max_copies) << index;
        total += count;
      }
      EXPECT_EQ(total, per_rank * world);
    }
  }
}

TEST(SharderTest, PadRepeatsTheWholeOrderWhenPaddingExceedsTheDataset) {
  // n = 2, world = 7: the global order [a, b] is padded to [a, b, a, b, a, b, a].
  const auto ranks = AllRanks(2, 7, ShardMode::kPad, 0);
  const int64_t a = ranks[0][0];
  const int64_t b = ranks[1][0];
  EXPECT_NE(a, b);
  for (int rank = 0; rank < 7; ++rank) {
    ASSERT_EQ(ranks[rank].size(), 1u);
    EXPECT_EQ(ranks[rank][0], rank % 2 == 0 ? a : b) << rank;
  }
}

TEST(SharderTest, DropLastGivesEqualCountsWithoutDuplicates) {
  for (int world = 1; world <= 8; ++world) {
    for (int64_t n : kSizes) {
      if (n < world) continue;
      SCOPED_TRACE(testing::Message() << "world=" << world << " n=" << n);
      std::set<int64_t> seen;
      for (const auto& indices : AllRanks(n, world, ShardMode::kDropLast, 1)) {
        ASSERT_EQ(static_cast<int64_t>(indices.size()), n / world);
        for (int64_t i : indices) {
          ASSERT_GE(i, 0);
          ASSERT_LT(i, n);
          EXPECT_TRUE(seen.insert(i).second) << "duplicate " << i;
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n / world * world);
    }
  }
}

TEST(SharderTest, ExactIsDisjointAndComplete) {
  for (int world = 1; world <= 8; ++world) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{8},
                      int64_t{10}, int64_t{17}, int64_t{100}, int64_t{1001}}) {
      SCOPED_TRACE(testing::Message() << "world=" << world << " n=" << n);
      std::set<int64_t> seen;
      int64_t total = 0;
      for (int rank = 0; rank < world; ++rank) {
        Sharder sharder = MakeSharder(n, world, rank, ShardMode::kExact);
        const std::vector<int64_t> indices = sharder.Indices(5);
        ASSERT_EQ(static_cast<int64_t>(indices.size()), sharder.num_samples());
        // Rank r holds positions r, r + world, ... < n.
        EXPECT_EQ(sharder.num_samples(), n / world + (rank < n % world ? 1 : 0));
        for (int64_t i : indices) {
          ASSERT_GE(i, 0);
          ASSERT_LT(i, n);
          EXPECT_TRUE(seen.insert(i).second) << "duplicate " << i;
        }
        total += indices.size();
      }
      EXPECT_EQ(total, n);
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
    }
  }
}

TEST(SharderTest, EmptyDatasetInPadModeHasNoSamples) {
  Sharder sharder = MakeSharder(0, 4, 2, ShardMode::kPad);
  EXPECT_EQ(sharder.num_samples(), 0);
  EXPECT_TRUE(sharder.Indices(0).empty());
}

TEST(SharderTest, SameSeedAndEpochGiveTheSameOrder) {
  for (ShardMode mode : {ShardMode::kPad, ShardMode::kDropLast, ShardMode::kExact}) {
    const Sharder a = MakeSharder(1001, 3, 1, mode);
    const Sharder b = MakeSharder(1001, 3, 1, mode);
    EXPECT_EQ(a.Indices(4), a.Indices(4));
    EXPECT_EQ(a.Indices(4), b.Indices(4));
  }
}

TEST(SharderTest, RanksSliceOneGlobalOrder) {
  // With world = 1 the single rank sees the global order; rank r of world w must see
  // its positions r, r + w, ....
  const std::vector<int64_t> global =
      MakeSharder(100, 1, 0, ShardMode::kExact).Indices(2);
  for (int rank = 0; rank < 4; ++rank) {
    const std::vector<int64_t> indices =
        MakeSharder(100, 4, rank, ShardMode::kExact).Indices(2);
    ASSERT_EQ(indices.size(), 25u);
    for (size_t i = 0; i < indices.size(); ++i) {
      EXPECT_EQ(indices[i], global[rank + 4 * i]);
    }
  }
}

TEST(SharderTest, NewEpochOrSeedChangesTheOrder) {
  const Sharder sharder = MakeSharder(1000, 2, 0, ShardMode::kPad, /*seed=*/11);
  const std::vector<int64_t> epoch0 = sharder.Indices(0);
  const std::vector<int64_t> epoch1 = sharder.Indices(1);
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(epoch0.size(), epoch1.size());

  const Sharder other_seed = MakeSharder(1000, 2, 0, ShardMode::kPad, /*seed=*/12);
  EXPECT_NE(other_seed.Indices(0), epoch0);

  // The permutation really is shuffled: far from the identity order.
  const std::vector<int64_t> global = MakeSharder(1000, 1, 0, ShardMode::kPad).Indices(0);
  int fixed_points = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed_points += global[i] == i;
  EXPECT_LT(fixed_points, 20);
}

TEST(SharderTest, EveryEpochIsAPermutation) {
  const Sharder sharder = MakeSharder(1001, 1, 0, ShardMode::kExact);
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    std::vector<int64_t> indices = sharder.Indices(epoch);
    std::sort(indices.begin(), indices.end());
    for (int64_t i = 0; i < 1001; ++i) ASSERT_EQ(indices[i], i);
  }
}

TEST(SharderTest, NoShuffleIsIdentityStrided) {
  for (ShardMode mode : {ShardMode::kPad, ShardMode::kDropLast, ShardMode::kExact}) {
    const int64_t n = 17;
    const int world = 4;
    for (int rank = 0; rank < world; ++rank) {
      const Sharder sharder =
          MakeSharder(n, world, rank, mode, /*seed=*/3, /*shuffle=*/false);
      const std::vector<int64_t> indices = sharder.Indices(9);
      for (size_t i = 0; i < indices.size(); ++i) {
        EXPECT_EQ(indices[i], (rank + static_cast<int64_t>(i) * world) % n);
      }
      // Independent of epoch and seed.
      EXPECT_EQ(indices, sharder.Indices(0));
      EXPECT_EQ(
          indices,
          MakeSharder(n, world, rank, mode, /*seed=*/4, /*shuffle=*/false).Indices(9));
    }
  }
  // Pad wraps to the start: n = 17, world = 4 pads to 20 with 0, 1, 2.
  EXPECT_EQ(MakeSharder(17, 4, 1, ShardMode::kPad, 0, false).Indices(0),
            (std::vector<int64_t>{1, 5, 9, 13, 0}));
  EXPECT_EQ(MakeSharder(17, 4, 1, ShardMode::kDropLast, 0, false).Indices(0),
            (std::vector<int64_t>{1, 5, 9, 13}));
  EXPECT_EQ(MakeSharder(17, 4, 1, ShardMode::kExact, 0, false).Indices(0),
            (std::vector<int64_t>{1, 5, 9, 13}));
  EXPECT_EQ(MakeSharder(17, 4, 0, ShardMode::kExact, 0, false).Indices(0),
            (std::vector<int64_t>{0, 4, 8, 12, 16}));
}

TEST(SharderTest, InvalidOptions) {
  auto create = [](int64_t n, int world, int rank, ShardMode mode) {
    ShardOptions options;
    options.dataset_size = n;
    options.world_size = world;
    options.rank = rank;
    options.mode = mode;
    return Sharder::Create(options).status().code();
  };
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(create(-1, 1, 0, ShardMode::kPad), kInvalid);
  EXPECT_EQ(create(10, 0, 0, ShardMode::kPad), kInvalid);
  EXPECT_EQ(create(10, -2, 0, ShardMode::kPad), kInvalid);
  EXPECT_EQ(create(10, 2, 2, ShardMode::kPad), kInvalid);
  EXPECT_EQ(create(10, 2, -1, ShardMode::kExact), kInvalid);
  EXPECT_EQ(create(3, 4, 0, ShardMode::kDropLast), kInvalid);
  EXPECT_EQ(create(0, 1, 0, ShardMode::kDropLast), kInvalid);
  EXPECT_EQ(create(4, 4, 3, ShardMode::kDropLast), absl::StatusCode::kOk);
  EXPECT_EQ(create(0, 4, 3, ShardMode::kExact), absl::StatusCode::kOk);
  EXPECT_EQ(create(0, 4, 3, ShardMode::kPad), absl::StatusCode::kOk);
}

// The teaching bugs (ringside train --bug).

// Every rank's indices for `epoch` under the training sharding of `bug_list`.
std::vector<std::vector<int64_t>> TrainRanks(int64_t n, int world, int64_t epoch,
                                             const char* bug_list) {
  std::vector<std::vector<int64_t>> out;
  for (int rank = 0; rank < world; ++rank) {
    absl::StatusOr<Sharder> sharder =
        Sharder::Create(TrainShardOptions(n, world, rank, 7, /*drop_last=*/false, bug_list));
    EXPECT_TRUE(sharder.ok()) << sharder.status();
    out.push_back(sharder->Indices(epoch));
  }
  return out;
}

// Visits per sample over all ranks, as the epoch-end check sums them.
std::vector<float> Visits(int64_t n, const std::vector<std::vector<int64_t>>& ranks) {
  std::vector<float> counts(n);
  for (const auto& indices : ranks) {
    for (int64_t i : indices) counts[i] += 1;
  }
  return counts;
}

TEST(SharderBugsTest, BugListHas) {
  EXPECT_TRUE(BugListHas("no_broadcast,rank_seeds", "rank_seeds"));
  EXPECT_TRUE(BugListHas("no_broadcast,rank_seeds", "no_broadcast"));
  EXPECT_FALSE(BugListHas("no_broadcast,rank_seeds", "rank"));
  EXPECT_FALSE(BugListHas("", "no_set_epoch"));
}

TEST(SharderBugsTest, NoBugsIsTheDistributedSampler) {
  const ShardOptions o = TrainShardOptions(100, 4, 2, 9, false, "");
  EXPECT_EQ(o.mode, ShardMode::kPad);
  EXPECT_TRUE(o.set_epoch);
  EXPECT_FALSE(o.seed_per_rank);
  EXPECT_EQ(TrainShardOptions(100, 4, 2, 9, true, "no_broadcast").mode, ShardMode::kDropLast);
  for (int64_t epoch : {0, 1, 5}) {
    EXPECT_EQ(TrainRanks(100, 4, epoch, ""), AllRanks(100, 4, ShardMode::kPad, epoch));
  }
}

TEST(SharderBugsTest, NoSetEpochRepeatsEpochZerosOrder) {
  const auto epoch0 = TrainRanks(1000, 2, 0, "no_set_epoch");
  EXPECT_EQ(epoch0, TrainRanks(1000, 2, 0, ""));
  EXPECT_EQ(TrainRanks(1000, 2, 1, "no_set_epoch"), epoch0);
  EXPECT_EQ(TrainRanks(1000, 2, 7, "no_set_epoch"), epoch0);
  // With set_epoch each epoch has its own order.
  EXPECT_NE(TrainRanks(1000, 2, 1, ""), epoch0);
}

TEST(SharderBugsTest, RankSeedsOverlapAndMissSamples) {
  const int64_t n = 8000;
  const auto ranks = TrainRanks(n, 4, 0, "rank_seeds");
  for (const auto& indices : ranks) EXPECT_EQ(indices.size(), 2000u);
  // Rank 0's seed is unchanged (seed + 0).
  EXPECT_EQ(ranks[0], TrainRanks(n, 4, 0, "")[0]);
  const VisitSummary s = SummarizeVisits(Visits(n, ranks));
  EXPECT_EQ(s.samples, n);
  EXPECT_EQ(s.visits, n);
  // Four independent quarters of random permutations: about (3/4)^4 = 32% of the
  // samples are never drawn.
  EXPECT_GT(s.never, n / 5);
  EXPECT_GT(s.repeated, n / 10);
  EXPECT_EQ(s.distinct + s.never, n);
}

TEST(SharderBugsTest, WithoutTheBugEverySampleOnce) {
  const int64_t n = 8000;
  for (int64_t epoch : {0, 3}) {
    const VisitSummary s = SummarizeVisits(Visits(n, TrainRanks(n, 4, epoch, "")));
    EXPECT_EQ(s.distinct, n);
    EXPECT_EQ(s.repeated, 0);
    EXPECT_EQ(s.never, 0);
  }
  // 8001 samples: padding repeats 3 of them.
  const VisitSummary padded = SummarizeVisits(Visits(8001, TrainRanks(8001, 4, 0, "")));
  EXPECT_EQ(padded.never, 0);
  EXPECT_EQ(padded.repeated, 3);
  EXPECT_EQ(padded.visits, 8004);
}

TEST(SharderBugsTest, UnevenShardsDoNotPad) {
  // 601 samples on 2 ranks: 301 and 300, every sample once, shuffled.
  const auto ranks = TrainRanks(601, 2, 0, "uneven_shards");
  EXPECT_EQ(ranks[0].size(), 301u);
  EXPECT_EQ(ranks[1].size(), 300u);
  const VisitSummary s = SummarizeVisits(Visits(601, ranks));
  EXPECT_EQ(s.distinct, 601);
  EXPECT_EQ(s.repeated, 0);
  EXPECT_FALSE(std::is_sorted(ranks[0].begin(), ranks[0].end()));
  EXPECT_NE(TrainRanks(601, 2, 1, "uneven_shards"), ranks);
}

TEST(SharderBugsTest, SummarizeVisits) {
  const VisitSummary s = SummarizeVisits({0, 1, 2, 3, 0, 1});
  EXPECT_EQ(s.samples, 6);
  EXPECT_EQ(s.distinct, 4);
  EXPECT_EQ(s.repeated, 2);
  EXPECT_EQ(s.never, 2);
  EXPECT_EQ(s.visits, 7);
  EXPECT_EQ(SummarizeVisits({}).samples, 0);
}

}  // namespace
}  // namespace ringside
