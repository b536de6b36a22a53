// The three placements against hand-worked layouts: which shard holds which tensor, the
// slices of the PS order, the pieces, and gather / scatter as inverse permutations.
#include "common/ps_placement.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// A VGG-like model in miniature: conv weight 30, bias 2, a huge fc weight 600, its bias
// 6, a small fc weight 60, bias 10 (708 floats; the fc weight is 85% of them).
const std::vector<int64_t> kTensors = {30, 2, 600, 6, 60, 10};

std::vector<int64_t> Sizes(const PsPartition& p) {
  std::vector<int64_t> out;
  for (int s = 0; s < p.num_shards(); ++s) out.push_back(p.shard(s).size);
  return out;
}

// The even cut (equal weights; what a balanced job without summers uses): shard s of S
// over P floats is [floor(s P / S), floor((s + 1) P / S)): the S slices tile [0, P) in
// order and differ by at most one float, whatever P and S, up to P x S beyond 32 bits.
PsPartition EvenCut(int64_t num_params, int num_shards) {
  absl::StatusOr<PsPartition> p = PsPartition::Weighted({num_params}, std::vector<int64_t>(num_shards, 1));
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

void ExpectBalancedTiling(int64_t num_params, int num_shards) {
  SCOPED_TRACE(absl::StrCat("P=", num_params, " S=", num_shards));
  const PsPartition p = EvenCut(num_params, num_shards);
  ASSERT_EQ(p.num_shards(), num_shards);
  const int64_t floor_size = num_params / num_shards;
  const int64_t ceil_size = (num_params + num_shards - 1) / num_shards;
  int64_t next = 0;
  for (int s = 0; s < num_shards; ++s) {
    const PsRange slice = p.shard(s);
    EXPECT_EQ(slice.offset, next) << "shard " << s << " is not contiguous with shard " << s - 1;
    EXPECT_GE(slice.size, std::max<int64_t>(1, floor_size)) << "shard " << s;
    EXPECT_LE(slice.size, ceil_size) << "shard " << s;
    next = slice.offset + slice.size;
  }
  EXPECT_EQ(next, num_params);
}

TEST(PsPlacementTest, EvenCutTilesTheParametersContiguouslyAndBalanced) {
  // Tiny, prime, divisible by many shard counts or by none, and P x S past 32 bits.
  for (int64_t p : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{10}, int64_t{16}, int64_t{100},
                    int64_t{1001}, int64_t{(1 << 20) + 3}, int64_t{1} << 40}) {
    for (int s = 1; s <= 17 && s <= p; ++s) ExpectBalancedTiling(p, s);
    if (p <= 1001) ExpectBalancedTiling(p, static_cast<int>(p));
    if (p >= 65535) ExpectBalancedTiling(p, 65535);
  }
  // P = 10, S = 3: [0, 3) [3, 6) [6, 10).
  const PsPartition p = EvenCut(10, 3);
  EXPECT_EQ(Sizes(p), (std::vector<int64_t>{3, 3, 4}));
  EXPECT_EQ(p.shard(2).offset, 6);
}

TEST(PsPlacementTest, NamesParseAndBadOnesAreRefused) {
  EXPECT_EQ(*ParsePsPlacement(""), PsPlacement::kBalanced);
  EXPECT_EQ(*ParsePsPlacement("balanced"), PsPlacement::kBalanced);
  EXPECT_EQ(*ParsePsPlacement("tensor_round_robin"), PsPlacement::kTensorRoundRobin);
  EXPECT_EQ(*ParsePsPlacement("tensor_greedy"), PsPlacement::kTensorGreedy);
  EXPECT_EQ(ParsePsPlacement("round_robin").status().message(),
            "unknown --ps_placement 'round_robin' (expected balanced, tensor_round_robin or tensor_greedy)");
  EXPECT_STREQ(PsPlacementName(PsPlacement::kTensorGreedy), "tensor_greedy");
}

// Balanced: the byte-balanced cut of the model order (EvenCut above), the
// identity order.
TEST(PsPlacementTest, BalancedCutsTheModelOrderEvenly) {
  const PsPartition p = *PsPartition::Create(kTensors, 3, PsPlacement::kBalanced);
  EXPECT_TRUE(p.identity());
  EXPECT_EQ(Sizes(p), (std::vector<int64_t>{236, 236, 236}));
  EXPECT_EQ(p.shard(1).offset, 236);
  ASSERT_EQ(p.pieces().size(), 1u);
  EXPECT_EQ(p.pieces()[0].size, 708);
}

// Round-robin: tensors 0, 2, 4 (30 + 600 + 60) to shard 0, 1, 3, 5 (2 + 6 + 10) to shard
// 1: the fc weight makes shard 0 hold 97% of the bytes, as TensorFlow's placement of
// VGG-16's fc6 does. PS order: 30 | 600 | 60 | 2 | 6 | 10.
TEST(PsPlacementTest, RoundRobinDealsWholeTensorsInModelOrder) {
  const PsPartition p = *PsPartition::Create(kTensors, 2, PsPlacement::kTensorRoundRobin);
  EXPECT_FALSE(p.identity());
  EXPECT_EQ(Sizes(p), (std::vector<int64_t>{690, 18}));
  EXPECT_EQ(p.shard(1).offset, 690);
  // Model offsets 0, 30, 32, 632, 638, 698.
  const std::vector<PsPiece> want = {{0, 0, 30},   {32, 30, 600}, {638, 630, 60},
                                     {30, 690, 2}, {632, 692, 6}, {698, 698, 10}};
  ASSERT_EQ(p.pieces().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p.pieces()[i].model_offset, want[i].model_offset) << i;
    EXPECT_EQ(p.pieces()[i].ps_offset, want[i].ps_offset) << i;
    EXPECT_EQ(p.pieces()[i].size, want[i].size) << i;
  }
  // One shard: every tensor in place, merged into one piece.
  EXPECT_TRUE(PsPartition::Create(kTensors, 1, PsPlacement::kTensorRoundRobin)->identity());
}

// Greedy, largest first onto the least loaded: 600 -> 0, 60 -> 1, 30 -> 2, 10 -> 2 (40),
// 6 -> 2 (46), 2 -> 2 (48)... with 3 shards: loads 600 / 60 / 48.
TEST(PsPlacementTest, GreedyPutsTheLargestFirstOntoTheLeastLoaded) {
  const PsPartition p = *PsPartition::Create(kTensors, 3, PsPlacement::kTensorGreedy);
  EXPECT_EQ(Sizes(p), (std::vector<int64_t>{600, 60, 48}));
  // Shard 2 holds tensors 0, 1, 3, 5 in model order: 30 + 2 adjacent (one piece), 6, 10.
  std::vector<int64_t> shard2_pieces;
  for (const PsPiece& piece : p.pieces()) {
    if (piece.ps_offset >= p.shard(2).offset) shard2_pieces.push_back(piece.size);
  }
  EXPECT_EQ(shard2_pieces, (std::vector<int64_t>{32, 6, 10}));
}

TEST(PsPlacementTest, GatherAndScatterAreInversePermutations) {
  for (PsPlacement placement : {PsPlacement::kBalanced, PsPlacement::kTensorRoundRobin, PsPlacement::kTensorGreedy}) {
    const PsPartition p = *PsPartition::Create(kTensors, 3, placement);
    std::vector<float> model(708), ps(708, -1), back(708, -1);
    std::iota(model.begin(), model.end(), 0.0f);
    p.Gather(model.data(), ps.data());
    p.Scatter(ps.data(), back.data());
    EXPECT_EQ(back, model) << PsPlacementName(placement);
    // Every float of the model lands once in PS order.
    std::vector<float> sorted = ps;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, model);
    // The parts of a model range are where Gather put them.
    p.ForEachPsPart(PsRange{25, 40}, [&](const PsPiece& part) {
      for (int64_t i = 0; i < part.size; ++i) {
        EXPECT_EQ(ps[part.ps_offset + i], model[part.model_offset + i]);
      }
    });
    int64_t covered = 0;
    p.ForEachModelPart(PsRange{0, 708}, [&](const PsPiece& part) { covered += part.size; });
    EXPECT_EQ(covered, 708);
  }
}

// The busiest shard's share for predictions, empty shards allowed: round-robin over 2
// puts 690 of 708 on shard 0; over 8 (more shards than tensors) the 600 alone.
TEST(PsPlacementTest, BusiestShareAllowsIdleShards) {
  const std::vector<double> bytes(kTensors.begin(), kTensors.end());
  EXPECT_NEAR(BusiestShare(bytes, 2, PsPlacement::kTensorRoundRobin), 690.0 / 708, 1e-12);
  EXPECT_NEAR(BusiestShare(bytes, 8, PsPlacement::kTensorRoundRobin), 600.0 / 708, 1e-12);
  EXPECT_NEAR(BusiestShare(bytes, 3, PsPlacement::kTensorGreedy), 600.0 / 708, 1e-12);
  EXPECT_NEAR(BusiestShare(bytes, 4, PsPlacement::kBalanced), 0.25, 1e-12);
  EXPECT_EQ(BusiestShare({}, 4, PsPlacement::kTensorGreedy), 0);
}

// Weighted balanced slices (worker summers, BytePS's optimum at n = 4, k = 2: weights
// 6, 6, 2, 2, 2, 2 of 20): cuts at floor(708 x 6 / 20) = 212, 424, 495, 566, 637.
TEST(PsPlacementTest, WeightedCutsByTheWeights) {
  const PsPartition p = *PsPartition::Weighted(kTensors, {6, 6, 2, 2, 2, 2});
  EXPECT_TRUE(p.identity());
  EXPECT_EQ(Sizes(p), (std::vector<int64_t>{212, 212, 71, 71, 71, 71}));
  EXPECT_EQ(p.shard(3).offset, 495);
  // Equal weights are the balanced cut.
  const PsPartition equal = *PsPartition::Weighted(kTensors, {1, 1, 1});
  const PsPartition balanced = *PsPartition::Create(kTensors, 3, PsPlacement::kBalanced);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(equal.shard(s).offset, balanced.shard(s).offset);
    EXPECT_EQ(equal.shard(s).size, balanced.shard(s).size);
  }
  EXPECT_EQ(PsPartition::Weighted(kTensors, {3, 0}).status().message(), "a shard of weight 0");
  EXPECT_EQ(PsPartition::Weighted({2}, {1, 1, 1}).status().message(),
            "3 shards for 2 parameters: a shard would hold none");
  EXPECT_EQ(PsPartition::Weighted({}, {1}).status().message(), "a PS placement needs the model's tensors");
}

TEST(PsPlacementTest, BadLayoutsAreRefusedInOneLine) {
  EXPECT_EQ(PsPartition::Create({}, 1, PsPlacement::kBalanced).status().message(),
            "a PS placement needs the model's tensors");
  EXPECT_EQ(PsPartition::Create({4, 0}, 1, PsPlacement::kBalanced).status().message(), "a tensor of 0 floats");
  EXPECT_EQ(PsPartition::Create({2, 1}, 4, PsPlacement::kBalanced).status().message(),
            "4 shards for 3 parameters: a shard would hold none");
  EXPECT_EQ(PsPartition::Create(kTensors, 7, PsPlacement::kTensorRoundRobin).status().message(),
            "--ps_placement=tensor_round_robin deals 6 whole tensors: 7 shards would leave one without a tensor");
  EXPECT_FALSE(PsPartition::Create(kTensors, 0, PsPlacement::kTensorGreedy).ok());
}

}  // namespace
}  // namespace ringside
