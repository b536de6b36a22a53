// Tests of the cost model against hand-computed closed forms (docs/cost_model.md), the
// fits against synthetic sweeps, the known asymptotics (master bottleneck, colocated PS =
// ring traffic, BytePS's M/B), crossovers, the JSON and bandwidth parsers, and whether a
// calibration fits a run's model and batch.
#include "experiments/costmodel/calibration_check.h"
#include "experiments/costmodel/calibration_json.h"
#include "experiments/costmodel/cost_model.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "experiments/costmodel/print_capture_test_util.h"
#include "experiments/costmodel/simulate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// compute 10 ms (backward 6 ms), SGD 1 ns/byte, sum 0.5 ns/byte; push-pull alpha 1 ms,
// all-reduce alpha 0.1 ms; both 100 MB/s.
Calibration TestCalibration() {
  Calibration c;
  c.compute_s = 0.010;
  c.backward_s = 0.006;
  c.update_s_per_byte = 1e-9;
  c.reduce_s_per_byte = 0.5e-9;
  c.push_pull = {1e-3, 1e8};
  c.allreduce = {1e-4, 1e8};
  return c;
}

// Pure bandwidth: no latency, no arithmetic.
Calibration WireOnlyCalibration() {
  Calibration c;
  c.compute_s = 0.010;
  c.backward_s = 0.006;
  c.push_pull = {0, 1e8};
  c.allreduce = {0, 1e8};
  return c;
}

Scenario Make(Strategy strategy, int workers, double model_bytes) {
  Scenario s;
  s.strategy = strategy;
  s.workers = workers;
  s.model_bytes = model_bytes;
  return s;
}

// One bucket, launched after backward: the plain formula with nothing hidden.
Scenario NoOverlap(Strategy strategy, int workers, double model_bytes) {
  Scenario s = Make(strategy, workers, model_bytes);
  s.overlap = false;
  s.bucket_bytes = {model_bytes};
  return s;
}

Prediction MustPredict(const Calibration& c, const Scenario& s) {
  absl::StatusOr<Prediction> p = Predict(c, s);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Prediction{};
}

constexpr double kTol = 1e-12;

// ----- closed forms -----

TEST(PredictRing, MatchesClosedForm) {
  // N = 4, M = 100 MB: 2*3*0.1 ms + 2*3/4 * 1 s + 3/4 * 1e8 * 0.5 ns = 0.0006 + 1.5 +
  // 0.0375 = 1.5381 s; update 0.1 s; step = 0.010 + 1.5381 + 0.1.
  const Prediction p = MustPredict(TestCalibration(), NoOverlap(Strategy::kRing, 4, 1e8));
  EXPECT_NEAR(p.comm_s, 1.5381, kTol);
  EXPECT_NEAR(p.comm_total_s, 1.5381, kTol);
  EXPECT_NEAR(p.update_s, 0.1, kTol);
  EXPECT_NEAR(p.compute_s, 0.010, kTol);
  EXPECT_NEAR(p.step_s, 1.6481, kTol);
  EXPECT_NEAR(p.busiest_node_bytes_in, 1.5e8, 1e-3);
  EXPECT_NEAR(p.busiest_node_bytes_out, 1.5e8, 1e-3);
  EXPECT_EQ(p.bottleneck, "worker link");
}

TEST(PredictRing, OneWorkerHasNoCommunication) {
  const Prediction p = MustPredict(TestCalibration(), Make(Strategy::kRing, 1, 1e8));
  EXPECT_EQ(p.comm_s, 0);
  EXPECT_EQ(p.busiest_node_bytes_in, 0);
  EXPECT_NEAR(p.step_s, SingleProcessStepSeconds(TestCalibration(), 1e8), kTol);
  EXPECT_NEAR(Speedup(TestCalibration(), Make(Strategy::kRing, 1, 1e8), p), 1.0, kTol);
}

TEST(PredictHalvingDoubling, MatchesClosedFormAtPowersOfTwo) {
  // N = 4: 2*2*0.1 ms + 1.5 + 0.0375.
  Prediction p = MustPredict(TestCalibration(), NoOverlap(Strategy::kHalvingDoubling, 4, 1e8));
  EXPECT_NEAR(p.comm_s, 1.5379, kTol);
  // N = 8: 2*3*0.1 ms + 2*7/8 + 7/8 * 0.05; the ring pays 2*7*0.1 ms instead.
  p = MustPredict(TestCalibration(), NoOverlap(Strategy::kHalvingDoubling, 8, 1e8));
  EXPECT_NEAR(p.comm_s, 0.0006 + 1.75 + 0.04375, kTol);
  const Prediction ring = MustPredict(TestCalibration(), NoOverlap(Strategy::kRing, 8, 1e8));
  EXPECT_NEAR(ring.comm_s, 0.0014 + 1.75 + 0.04375, kTol);
  EXPECT_NEAR(p.busiest_node_bytes_out, ring.busiest_node_bytes_out, 1e-3);
  // N = 2: the two algorithms are the same exchange.
  EXPECT_NEAR(MustPredict(TestCalibration(), NoOverlap(Strategy::kHalvingDoubling, 2, 1e8)).step_s,
              MustPredict(TestCalibration(), NoOverlap(Strategy::kRing, 2, 1e8)).step_s, kTol);
}

TEST(PredictHalvingDoubling, NonPowerOfTwoFoldsExtraRanks) {
  // N = 6: T_hd(4) + 2 alpha + 2 M/B + M gamma = (0.0004 + 1.5 + 0.0375) + (0.0002 + 2 +
  // 0.05).
  const Prediction p =
      MustPredict(TestCalibration(), NoOverlap(Strategy::kHalvingDoubling, 6, 1e8));
  EXPECT_NEAR(p.comm_s, 3.5881, kTol);
  EXPECT_NEAR(p.busiest_node_bytes_in, 1e8 + 1.5e8, 1e-3);
}

TEST(PredictRecursiveDoubling, MatchesClosedForm) {
  // N = 4: lg N (alpha + M/B + M gamma) = 2 * (0.1 ms + 1 s + 0.05 s); every rank sends
  // and receives lg N x M, a third more than the ring's 2 (N-1)/N x M.
  Prediction p =
      MustPredict(TestCalibration(), NoOverlap(Strategy::kRecursiveDoubling, 4, 1e8));
  EXPECT_NEAR(p.comm_s, 2.1002, kTol);
  EXPECT_NEAR(p.busiest_node_bytes_in, 2e8, 1e-3);
  EXPECT_NEAR(p.busiest_node_bytes_out, 2e8, 1e-3);
  // N = 3: one round on p = 2 plus the fold-in and hand-back of M: 3 alpha + 3 M/B + 2 M
  // gamma; the folding partner moves 2 M each way.
  p = MustPredict(TestCalibration(), NoOverlap(Strategy::kRecursiveDoubling, 3, 1e8));
  EXPECT_NEAR(p.comm_s, 0.0003 + 3 + 0.1, kTol);
  EXPECT_NEAR(p.busiest_node_bytes_out, 2e8, 1e-3);
  // N = 2: the ring's bytes in one exchange, one latency instead of two.
  p = MustPredict(TestCalibration(), NoOverlap(Strategy::kRecursiveDoubling, 2, 1e8));
  EXPECT_NEAR(p.comm_s, 0.0001 + 1 + 0.05, kTol);
  EXPECT_NEAR(p.busiest_node_bytes_out, 1e8, 1e-3);
}

TEST(PredictAuto, EachBucketPaysWhatAutoRunsForIt) {
  // N = 4, a 1 MiB bucket (recursive doubling: 2 x 1 MiB each way) and a 16 MiB bucket
  // (at or above 4 MiB: the ring, 1.5 x 16 MiB).
  const double small = 1 << 20, large = 16 << 20;
  Scenario s = Make(Strategy::kAuto, 4, small + large);
  s.overlap = false;
  s.bucket_bytes = {small, large};
  const Prediction p = MustPredict(WireOnlyCalibration(), s);
  EXPECT_NEAR(p.busiest_node_bytes_out, 2 * small + 1.5 * large, 1e-3);
  EXPECT_NEAR(p.comm_total_s, (2 * small + 1.5 * large) / 1e8, kTol);
  // One 1 MiB bucket is predicted exactly as recursive doubling; one 16 MiB as the ring.
  for (double bytes : {small, large}) {
    const Prediction a = MustPredict(TestCalibration(), NoOverlap(Strategy::kAuto, 4, bytes));
    const Prediction want = MustPredict(
        TestCalibration(),
        NoOverlap(bytes < 4 << 20 ? Strategy::kRecursiveDoubling : Strategy::kRing, 4, bytes));
    EXPECT_NEAR(a.step_s, want.step_s, kTol) << bytes;
    EXPECT_NEAR(a.busiest_node_bytes_in, want.busiest_node_bytes_in, 1e-3) << bytes;
  }
  // At 2 ranks auto runs recursive doubling at every size.
  const Prediction two = MustPredict(TestCalibration(), NoOverlap(Strategy::kAuto, 2, large));
  EXPECT_NEAR(two.step_s,
              MustPredict(TestCalibration(), NoOverlap(Strategy::kRecursiveDoubling, 2, large)).step_s,
              kTol);
  EXPECT_STREQ(StrategyName(Strategy::kAuto), "auto");
  EXPECT_STREQ(StrategyName(Strategy::kRecursiveDoubling), "recursive-doubling");
}

TEST(PredictPs, SingleShardMatchesClosedForm) {
  // N = 4, S = 1: the master moves 4 M each way: max(1 s, 4 s) + 1 ms; the shard sums 4
  // pushes (4 * 1e8 * 0.5 ns = 0.2 s) and steps SGD on M (0.1 s).
  const Prediction p = MustPredict(TestCalibration(), Make(Strategy::kPs, 4, 1e8));
  EXPECT_NEAR(p.comm_s, 4.001, kTol);
  EXPECT_NEAR(p.update_s, 0.3, kTol);
  EXPECT_NEAR(p.step_s, 4.311, kTol);
  EXPECT_NEAR(p.busiest_node_bytes_in, 4e8, 1e-3);
  EXPECT_EQ(p.bottleneck, "master link");
}

// On the TCP data plane the PS moves its bytes on the calibration's TCP path: at 4e8
// B/s the master's 4 M take 1 s instead of 4 s. A calibration without it (older files)
// keeps gRPC's path for either transport.
TEST(PredictPs, TheTcpTransportUsesItsOwnPath) {
  Calibration c = TestCalibration();
  c.push_pull_tcp = {1e-3, 4e8};
  Scenario s = Make(Strategy::kPs, 4, 1e8);
  EXPECT_NEAR(MustPredict(c, s).comm_s, 4.001, kTol);  // gRPC: push_pull.
  s.ps_tcp = true;
  EXPECT_EQ(&PushPullPath(c, s), &c.push_pull_tcp);
  EXPECT_NEAR(MustPredict(c, s).comm_s, 1.001, kTol);
  c.push_pull_tcp = {};
  EXPECT_EQ(&PushPullPath(c, s), &c.push_pull);
  EXPECT_NEAR(MustPredict(c, s).comm_s, 4.001, kTol);
}

// A placement that puts 90% of M on one of 4 shards: its link carries 4 x 0.9 M = 3.6 s
// of the step and it sums and steps 0.9 M, where an even cut gives each 1 s.
TEST(PredictPs, TheBusiestShardOfAPlacementBoundsTheStep) {
  Scenario s = Make(Strategy::kPs, 4, 1e8);
  s.shards = 4;
  EXPECT_NEAR(MustPredict(TestCalibration(), s).comm_s, 1.001, kTol);
  s.busiest_shard_fraction = 0.9;
  const Prediction p = MustPredict(TestCalibration(), s);
  EXPECT_NEAR(p.comm_s, 3.601, kTol);
  // SGD on 0.9 M (0.09 s) and the sum of 4 pushes of it (4 x 9e7 x 0.5 ns = 0.18 s).
  EXPECT_NEAR(p.update_s, 0.27, kTol);
  EXPECT_NEAR(p.busiest_node_bytes_in, 3.6e8, 1e-3);
  EXPECT_EQ(p.bottleneck, "master link");
}

// Summation servers move the optimizer shards' bytes (gradients up, the mean down) and
// sum the same N pushes; the SGD moves to the worker, on all of M: 4 shards of M/4 sum
// 4 x 2.5e7 x 0.5 ns = 0.05 s, the worker steps 1e8 x 1 ns = 0.1 s (against a shard's
// 0.025 s on its slice).
TEST(PredictPs, SummationServersLeaveTheUpdateToTheWorker) {
  Scenario s = Make(Strategy::kPs, 4, 1e8);
  s.shards = 4;
  const Prediction optimizer = MustPredict(TestCalibration(), s);
  s.ps_summation = true;
  const Prediction summation = MustPredict(TestCalibration(), s);
  EXPECT_NEAR(summation.comm_s, optimizer.comm_s, kTol);
  EXPECT_NEAR(optimizer.update_s, 0.075, kTol);
  EXPECT_NEAR(summation.update_s, 0.15, kTol);
  EXPECT_NEAR(summation.busiest_node_bytes_in, optimizer.busiest_node_bytes_in, 1e-3);
}

// --compress on the PS's TCP data plane: the master's 4 M each way move as 2-byte
// values, 2 s instead of 4; the shard still sums and steps float32 (0.3 s); the codec
// adds the worker's M / 4 values and the shard's 4 M / 4, 2 ns each: 0.05 + 0.2 s.
TEST(PredictPs, CompressionHalvesThePushPullsBytesAndPaysTheCodec) {
  Calibration c = TestCalibration();
  Scenario s = Make(Strategy::kPs, 4, 1e8);
  s.wire_format = WireFormat::kFp16;
  Prediction p = MustPredict(c, s);
  EXPECT_NEAR(p.comm_s, 2.001, kTol);
  EXPECT_NEAR(p.update_s, 0.3, kTol);
  EXPECT_NEAR(p.busiest_node_bytes_in, 2e8, 1e-3);
  c.fp16_codec_s_per_value = 2e-9;
  p = MustPredict(c, s);
  EXPECT_NEAR(p.comm_s, 2.001 + 2e-9 * (2.5e7 + 4 * 2.5e7), kTol);
  EXPECT_NEAR(p.update_s, 0.3, kTol);
  // A summer in each worker and no dedicated server (k = 0): each summer holds M / 4
  // (BytePS's optimum at n = 4) and pays the codec on its 4 slices as a server would.
  s.ps_summation = true;
  s.worker_summers = true;
  s.shards = 0;
  Calibration free = c;
  free.fp16_codec_s_per_value = 0;
  EXPECT_NEAR(MustPredict(c, s).comm_s - MustPredict(free, s).comm_s, 2e-9 * (2.5e7 + 4 * 2.5e7 / 4), kTol);
}

// BytePS with a summer in each worker (Jiang et al., OSDI'20): the busiest link moves
// 2n(n-1)M / (n^2 + kn - 2k) each way, the ring's 2(n-1)/n M at k = 0 and toward M as
// k -> n; servers and workers balance exactly at the optimum.
TEST(PredictPs, WorkerSummersFollowBytePsOptimum) {
  for (int n = 2; n <= 16; ++n) {
    for (int k = 0; k < n; ++k) {
      Scenario s = Make(Strategy::kPs, n, 1e8);
      s.ps_summation = true;
      s.worker_summers = true;
      s.shards = k;
      const Prediction p = MustPredict(WireOnlyCalibration(), s);
      const double want = 2.0 * n * (n - 1) * 1e8 / ((n * n + k * n - 2.0 * k) * 1e8);
      EXPECT_NEAR(p.comm_s, want, 1e-9) << "n " << n << " k " << k;
      EXPECT_NEAR(p.busiest_node_bytes_in, want * 1e8, 1e-3) << "n " << n << " k " << k;
    }
  }
  // n = 4, k = 0: the ring's 1.5 M / B; k = 2: 1.2 M / B, servers and workers alike.
  Scenario s = Make(Strategy::kPs, 4, 1e8);
  s.ps_summation = true;
  s.worker_summers = true;
  s.shards = 0;
  EXPECT_NEAR(MustPredict(WireOnlyCalibration(), s).comm_s, 1.5, kTol);
  s.shards = 2;
  EXPECT_NEAR(MustPredict(WireOnlyCalibration(), s).comm_s, 1.2, 1e-12);
  // Refused: k >= n, or without summation.
  s.shards = 4;
  EXPECT_FALSE(Predict(WireOnlyCalibration(), s).ok());
  s.shards = 2;
  s.ps_summation = false;
  EXPECT_FALSE(Predict(WireOnlyCalibration(), s).ok());
}

TEST(PredictPs, ShardsSplitTheServerLoad) {
  Scenario s = Make(Strategy::kPs, 4, 1e8);
  s.shards = 2;
  // 2 M through each shard's link: 2 s; slice M/2: SGD 0.05 s, sum 4 * 5e7 * 0.5 ns = 0.1 s.
  Prediction p = MustPredict(TestCalibration(), s);
  EXPECT_NEAR(p.comm_s, 2.001, kTol);
  EXPECT_NEAR(p.update_s, 0.15, kTol);
  EXPECT_NEAR(p.step_s, 2.161, kTol);
  // S = N: each shard moves M, like each worker.
  s.shards = 4;
  p = MustPredict(TestCalibration(), s);
  EXPECT_NEAR(p.comm_s, 1.001, kTol);
  EXPECT_EQ(p.bottleneck, "worker link");
}

TEST(PredictPs, FasterServerLinkMovesTheBottleneck) {
  Scenario s = Make(Strategy::kPs, 4, 1e8);
  s.link_bytes_per_s = 1e8;
  s.master_link_bytes_per_s = 8e8;  // 4 M at 8e8 = 0.5 s < M / 1e8 = 1 s.
  s.path_limits = false;
  const Prediction p = MustPredict(TestCalibration(), s);
  EXPECT_NEAR(p.comm_s, 1.001, kTol);
  EXPECT_EQ(p.bottleneck, "worker link");
}

TEST(PredictPs, OneWorkerStillPaysThePushPull) {
  // 1 ms + M/B = 1 s; no aggregation with one worker; SGD 0.1 s.
  const Prediction p = MustPredict(TestCalibration(), Make(Strategy::kPs, 1, 1e8));
  EXPECT_NEAR(p.comm_s, 1.001, kTol);
  EXPECT_NEAR(p.update_s, 0.1, kTol);
  EXPECT_NEAR(p.step_s, 1.111, kTol);
}

TEST(PredictPs, ColocatedOneShardPerWorker) {
  // S = N = 4 in the workers: each link carries 3/4 M of its worker's gradients to the
  // other workers' shards and 3 x M/4 of its shard's replies: 1.5 M = 2(N-1)/N M.
  Scenario s = Make(Strategy::kPs, 4, 1e8);
  s.shards = 4;
  s.colocated = true;
  const Prediction p = MustPredict(TestCalibration(), s);
  EXPECT_NEAR(p.busiest_node_bytes_out, 1.5e8, 1e-3);
  EXPECT_NEAR(p.comm_s, 1.501, kTol);
  // Slice M/4: SGD 0.025 s, sum 4 * 2.5e7 * 0.5 ns = 0.05 s.
  EXPECT_NEAR(p.update_s, 0.075, kTol);
  EXPECT_NEAR(p.step_s, 1.586, kTol);
  EXPECT_EQ(p.bottleneck, "worker link");
}

TEST(PredictPs, ColocatedInWorkerZero) {
  // ringside's --ps_colocated: every shard in worker 0, whose link serves the other 3
  // workers' full models (3 M each way); its own push-pull stays in the process.
  Scenario s = Make(Strategy::kPs, 4, 1e8);
  s.shards = 2;
  s.colocated = true;
  s.colocated_hosts = 1;
  const Prediction p = MustPredict(TestCalibration(), s);
  EXPECT_NEAR(p.busiest_node_bytes_in, 3e8, 1e-3);
  EXPECT_NEAR(p.comm_s, 3.001, kTol);
  EXPECT_NEAR(p.update_s, 0.1 + 0.2, kTol);
  EXPECT_EQ(p.bottleneck, "master link");
  // One worker hosting its own shard: only the call's latency.
  s.workers = 1;
  const Prediction one = MustPredict(TestCalibration(), s);
  EXPECT_NEAR(one.comm_s, 1e-3, kTol);
  EXPECT_EQ(one.busiest_node_bytes_in, 0);
}

TEST(PredictPs, UnevenColocatedHostsUseTheBusiestHost) {
  // S = 3 on H = 2 hosts: the busiest holds 2 of 3 shards, f = 2/3:
  // (1 - 2/3) M + (N - 1) 2/3 M = M/3 + 2 M = 7/3 M with N = 4.
  Scenario s = Make(Strategy::kPs, 4, 3e8);
  s.shards = 3;
  s.colocated = true;
  s.colocated_hosts = 2;
  const Prediction p = MustPredict(WireOnlyCalibration(), s);
  EXPECT_NEAR(p.busiest_node_bytes_in, 7e8, 1e-3);
  EXPECT_NEAR(p.comm_s, 7.0, kTol);
}

TEST(PredictPs, PerCallOverheadCountsTheBusiestNodesCalls) {
  Calibration c = WireOnlyCalibration();
  c.push_pull.alpha_s = 1e-3;
  c.push_pull_per_call_s = 1e-4;
  // Standalone, N = 4, S = 2: a shard serves 4 calls, a worker issues 2: 3 beyond the
  // first. 2 M through each shard: 2 s.
  Scenario s = Make(Strategy::kPs, 4, 1e8);
  s.shards = 2;
  EXPECT_NEAR(MustPredict(c, s).comm_s, 1e-3 + 3e-4 + 2.0, kTol);
  // Colocated S = N = 4: a host issues 4 calls and serves 4: 7 beyond the first.
  s.shards = 4;
  s.colocated = true;
  EXPECT_NEAR(MustPredict(c, s).comm_s, 1e-3 + 7e-4 + 1.5, kTol);
  // One worker, one standalone shard: what push_pull.alpha_s was calibrated on.
  EXPECT_NEAR(MustPredict(c, Make(Strategy::kPs, 1, 1e8)).comm_s, 1e-3 + 1.0, kTol);
}

// ----- DDP bucket overlap -----

TEST(PredictDdp, BucketsOverlapWithBackward) {
  // Two 5 MB buckets, N = 2, 1 GB/s, no latency: 5 ms per bucket. Backward 6 ms:
  // bucket 0 is ready at 3 ms and done at 8 ms; bucket 1 ready at 6 ms, starts at 8,
  // done at 13 ms. SGD 0.5 ms per bucket after each is done: 8.5, then 13.5 ms.
  Calibration c;
  c.compute_s = 0.010;
  c.backward_s = 0.006;
  c.update_s_per_byte = 1e-10;
  c.allreduce = {0, 1e9};
  Scenario s = Make(Strategy::kRing, 2, 1e7);
  s.bucket_bytes = {5e6, 5e6};
  Prediction p = MustPredict(c, s);
  EXPECT_NEAR(p.step_s, 0.004 + 0.0135, kTol);
  EXPECT_NEAR(p.update_s, 0.001, kTol);
  EXPECT_NEAR(p.comm_s, 0.0065, kTol);
  EXPECT_NEAR(p.comm_total_s, 0.010, kTol);
  // Without overlap both buckets start after backward: done at 11 and 16 ms; bucket 0's
  // SGD (11 - 11.5 ms) hides under bucket 1's all-reduce, bucket 1's comes after.
  s.overlap = false;
  p = MustPredict(c, s);
  EXPECT_NEAR(p.step_s, 0.004 + 0.0165, kTol);
  EXPECT_NEAR(p.comm_s, 0.0095, kTol);
  EXPECT_NEAR(p.comm_total_s, 0.010, kTol);
}

TEST(PredictDdp, DefaultBucketsAreOneMibThenTwentyFiveMib) {
  // 30 MiB -> 1 + 25 + 4 MiB: three all-reduces, each paying 2 (N-1) alpha.
  Calibration c = WireOnlyCalibration();
  c.allreduce = {1e-3, 1e12};
  Scenario s = Make(Strategy::kRing, 2, 30.0 * (1 << 20));
  s.overlap = false;
  const Prediction p = MustPredict(c, s);
  EXPECT_NEAR(p.comm_total_s, 3 * 2e-3 + 30.0 * (1 << 20) / 1e12, 1e-12);
}

TEST(PredictDdp, ComputeBoundWhenCommunicationHides) {
  Calibration c = WireOnlyCalibration();
  c.allreduce = {0, 1e12};
  const Prediction p = MustPredict(c, Make(Strategy::kRing, 8, 1e6));
  EXPECT_EQ(p.bottleneck, "compute");
  EXPECT_LT(p.comm_s, 1e-5);
}

// --compress: the compressed ring moves half the bytes, so on the wire alone (no
// latency, no path limits) its communication is half the float32 ring's, whatever
// --allreduce asked for.
TEST(PredictDdp, CompressionHalvesTheRingsBytes) {
  Calibration c = WireOnlyCalibration();
  Scenario s = Make(Strategy::kRing, 4, 8e7);
  s.link_bytes_per_s = 1e8;
  s.link_latency_s = 0;
  s.path_limits = false;
  s.overlap = false;
  const Prediction fp32 = MustPredict(c, s);
  s.wire_format = WireFormat::kFp16;
  const Prediction fp16 = MustPredict(c, s);
  EXPECT_NEAR(fp16.busiest_node_bytes_out, 0.5 * fp32.busiest_node_bytes_out, 1e-3);
  EXPECT_NEAR(fp16.busiest_node_bytes_out, 2.0 * 3 / 4 * 8e7 / 2, 1e-3);  // 2 (N-1)/N x M / 2.
  EXPECT_GT(fp32.comm_total_s, 0);
  EXPECT_NEAR(fp16.comm_total_s, 0.5 * fp32.comm_total_s, 1e-9);  // No reduction cost in this calibration.
  s.strategy = Strategy::kRecursiveDoubling;  // Compressed: the ring regardless.
  EXPECT_NEAR(MustPredict(c, s).busiest_node_bytes_out, fp16.busiest_node_bytes_out, 1e-3);
}

// The format's calibrated encode-and-decode CPU: each rank encodes and decodes every
// value of each bucket once, serial with the ring's steps: M / 4 values x the codec's
// seconds more per step, in the reduction term; float32 pays none; each format its own.
TEST(PredictDdp, CompressionPaysItsCodecPerValue) {
  Calibration c = WireOnlyCalibration();
  c.fp16_codec_s_per_value = 2e-9;
  c.bf16_codec_s_per_value = 1e-9;
  Scenario s = Make(Strategy::kRing, 4, 8e7);  // 2e7 values.
  s.link_bytes_per_s = 1e8;
  s.link_latency_s = 0;
  s.path_limits = false;
  s.overlap = false;
  Calibration free = c;
  free.fp16_codec_s_per_value = free.bf16_codec_s_per_value = 0;
  const Prediction fp32 = MustPredict(c, s);
  EXPECT_NEAR(fp32.step_s, MustPredict(free, s).step_s, 1e-12);
  s.wire_format = WireFormat::kFp16;
  const Prediction fp16_free = MustPredict(free, s);
  EXPECT_NEAR(MustPredict(c, s).step_s - fp16_free.step_s, 2e7 * 2e-9, 1e-9);  // 40 ms.
  EXPECT_NEAR(MustPredict(c, s).comm_total_s - fp16_free.comm_total_s, 2e7 * 2e-9, 1e-9);
  s.wire_format = WireFormat::kBf16;
  EXPECT_NEAR(MustPredict(c, s).step_s - fp16_free.step_s, 2e7 * 1e-9, 1e-9);   // 20 ms.
  EXPECT_DOUBLE_EQ(CodecSecondsPerValue(c, WireFormat::kFp32), 0);
}

// ----- emulated nodes -----

// A node of 0.25 CPU runs the calibration's single-thread costs 4x slower; two ranks on
// a node of 0.5 CPU split it the same way; a node's share of 2 CPUs gives a one-thread
// process nothing more.
TEST(EmulatedNodes, CpuShareScalesTheCpuBoundCosts) {
  Calibration c = TestCalibration();
  c.threads = 1;
  Scenario s = NoOverlap(Strategy::kRing, 4, 1e6);
  const Prediction full = MustPredict(c, s);
  s.node_cpus = 0.25;
  const Prediction quarter = MustPredict(c, s);
  EXPECT_NEAR(quarter.compute_s, 4 * full.compute_s, kTol);
  EXPECT_NEAR(quarter.update_s, 4 * full.update_s, kTol);
  // Wire time is the link's: the extra communication is the 4x slower reduction only.
  const double reduce = 0.75 * 1e6 * 0.5e-9;  // (N - 1) / N of M, summed.
  EXPECT_NEAR(quarter.comm_s - full.comm_s, 3 * reduce, 1e-9);
  s.node_cpus = 0.5;
  s.ranks_per_node = 2;
  EXPECT_NEAR(MustPredict(c, s).compute_s, quarter.compute_s, kTol);
  s.node_cpus = 2;
  s.ranks_per_node = 1;
  EXPECT_NEAR(MustPredict(c, s).compute_s, full.compute_s, kTol);
  // The speedup's baseline runs on a node of the same share: compute-bound weak scaling
  // stays near N whatever the share.
  c.allreduce = {0, 1e15};
  c.reduce_s_per_byte = 0;
  c.update_s_per_byte = 0;
  s = Make(Strategy::kRing, 4, 1e6);
  s.node_cpus = 0.25;
  EXPECT_NEAR(Speedup(c, s, MustPredict(c, s)), 4, 1e-6);
}

// On a share the compute fills, a transfer overlapping backward takes its CPU (at wall
// time cpu / share) from it. Two 5 MB buckets, N = 2 (each rank sends M per bucket),
// 1 GB/s, backward 6 ms, 0.1 ns of CPU per byte sent, nodes of 0.5 CPU: bucket 0's
// transfer costs 5e6 x 1e-10 / 0.5 = 1 ms of the node's wall time, spread over 3-8 ms,
// 3 of its 5 ms inside backward: 0.6 ms taken. Bucket 1 starts after backward: none.
// Re-scheduled against backward 6.6 ms: bucket 0 done at 8.3, bucket 1 at 13.3 ms.
TEST(EmulatedNodes, RingTransfersTakeTheirCpuFromBackward) {
  Calibration c;
  c.compute_s = 0.010;
  c.backward_s = 0.006;
  c.allreduce = {0, 1e9};
  c.allreduce_cpu_s_per_byte = 1e-10;
  c.threads = 1;
  c.node_cpus = 0.5;
  Scenario s = Make(Strategy::kRing, 2, 1e7);
  s.bucket_bytes = {5e6, 5e6};
  s.node_cpus = 0.5;
  Prediction p = MustPredict(c, s);
  EXPECT_NEAR(p.comm_cpu_s, 0.0006, kTol);
  EXPECT_NEAR(p.compute_s, 0.0106, kTol);
  EXPECT_NEAR(p.step_s, 0.004 + 0.0133, kTol);
  // Not taken: without a share (other cores run the transfers), on a share larger than
  // the compute's one thread, or when the buckets wait for backward's end.
  s.node_cpus = 0;
  EXPECT_EQ(MustPredict(c, s).comm_cpu_s, 0);
  s.node_cpus = 2;
  EXPECT_EQ(MustPredict(c, s).comm_cpu_s, 0);
  s.node_cpus = 0.5;
  s.overlap = false;
  EXPECT_EQ(MustPredict(c, s).comm_cpu_s, 0);
}

// The PS's ends on an emulated node take their CPU from it (push_pull_cpu_s_per_byte,
// per byte an end sends or receives; wall time cpu / share). N = 2, M = 10 MB, 1 GB/s,
// compute 10 ms, 0.1 ns per byte, nodes of 0.5 CPU, no overlap, perfect pipelining.
// One master: a worker's end moves 2 M (4 ms of its node's wall time: compute 14 ms);
// the master's end 2 N M = 40 MB, 8 ms, under its link's N M / B = 20 ms: step 34 ms.
// At 1 ns per byte the master's CPU, 80 ms, bounds its serving: 10 + 40 + 80 ms.
TEST(EmulatedNodes, PsEndsTakeTheirCpuFromTheirNode) {
  Calibration c;
  c.compute_s = 0.010;
  c.backward_s = 0.006;
  c.push_pull = {0, 1e9};
  c.allreduce = {0, 1e9};
  c.push_pull_cpu_s_per_byte = 1e-10;
  c.threads = 1;
  c.node_cpus = 0.5;
  Scenario s = Make(Strategy::kPs, 2, 1e7);
  s.node_cpus = 0.5;
  Prediction p = MustPredict(c, s);
  EXPECT_NEAR(p.comm_cpu_s, 0.004, kTol);
  EXPECT_NEAR(p.compute_s, 0.014, kTol);
  EXPECT_NEAR(p.step_s, 0.034, kTol);
  c.push_pull_cpu_s_per_byte = 1e-9;
  p = MustPredict(c, s);
  EXPECT_NEAR(p.comm_cpu_s, 0.040, kTol);
  EXPECT_NEAR(p.step_s, 0.010 + 0.040 + 0.080, kTol);

  // A shard per worker, each beside its worker: a node's worker end moves 2 M, its
  // shard's end takes M / 2 from each of 2 workers and sends it back, 2 M: 4 M, 8 ms at
  // 0.1 ns per byte. Its link carries M each way (its worker's push to the other shard,
  // its shard's reply to the other worker): 10 ms.
  c.push_pull_cpu_s_per_byte = 1e-10;
  s.shards = 2;
  s.colocated = true;
  p = MustPredict(c, s);
  EXPECT_NEAR(p.comm_cpu_s, 0.008, kTol);
  EXPECT_NEAR(p.step_s, 0.018 + 0.010, kTol);
  // Over the TCP data plane its own constant where measured, else gRPC's.
  s.ps_tcp = true;
  EXPECT_NEAR(MustPredict(c, s).comm_cpu_s, 0.008, kTol);
  c.push_pull_tcp_cpu_s_per_byte = 0.5e-10;
  EXPECT_NEAR(MustPredict(c, s).comm_cpu_s, 0.004, kTol);

  // Not taken: without a share, or on a share larger than the compute's one thread.
  s.node_cpus = 0;
  EXPECT_EQ(MustPredict(c, s).comm_cpu_s, 0);
  s.node_cpus = 2;
  EXPECT_EQ(MustPredict(c, s).comm_cpu_s, 0);
}

// Under BSP and DDP every step waits for the slow node's compute: F = 0.5 doubles it.
TEST(EmulatedNodes, SlowNodeBoundsTheStep) {
  const Calibration c = WireOnlyCalibration();
  Scenario s = NoOverlap(Strategy::kRing, 4, 1e6);
  const Prediction even = MustPredict(c, s);
  s.slow_node_fraction = 0.5;
  const Prediction slow = MustPredict(c, s);
  EXPECT_NEAR(slow.compute_s, 2 * even.compute_s, kTol);
  EXPECT_NEAR(slow.step_s - even.step_s, even.compute_s, kTol);
  s.slow_node_fraction = 0;
  EXPECT_EQ(Predict(c, s).status().code(), absl::StatusCode::kInvalidArgument);
}

// PS workers packed two to a node push and pull two models through its link.
TEST(EmulatedNodes, PackedPsWorkersShareTheirLink) {
  const Calibration c = WireOnlyCalibration();
  Scenario s = Make(Strategy::kPs, 4, 1e6);
  s.shards = 4;  // Server side: N M / S = M, as one worker's.
  const Prediction one = MustPredict(c, s);
  s.ranks_per_node = 2;
  const Prediction two = MustPredict(c, s);
  EXPECT_NEAR(two.busiest_node_bytes_in, 2 * one.busiest_node_bytes_in, 1e-6);
  // 1 MB at 100 MB/s is the 10 ms compute; 2 MB make the workers' link the bottleneck.
  EXPECT_EQ(one.bottleneck, "compute");
  EXPECT_EQ(two.bottleneck, "worker link");
}

// Pushing during backward hides the transfer up to backward's length; the last chunk's
// reply still waits for every worker's push.
TEST(EmulatedNodes, PsPushDuringBackwardHidesUpToBackward) {
  const Calibration c = WireOnlyCalibration();  // backward 6 ms, 100 MB/s.
  Scenario s = Make(Strategy::kPs, 2, 1e6);     // Server side: 2 MB, T = 20 ms.
  s.chunk_bytes = 2.5e5;                        // A quarter of the slice: unpipelined 1/4.
  const Prediction serial = MustPredict(c, s);
  EXPECT_NEAR(serial.comm_s, 0.020 * 1.25, kTol);
  s.ps_overlap = true;
  EXPECT_NEAR(MustPredict(c, s).comm_s, (0.020 - 0.006) + 0.020 * 0.25, kTol);
  s.model_bytes = 2e5;  // T = 4 ms < backward: only the last chunk's reply is left.
  s.chunk_bytes = 1e5;  // Half the slice.
  EXPECT_NEAR(MustPredict(c, s).comm_s, 0.004 * 0.5, kTol);
}

// DDP under top-k: the bucket's 2k floats all-gathered move what the ring all-reduce
// of N k floats moves, 2(N-1)/N x N k x 4 = (N - 1) x 8k bytes a rank; plus its encode
// and decode over its n values. PowerSGD: its two all-reduces on the ring and its
// GEMMs. No overlap: communication is everything after backward.
TEST(LossyCompression, BucketsMoveTheirPayloadAndPayTheirEncoding) {
  Calibration c = WireOnlyCalibration();  // 100 MB/s, no latency, no reduction cost.
  c.topk_codec_s_per_value = 1e-9;
  c.powersgd_codec_s_per_flop = 1e-11;
  Scenario s = Make(Strategy::kRing, 4, 1e6);
  s.overlap = false;
  s.bucket_bytes = {1e6};
  LossyPayload topk;
  topk.gather_floats = 2 * 2500;
  topk.select_values = 250000;
  s.lossy_buckets = {topk};
  Prediction p = MustPredict(c, s);
  EXPECT_NEAR(p.busiest_node_bytes_out, 3 * 2 * 2500 * 4, 1e-6);
  EXPECT_NEAR(p.comm_total_s, 3.0 * 20000 / 1e8 + 250000 * 1e-9, 1e-12);
  LossyPayload powersgd;
  powersgd.reduce_floats[0] = 3000;
  powersgd.reduce_floats[1] = 5000;
  powersgd.gemm_flops = 6e6;
  s.lossy_buckets = {powersgd};
  p = MustPredict(c, s);
  EXPECT_NEAR(p.busiest_node_bytes_out, 1.5 * (3000 + 5000) * 4, 1e-6);
  EXPECT_NEAR(p.comm_total_s, 1.5 * 32000 / 1e8 + 6e6 * 1e-11, 1e-12);
  s.lossy_buckets = {powersgd, powersgd};  // One payload per bucket, or refused.
  EXPECT_EQ(Predict(c, s).status().code(), absl::StatusCode::kInvalidArgument);
}

// Measured on 0.25 CPU, run on 0.5: the codecs and lossy compressors run twice as fast,
// as the compute and gamma do.
TEST(LossyCompression, CodecsScaleWithTheNodeShare) {
  Calibration c = WireOnlyCalibration();
  c.threads = 1;
  c.node_cpus = 0.25;
  c.reduce_s_per_byte = 2e-10;
  c.fp16_codec_s_per_value = 2e-9;
  c.topk_codec_s_per_value = 1.4e-8;
  c.powersgd_codec_s_per_flop = 4e-10;
  Scenario s = Make(Strategy::kRing, 4, 1e6);
  s.node_cpus = 0.5;
  const Calibration on = CalibrationOnNode(c, s);
  EXPECT_DOUBLE_EQ(on.reduce_s_per_byte, 1e-10);
  EXPECT_DOUBLE_EQ(on.fp16_codec_s_per_value, 1e-9);
  EXPECT_DOUBLE_EQ(on.topk_codec_s_per_value, 0.7e-8);
  EXPECT_DOUBLE_EQ(on.powersgd_codec_s_per_flop, 2e-10);
}

// e_N, the expected largest of N standard normals: 0 for one; 1 / sqrt(pi) for two;
// 3 / (2 sqrt(pi)) for three (closed forms); and 4, 10 and 1024 from a finer quadrature (200000 intervals over [-12, 12]).
TEST(BspJoin, ExpectedMaxOfNormals) {
  EXPECT_EQ(ExpectedMaxOfNormals(1), 0);
  EXPECT_NEAR(ExpectedMaxOfNormals(2), 1 / std::sqrt(M_PI), 1e-9);
  EXPECT_NEAR(ExpectedMaxOfNormals(3), 1.5 / std::sqrt(M_PI), 1e-9);
  EXPECT_NEAR(ExpectedMaxOfNormals(4), 1.029375, 1e-6);
  EXPECT_NEAR(ExpectedMaxOfNormals(10), 1.538753, 1e-6);
  EXPECT_NEAR(ExpectedMaxOfNormals(1024), 3.248240, 1e-6);
}

// PredictPs adds the join on emulated nodes only: sigma x e_N x a worker's stream (its
// link: 1 MB at 100 MB/s = 10 ms, not the servers' 4 x 0.5 MB = 20 ms); nothing with one
// worker or without sigma.
TEST(BspJoin, PredictPsWaitsForTheSlowestStreamOnNodesOnly) {
  Calibration c = WireOnlyCalibration();
  c.ps_join_sigma = 0.15;
  Scenario s = Make(Strategy::kPs, 4, 1e6);
  s.shards = 2;
  const Prediction off_node = MustPredict(c, s);
  EXPECT_EQ(off_node.join_s, 0);
  s.node_cpus = 8;  // More than the compute's threads: nothing stolen, only the join.
  const Prediction on_node = MustPredict(c, s);
  const double join = 0.15 * 1.029375 * 0.010;
  EXPECT_NEAR(on_node.join_s, join, 1e-8);
  EXPECT_NEAR(on_node.comm_s, off_node.comm_s + on_node.join_s, 1e-12);
  EXPECT_NEAR(on_node.step_s, off_node.step_s + on_node.join_s, 1e-12);
  // Pushed during backward (6 ms): only the 4 ms of the stream after it wait.
  s.ps_overlap = true;
  EXPECT_NEAR(MustPredict(c, s).join_s, 0.15 * 1.029375 * 0.004, 1e-8);
  s.model_bytes = 5e5;  // A 5 ms stream, hidden by backward: nothing waits.
  EXPECT_EQ(MustPredict(c, s).join_s, 0);
  s.model_bytes = 1e6;
  s.ps_overlap = false;
  c.ps_join_sigma = 0;  // Not measured: no term.
  EXPECT_EQ(MustPredict(c, s).join_s, 0);
  c.ps_join_sigma = 0.15;
  s.workers = 1;  // Nobody to wait for.
  EXPECT_EQ(MustPredict(c, s).join_s, 0);
}

// A sweep on emulated nodes (`ringside simulate --node_cpus`): compute-bound weak
// scaling stays linear whatever the share, since the baseline runs on a node of it too,
// while each step takes 1 / share as long.
TEST(EmulatedNodes, SweepsCarryTheNodeShare) {
  Calibration c = WireOnlyCalibration();
  c.threads = 1;
  c.allreduce = {0, 1e15};
  SweepOptions o;
  o.model_bytes = 1e6;
  o.workers = {1, 4};
  o.shards = {};
  o.colocated = false;
  o.node_cpus = 0.5;
  absl::StatusOr<std::vector<Curve>> curves = PredictCurves(c, o);
  ASSERT_TRUE(curves.ok()) << curves.status();
  const Curve& ring = curves->at(0);
  ASSERT_EQ(ring.label, "ring");
  EXPECT_NEAR(ring.predictions[1].compute_s, 2 * c.compute_s, kTol);
  EXPECT_NEAR(ring.speedups[1], 4, 1e-6);
  o.slow_node_fraction = 0.5;  // Every step waits for the slow node: speedup 4 / 2.
  curves = PredictCurves(c, o);
  ASSERT_TRUE(curves.ok()) << curves.status();
  EXPECT_NEAR(curves->at(0).speedups[1], 2, 1e-6);
}

// A placement in a sweep: tensors of 90 / 5 / 5 dealt round-robin over 2 shards put 95%
// of M on shard 0; its server link carries N x 0.95 M each way where an even cut's
// carries N x 0.5 M, so the PS curve's busiest node moves 0.95 / 0.5 times the bytes.
TEST(PredictCurvesTest, APlacementsBusiestShardBoundsThePsCurve) {
  SweepOptions o;
  o.model_bytes = 1e8;
  o.workers = {4};
  o.shards = {2};
  o.colocated = false;
  o.tensor_bytes = {9e7, 5e6, 5e6};
  absl::StatusOr<std::vector<Curve>> even = PredictCurves(TestCalibration(), o);
  o.ps_placement = PsPlacement::kTensorRoundRobin;
  absl::StatusOr<std::vector<Curve>> placed = PredictCurves(TestCalibration(), o);
  ASSERT_TRUE(even.ok() && placed.ok());
  ASSERT_EQ(placed->at(0).label, "PS S=2");
  EXPECT_NEAR(even->at(0).predictions[0].busiest_node_bytes_in, 4 * 0.5e8, 1e-3);
  EXPECT_NEAR(placed->at(0).predictions[0].busiest_node_bytes_in, 4 * 0.95e8, 1e-3);
  EXPECT_GT(placed->at(0).predictions[0].step_s, 1.5 * even->at(0).predictions[0].step_s);
}

// --compress in a sweep: the ring's rows move half the bytes, halving-doubling (which
// has no compressed twin) is left out, and the PS rows are float32 as before.
TEST(PredictCurvesTest, CompressionHalvesTheRingRowsOnly) {
  SweepOptions o;
  o.model_bytes = 1e8;
  o.link_bytes_per_s = 1e8;
  o.workers = {4};
  o.shards = {1};
  o.colocated = false;
  absl::StatusOr<std::vector<Curve>> fp32 = PredictCurves(TestCalibration(), o);
  o.wire_format = WireFormat::kBf16;
  absl::StatusOr<std::vector<Curve>> fp16 = PredictCurves(TestCalibration(), o);
  ASSERT_TRUE(fp32.ok() && fp16.ok());
  ASSERT_EQ(fp32->size(), 3u);  // PS S=1, ring, halving-doubling.
  ASSERT_EQ(fp16->size(), 2u);
  EXPECT_EQ(fp16->at(1).label, "ring");
  EXPECT_NEAR(fp16->at(1).predictions[0].busiest_node_bytes_out, 0.5 * fp32->at(1).predictions[0].busiest_node_bytes_out,
              1e-3);
  EXPECT_EQ(fp16->at(0).predictions[0].busiest_node_bytes_out, fp32->at(0).predictions[0].busiest_node_bytes_out);
}

// ----- asymptotics -----

TEST(Asymptotics, SingleMasterGrowsLinearlyRingStaysFlat) {
  Calibration c = TestCalibration();
  c.allreduce.alpha_s = 1e-6;  // Large M: the bandwidth terms dominate.
  const double m = 1e8;
  double prev_ps = 0;
  for (int n : {8, 16, 32, 64, 128, 256, 512, 1024}) {
    const double ps = MustPredict(c, Make(Strategy::kPs, n, m)).step_s;
    if (prev_ps > 0) {
      EXPECT_NEAR(ps / prev_ps, 2.0, 0.1) << "N=" << n;
    }
    prev_ps = ps;
  }
  const double ring2 = MustPredict(c, Make(Strategy::kRing, 2, m)).step_s;
  const double ring1024 = MustPredict(c, Make(Strategy::kRing, 1024, m)).step_s;
  EXPECT_LT(ring1024 / ring2, 2.2);  // 2(N-1)/N goes from 1 to ~2, then stops.
  const double ring512 = MustPredict(c, Make(Strategy::kRing, 512, m)).step_s;
  EXPECT_NEAR(ring1024 / ring512, 1.0, 0.01);
}

TEST(Asymptotics, SingleMasterIsAboutHalfNTimesTheRing) {
  // PS S = 1: N M / B; ring: 2 (N-1)/N M / B; ratio N^2 / (2 (N-1)) -> N/2.
  const Calibration c = WireOnlyCalibration();
  for (int n : {256, 1024}) {
    const double ps = MustPredict(c, Make(Strategy::kPs, n, 1e8)).comm_s;
    const double ring = MustPredict(c, NoOverlap(Strategy::kRing, n, 1e8)).comm_s;
    EXPECT_NEAR(ps / ring / (n / 2.0), 1.0, 0.01) << "N=" << n;
    EXPECT_NEAR(ps / ring, double(n) * n / (2.0 * (n - 1)), 1e-9);
  }
}

TEST(Asymptotics, ColocatedPsMovesWhatTheRingMoves) {
  const Calibration c = WireOnlyCalibration();
  for (int n : {2, 4, 16, 128, 1024}) {
    Scenario ps = Make(Strategy::kPs, n, 1e8);
    ps.shards = n;
    ps.colocated = true;
    const Prediction p = MustPredict(c, ps);
    const Prediction r = MustPredict(c, NoOverlap(Strategy::kRing, n, 1e8));
    EXPECT_NEAR(p.busiest_node_bytes_out, r.busiest_node_bytes_out, 1e-3) << n;
    EXPECT_NEAR(p.comm_s, r.comm_s, 1e-9) << n;
  }
}

TEST(Asymptotics, StandaloneShardsPerWorkerGiveBytePsOptimum) {
  // BytePS (OSDI'20): k extra servers, t_opt = 2n(n-1)M / ((n^2 + kn - 2k) B); with
  // summation on the servers only and k = n this is M / B, half the ring's time.
  const Calibration c = WireOnlyCalibration();
  const double m = 1e8, b = 1e8;
  for (int n : {2, 8, 64}) {
    Scenario s = Make(Strategy::kPs, n, m);
    s.shards = n;
    const double k = n;
    const double byteps = 2.0 * n * (n - 1) * m / ((double(n) * n + k * n - 2 * k) * b);
    EXPECT_NEAR(MustPredict(c, s).comm_s, byteps, 1e-9) << n;
  }
}

TEST(Asymptotics, SpeedupIsWeakScaling) {
  const Calibration c = TestCalibration();
  const Scenario s = Make(Strategy::kRing, 4, 1e8);
  const Prediction p = MustPredict(c, s);
  EXPECT_NEAR(Speedup(c, s, p), 4 * 0.11 / p.step_s, 1e-12);
  // Free communication: speedup N.
  Calibration fast = c;
  fast.allreduce = {0, 1e30};
  fast.reduce_s_per_byte = 0;
  const Prediction q = MustPredict(fast, s);
  EXPECT_NEAR(Speedup(fast, s, q), 4.0, 1e-9);
}

// ----- links -----

TEST(Links, PathLimitsCapTheWireAndAddLatency) {
  const Calibration c = TestCalibration();  // push-pull 1e8 B/s, alpha 1 ms.
  Scenario s = Make(Strategy::kPs, 1, 1e8);
  s.link_bytes_per_s = 1e9;
  s.link_latency_s = 2e-3;
  // min(1e9, 1e8); 1 ms + a round trip of the wire (2 x 2 ms).
  EXPECT_NEAR(MustPredict(c, s).comm_s, 5e-3 + 1.0, kTol);
  s.path_limits = false;
  EXPECT_NEAR(MustPredict(c, s).comm_s, 4e-3 + 0.1, kTol);  // the wire alone.
  // An all-reduce step waits for the wire once: N = 2 ring, 2 steps x (0.1 + 2 ms).
  Scenario r = NoOverlap(Strategy::kRing, 2, 1e8);
  r.link_bytes_per_s = 1e8;
  r.link_latency_s = 2e-3;
  EXPECT_NEAR(MustPredict(c, r).comm_s, 2 * 2.1e-3 + 1.0 + 0.5 * 1e8 * 0.5e-9, kTol);
  s.path_limits = true;
  s.link_bytes_per_s = 1e7;  // Slower than the path: the wire decides.
  s.link_latency_s = -1;
  EXPECT_NEAR(MustPredict(c, s).comm_s, 1e-3 + 10.0, kTol);
}

TEST(Links, UncalibratedPathNeedsALinkSpeed) {
  Calibration c = TestCalibration();
  c.allreduce.bytes_per_s = 0;
  absl::StatusOr<Prediction> p = Predict(c, Make(Strategy::kRing, 2, 1e8));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  Scenario s = Make(Strategy::kRing, 2, 1e8);
  s.link_bytes_per_s = 1e8;
  EXPECT_TRUE(Predict(c, s).ok());
  // One rank moves nothing, so it needs no bandwidth.
  EXPECT_TRUE(Predict(c, Make(Strategy::kRing, 1, 1e8)).ok());
}

TEST(Links, HalvingDoublingUsesItsOwnPathWhenCalibrated) {
  Calibration c = WireOnlyCalibration();
  c.halving_doubling = {0, 5e7};
  const Prediction p = MustPredict(c, NoOverlap(Strategy::kHalvingDoubling, 2, 1e8));
  EXPECT_NEAR(p.comm_s, 2.0, kTol);  // 2(N-1)/N M / 5e7.
}

// ----- errors -----

TEST(PredictErrors, RejectsImpossibleInputs) {
  const Calibration c = TestCalibration();
  Scenario s = Make(Strategy::kRing, 0, 1e8);
  EXPECT_EQ(Predict(c, s).status().code(), absl::StatusCode::kInvalidArgument);
  s = Make(Strategy::kPs, 2, 1e8);
  s.shards = 0;
  EXPECT_EQ(Predict(c, s).status().code(), absl::StatusCode::kInvalidArgument);
  s = Make(Strategy::kRing, 2, -1);
  EXPECT_EQ(Predict(c, s).status().code(), absl::StatusCode::kInvalidArgument);
  s = Make(Strategy::kRing, 2, 1e8);
  s.bucket_bytes = {1e7, 1e7};
  EXPECT_EQ(Predict(c, s).status().code(), absl::StatusCode::kInvalidArgument);
  s = Make(Strategy::kRing, 2, 1e8);
  s.link_latency_s = -2;
  EXPECT_EQ(Predict(c, s).status().code(), absl::StatusCode::kInvalidArgument);
  Calibration bad = c;
  bad.backward_s = 0.02;
  EXPECT_EQ(Predict(bad, Make(Strategy::kRing, 2, 1e8)).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = c;
  bad.update_s_per_byte = -1;
  EXPECT_EQ(Predict(bad, Make(Strategy::kRing, 2, 1e8)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ----- fits -----

std::vector<double> SweepSizes() {
  std::vector<double> sizes;
  for (double b = 1024; b <= 64.0 * (1 << 20); b *= 2) sizes.push_back(b);
  return sizes;
}

TEST(Fit, RecoversAlphaAndBandwidthWithoutNoise) {
  std::vector<std::pair<double, double>> samples;
  for (double b : SweepSizes()) samples.emplace_back(b, 5e-4 + b / 1.25e9);
  absl::StatusOr<PathCalibration> fit = FitLatencyBandwidth(samples);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->alpha_s, 5e-4, 5e-4 * 1e-9);
  EXPECT_NEAR(fit->bytes_per_s, 1.25e9, 1.25e9 * 1e-9);
  // Two points are enough.
  fit = FitLatencyBandwidth({{0, 1e-3}, {1e6, 2e-3}});
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->alpha_s, 1e-3, 1e-15);
  EXPECT_NEAR(fit->bytes_per_s, 1e9, 1e-3);
}

TEST(Fit, RecoversAlphaAndBandwidthWithNoise) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(-0.05, 0.05);  // +-5% per sample.
  std::vector<std::pair<double, double>> samples;
  for (int rep = 0; rep < 10; ++rep) {
    for (double b : SweepSizes()) samples.emplace_back(b, (5e-4 + b / 1.25e9) * (1 + noise(rng)));
  }
  absl::StatusOr<PathCalibration> fit = FitLatencyBandwidth(samples);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->alpha_s, 5e-4, 5e-4 * 0.05);
  EXPECT_NEAR(fit->bytes_per_s, 1.25e9, 1.25e9 * 0.05);
}

TEST(Fit, NegativeInterceptIsClampedToZero) {
  // Pure bandwidth with the smallest size measured fast: the free fit's intercept is < 0.
  absl::StatusOr<PathCalibration> fit =
      FitLatencyBandwidth({{1e3, 0.5e-6}, {1e6, 1e-3}, {2e6, 2e-3}});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->alpha_s, 0);
  EXPECT_GT(fit->bytes_per_s, 0);
}

TEST(Fit, Errors) {
  EXPECT_EQ(FitLatencyBandwidth({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitLatencyBandwidth({{1e6, 1e-3}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitLatencyBandwidth({{1e6, 1e-3}, {1e6, 2e-3}}).status().code(),
            absl::StatusCode::kInvalidArgument);  // One distinct size.
  EXPECT_EQ(FitLatencyBandwidth({{1e3, 2e-3}, {1e6, 1e-3}}).status().code(),
            absl::StatusCode::kInvalidArgument);  // Time falls with size.
  EXPECT_EQ(FitLatencyBandwidth({{1e3, 1e-3}, {1e6, 1e-3}}).status().code(),
            absl::StatusCode::kInvalidArgument);  // Flat: infinite bandwidth.
  EXPECT_EQ(FitLatencyBandwidth({{1e3, 0}, {1e6, 1e-3}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitLatencyBandwidth({{-1, 1e-3}, {1e6, 1e-3}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitLatencyBandwidth({{NAN, 1e-3}, {1e6, 1e-3}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Fit, AllReduceSweepGivesTheRingFormulasConstants) {
  // A 4-rank ring: t = 6 alpha + m (1.5 / B + 0.75 gamma).
  const double alpha = 1e-4, b = 1e9, gamma = 2e-10;
  std::vector<std::pair<double, double>> samples;
  for (double m : SweepSizes()) samples.emplace_back(m, 6 * alpha + m * (1.5 / b + 0.75 * gamma));
  absl::StatusOr<PathCalibration> fit = FitAllReducePath(samples, 4, Strategy::kRing, gamma);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->alpha_s, alpha, alpha * 1e-9);
  EXPECT_NEAR(fit->bytes_per_s, b, b * 1e-9);
  // Predicting the swept all-reduce back gives the samples.
  Calibration c;
  c.allreduce = *fit;
  c.reduce_s_per_byte = gamma;
  const Prediction p = MustPredict(c, NoOverlap(Strategy::kRing, 4, 1 << 24));
  EXPECT_NEAR(p.comm_s, 6 * alpha + (1 << 24) * (1.5 / b + 0.75 * gamma), 1e-12);

  // Halving-doubling at 4 ranks: t = 4 alpha + ...
  samples.clear();
  for (double m : SweepSizes()) samples.emplace_back(m, 4 * alpha + m * (1.5 / b + 0.75 * gamma));
  fit = FitAllReducePath(samples, 4, Strategy::kHalvingDoubling, gamma);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->alpha_s, alpha, alpha * 1e-9);

  EXPECT_FALSE(FitAllReducePath(samples, 1, Strategy::kRing, gamma).ok());
  EXPECT_FALSE(FitAllReducePath(samples, 3, Strategy::kHalvingDoubling, gamma).ok());
  EXPECT_FALSE(FitAllReducePath(samples, 4, Strategy::kPs, gamma).ok());
  EXPECT_FALSE(FitAllReducePath(samples, 4, Strategy::kRing, 1e-6).ok());  // gamma too big.
}

TEST(Fit, RecursiveDoublingSweepGivesItsFormulasConstants) {
  // 4 ranks: time = 2 alpha + 2 m / B + 2 m gamma.
  const double alpha = 2e-4, bw = 5e8, gamma = 0.5e-9;
  std::vector<std::pair<double, double>> samples;
  for (double m : {1e4, 1e5, 1e6, 1e7}) samples.push_back({m, 2 * alpha + 2 * m / bw + 2 * m * gamma});
  absl::StatusOr<PathCalibration> p =
      FitAllReducePath(samples, 4, Strategy::kRecursiveDoubling, gamma);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->alpha_s, alpha, 1e-9);
  EXPECT_NEAR(p->bytes_per_s / bw, 1.0, 1e-6);
  EXPECT_FALSE(FitAllReducePath(samples, 3, Strategy::kRecursiveDoubling, gamma).ok());
  EXPECT_FALSE(FitAllReducePath(samples, 4, Strategy::kAuto, gamma).ok());
}

TEST(Fit, PushPullSweepSubtractsTheShardsWork) {
  const double alpha = 5e-4, b = 1.2e9, u = 3e-10;
  std::vector<std::pair<double, double>> samples;
  for (double m : SweepSizes()) samples.emplace_back(m, alpha + m / b + u * m);
  absl::StatusOr<PathCalibration> fit = FitPushPullPath(samples, u);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->alpha_s, alpha, alpha * 1e-9);
  EXPECT_NEAR(fit->bytes_per_s, b, b * 1e-9);
  // One worker, one shard, SGD on the shard: the model gives the sweep's time back.
  Calibration c;
  c.push_pull = *fit;
  c.update_s_per_byte = u;
  const Prediction p = MustPredict(c, Make(Strategy::kPs, 1, 1 << 24));
  EXPECT_NEAR(p.comm_s + p.update_s, alpha + (1 << 24) * (1 / b + u), 1e-12);
  EXPECT_FALSE(FitPushPullPath(samples, 1e-6).ok());
}

TEST(Fit, PerCallOverhead) {
  absl::StatusOr<double> o = FitPerCallOverhead({{1, 6e-4}, {2, 7e-4}, {4, 9e-4}, {8, 1.3e-3}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_NEAR(*o, 1e-4, 1e-12);
  o = FitPerCallOverhead({{1, 6e-4}, {2, 5e-4}});  // Faster with more calls: fully parallel.
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(*o, 0);
  EXPECT_FALSE(FitPerCallOverhead({{2, 6e-4}, {2, 7e-4}}).ok());
  EXPECT_FALSE(FitPerCallOverhead({{0, 6e-4}, {2, 7e-4}}).ok());
}

// ----- crossovers -----

Curve MakeCurve(const std::string& label, const std::vector<int>& workers,
                const std::vector<double>& steps) {
  Curve c;
  c.label = label;
  c.workers = workers;
  for (double t : steps) {
    Prediction p;
    p.step_s = t;
    c.predictions.push_back(p);
    c.speedups.push_back(0);
  }
  return c;
}

TEST(Crossovers, FindsEveryFlipAndSkipsTies) {
  const std::vector<int> n = {1, 2, 4, 8, 16};
  const std::vector<Crossover> x = FindCrossovers(
      {MakeCurve("a", n, {1, 2, 3, 4, 5}), MakeCurve("b", n, {2, 2, 1, 1, 9})});
  ASSERT_EQ(x.size(), 2u);
  EXPECT_EQ(x[0].faster_before, "a");
  EXPECT_EQ(x[0].faster_after, "b");
  EXPECT_EQ(x[0].workers_before, 1);  // N = 2 is a tie.
  EXPECT_EQ(x[0].workers, 4);
  EXPECT_EQ(x[1].faster_before, "b");
  EXPECT_EQ(x[1].faster_after, "a");
  EXPECT_EQ(x[1].workers_before, 8);
  EXPECT_EQ(x[1].workers, 16);
  // Differences -1 at N=1 and +2 at N=4: zero at a third of the way in log2 N.
  EXPECT_NEAR(x[0].workers_interpolated, std::exp2(2.0 / 3), 1e-12);
  EXPECT_TRUE(FindCrossovers({MakeCurve("a", n, {1, 1, 1, 1, 1}),
                              MakeCurve("b", n, {2, 2, 2, 2, 2})})
                  .empty());
}

TEST(Crossovers, HalvingDoublingOvertakesAFasterRingAtScale) {
  // Ring at 1 GB/s, halving-doubling at 0.8 GB/s, alpha 10 us, M = 1 MB (one bucket):
  // hd - ring = 2 alpha (lg N - (N-1)) + 2(N-1)/N * 0.25 ms: > 0 up to N = 16 (+0.249
  // ms), < 0 from N = 32 (-0.036 ms).
  Calibration c;
  c.compute_s = 0.01;
  c.backward_s = 0.006;
  c.allreduce = {1e-5, 1e9};
  c.halving_doubling = {1e-5, 0.8e9};
  c.push_pull = {1e-5, 1e9};
  SweepOptions o;
  o.model_bytes = 1e6;
  o.overlap = false;
  o.shards = {};
  o.colocated = false;
  absl::StatusOr<std::vector<Crossover>> x = FindCrossovers(c, o);
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_EQ(x->size(), 1u);
  EXPECT_EQ((*x)[0].faster_before, "ring");
  EXPECT_EQ((*x)[0].faster_after, "halving-doubling");
  EXPECT_EQ((*x)[0].workers_before, 16);
  EXPECT_EQ((*x)[0].workers, 32);
  EXPECT_GT((*x)[0].workers_interpolated, 16);
  EXPECT_LT((*x)[0].workers_interpolated, 32);
}

TEST(Crossovers, RingBeatsSingleMasterAndColocatedPsBeatsRingLatency) {
  // Heavy all-reduce latency (1 ms per ring step), light push-pull latency: the ring
  // wins at N = 1 (nothing to send), the single master from N = 2 until its N M / B
  // outgrows the ring's 2 (N-1) alpha + 2(N-1)/N M/B; colocated PS pays one alpha and
  // the ring's bytes, so once it is ahead of the ring it stays ahead.
  Calibration c;
  c.compute_s = 0.01;
  c.backward_s = 0.006;
  c.allreduce = {1e-3, 1e9};
  c.push_pull = {1e-4, 1e9};
  SweepOptions o;
  o.model_bytes = 1e6;  // M/B = 1 ms.
  o.overlap = false;
  absl::StatusOr<std::vector<Curve>> curves = PredictCurves(c, o);
  ASSERT_TRUE(curves.ok()) << curves.status();
  ASSERT_EQ(curves->size(), 4u);
  EXPECT_EQ((*curves)[0].label, "PS S=1");
  EXPECT_EQ((*curves)[1].label, "PS S=N colocated");
  EXPECT_EQ((*curves)[2].label, "ring");
  EXPECT_EQ((*curves)[3].label, "halving-doubling");
  EXPECT_EQ((*curves)[2].workers.size(), 11u);  // 1 .. 1024.
  const std::vector<Crossover> x = FindCrossovers(*curves);
  auto find = [&](const std::string& before, const std::string& after) -> const Crossover* {
    for (const Crossover& c : x) {
      if (c.faster_before == before && c.faster_after == after) return &c;
    }
    return nullptr;
  };
  // PS S=1 - ring at N: 0.1 + N - 2(N-1) - 2(N-1)/N ms: +1.1 at N=1, -0.9 at N=2.
  const Crossover* ps_ring = find("ring", "PS S=1");
  ASSERT_NE(ps_ring, nullptr);
  EXPECT_EQ(ps_ring->workers, 2);
  EXPECT_EQ(find("PS S=1", "ring"), nullptr);  // N M/B grows slower than 2 (N-1) alpha.
  const Crossover* coloc_ring = find("ring", "PS S=N colocated");
  ASSERT_NE(coloc_ring, nullptr);
  EXPECT_EQ(coloc_ring->workers, 2);
  EXPECT_EQ(find("PS S=N colocated", "ring"), nullptr);
}

// ----- JSON -----

TEST(Json, RoundTripIsExact) {
  Calibration c;
  c.compute_s = 1.0 / 3;
  c.backward_s = 0.2;
  c.update_s_per_byte = 3.5e-10;
  c.reduce_s_per_byte = 1e-300;
  c.model_bytes = 2681896;
  c.push_pull_per_call_s = 4.2e-5;
  c.push_pull = {5.123456789e-4, 1.26e9};
  c.allreduce = {1e-4, 1.0 / 7 * 1e9};
  c.halving_doubling = {0, 0};
  c.raw_tcp_bytes_per_s = 2.5e9;
  c.ps_join_sigma = 1.0 / 7;
  c.topk_codec_s_per_value = 3.25e-9;
  c.powersgd_codec_s_per_flop = 1.0 / 3e10;
  c.model = "cnn:lenet";
  c.batch = 96;
  c.threads = 2;
  absl::StatusOr<Calibration> back = CalibrationFromJson(CalibrationToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->compute_s, c.compute_s);
  EXPECT_EQ(back->backward_s, c.backward_s);
  EXPECT_EQ(back->update_s_per_byte, c.update_s_per_byte);
  EXPECT_EQ(back->reduce_s_per_byte, c.reduce_s_per_byte);
  EXPECT_EQ(back->model_bytes, c.model_bytes);
  EXPECT_EQ(back->push_pull_per_call_s, c.push_pull_per_call_s);
  EXPECT_EQ(back->push_pull.alpha_s, c.push_pull.alpha_s);
  EXPECT_EQ(back->push_pull.bytes_per_s, c.push_pull.bytes_per_s);
  EXPECT_EQ(back->allreduce.alpha_s, c.allreduce.alpha_s);
  EXPECT_EQ(back->allreduce.bytes_per_s, c.allreduce.bytes_per_s);
  EXPECT_EQ(back->halving_doubling.bytes_per_s, 0);
  EXPECT_EQ(back->raw_tcp_bytes_per_s, c.raw_tcp_bytes_per_s);
  EXPECT_EQ(back->ps_join_sigma, c.ps_join_sigma);
  EXPECT_EQ(back->topk_codec_s_per_value, c.topk_codec_s_per_value);
  EXPECT_EQ(back->powersgd_codec_s_per_flop, c.powersgd_codec_s_per_flop);
  EXPECT_EQ(back->model, "cnn:lenet");
  EXPECT_EQ(back->batch, 96);
  EXPECT_EQ(back->threads, 2);
}

// Each path beside raw TCP, as a share of it; nothing without raw TCP; a path not
// measured (TCP's, in a file from before it was) is left out.
TEST(Json, TransportsBesideRawTcp) {
  Calibration c;
  c.push_pull = {1e-4, 0.5e9};
  c.push_pull_tcp = {1e-4, 1.5e9};
  c.allreduce = {1e-4, 1e9};
  EXPECT_EQ(TransportsBesideRawTcp(c), "");
  c.raw_tcp_bytes_per_s = 2e9;
  EXPECT_EQ(TransportsBesideRawTcp(c),
            "raw TCP 2.00 GB/s one way on loopback; PS push-pull over gRPC 0.50 GB/s (25%), over TCP 1.50 GB/s "
            "(75%); ring all-reduce 1.00 GB/s (50%)");
  c.push_pull_tcp = {};
  EXPECT_EQ(TransportsBesideRawTcp(c),
            "raw TCP 2.00 GB/s one way on loopback; PS push-pull over gRPC 0.50 GB/s (25%); ring all-reduce "
            "1.00 GB/s (50%)");
}

// A calibration of unknown provenance (a file from before model and batch were
// recorded) writes no such keys and reads back as unknown.
TEST(Json, ModelAndBatchAreAbsentWhenUnknown) {
  Calibration c = TestCalibration();
  const std::string json = CalibrationToJson(c);
  EXPECT_THAT(json, Not(HasSubstr("\"model\"")));
  EXPECT_THAT(json, Not(HasSubstr("\"batch\"")));
  absl::StatusOr<Calibration> back = CalibrationFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model, "");
  EXPECT_EQ(back->batch, 0);
  EXPECT_EQ(back->threads, 0);
}

TEST(Json, AcceptsAnyOrderAndOptionalFields) {
  absl::StatusOr<Calibration> c = CalibrationFromJson(
      " { \"allreduce\" : {\"bytes_per_s\":1e9,\"alpha_s\":1e-4},"
      "\"push_pull\":{\"alpha_s\":0.0005,\"bytes_per_s\":1.2e9},\"compute_s\":0.005}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->compute_s, 0.005);
  EXPECT_EQ(c->backward_s, 0);
  EXPECT_EQ(c->allreduce.bytes_per_s, 1e9);
  EXPECT_EQ(c->push_pull.alpha_s, 0.0005);
}

TEST(Json, RejectsBadInput) {
  const std::string paths =
      "\"push_pull\":{\"alpha_s\":0,\"bytes_per_s\":1},\"allreduce\":{\"alpha_s\":0,"
      "\"bytes_per_s\":1}";
  for (const std::string& bad : std::vector<std::string>{
           std::string(""),
           std::string("[]"),
           "{" + paths + "}",                                         // no compute_s
           std::string("{\"compute_s\":1}"),                           // no paths
           "{\"compute_s\":1," + paths + ",\"typo_s\":1}",             // unknown key
           "{\"compute_s\":1," + paths + ",\"compute_s\":2}",          // duplicate
           "{\"compute_s\":\"fast\"," + paths + "}",                   // not a number
           "{\"compute_s\":-1," + paths + "}",                         // negative
           "{\"compute_s\":1,\"backward_s\":2," + paths + "}",         // backward > compute
           "{\"compute_s\":1," + paths + "} x",                        // trailing
           "{\"compute_s\":1," + paths,                                // unterminated
           std::string("{\"compute_s\":1,\"push_pull\":{\"alpha_s\":0},\"allreduce\":"
                       "{\"alpha_s\":0,\"bytes_per_s\":1}}"),          // path field missing
           "{\"compute_s\":1," + paths + ",\"batch\":-4}",             // negative batch
           "{\"compute_s\":1," + paths + ",\"model\":7}",              // model not a string
           "{\"compute_s\":1," + paths + ",\"ps_join_sigma\":-0.1}",   // negative sigma
       }) {
    EXPECT_EQ(CalibrationFromJson(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

// ----- whether a calibration fits a run -----

// mlp:784-256-256-10 has 784*256+256 + 256*256+256 + 256*10+10 = 269322 parameters,
// mlp:784-128-10 has 784*128+128 + 128*10+10 = 101770.
Calibration MeasuredWith(const std::string& model, int batch) {
  Calibration c = TestCalibration();
  c.model = model;
  c.batch = batch;
  c.model_bytes = 4.0 * 269322;
  return c;
}

TEST(CalibrationFits, SameModelAndBatch) {
  EXPECT_TRUE(CheckCalibrationFits(MeasuredWith("mlp:784-256-256-10", 128), "mlp:784-256-256-10", 128).ok());
}

TEST(CalibrationFits, WeighModelCountsTheParameters) {
  absl::StatusOr<ModelWeight> w = WeighModel("mlp:784-256-256-10", 64);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->bytes, 4.0 * 269322);
  absl::StatusOr<ModelWeight> w2 = WeighModel("mlp:784-256-256-10", 128);
  ASSERT_TRUE(w2.ok()) << w2.status();
  EXPECT_DOUBLE_EQ(w2->gemm_flops, 2 * w->gemm_flops);  // GEMM work is linear in the batch.
  EXPECT_EQ(WeighModel("mlp:100-10", 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CalibrationFits, DifferentBatchNamesBothAndTheComputeError) {
  // Measured at twice this run's batch: twice the work, compute predicted +100%; the
  // same model moves the same bytes.
  const absl::Status s = CheckCalibrationFits(MeasuredWith("mlp:784-256-256-10", 128), "mlp:784-256-256-10", 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("measured with mlp:784-256-256-10 at batch 128, this run is "
                                     "mlp:784-256-256-10 at batch 64"));
  EXPECT_THAT(s.message(), HasSubstr("2.00x this run's GEMM work (predicted compute off by about +100%)"));
  EXPECT_THAT(s.message(), Not(HasSubstr("model bytes")));
  EXPECT_THAT(s.message(), HasSubstr("re-run `ringside calibrate --model=mlp:784-256-256-10 --batch=64`"));
}

TEST(CalibrationFits, DifferentModelNamesBothAndTheErrors) {
  const absl::Status s = CheckCalibrationFits(MeasuredWith("mlp:784-256-256-10", 64), "mlp:784-128-10", 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("measured with mlp:784-256-256-10 at batch 64, this run is "
                                     "mlp:784-128-10 at batch 64"));
  // 269322 / 101770 = 2.646 the bytes.
  EXPECT_THAT(s.message(), HasSubstr("its model bytes 2.65x this model's (predicted communication off by about +165%)"));
  // A model that is the bigger in every layer has the more GEMM work: an over-prediction.
  EXPECT_THAT(std::string(s.message()), testing::ContainsRegex("compute off by about \\+[0-9]+%"));
  EXPECT_THAT(s.message(), HasSubstr("--model=mlp:784-128-10 --batch=64"));
}

TEST(CalibrationFits, UnbuildableModelSaysTheErrorIsUnknown) {
  const absl::Status s = CheckCalibrationFits(MeasuredWith("mlp:784-256-256-10", 64), "mlp:3-10", 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("off by an unknown amount"));
}

TEST(CalibrationFits, OldFilesWithoutModelOrBatchSaySo) {
  for (Calibration c : {MeasuredWith("", 0), MeasuredWith("", 128), MeasuredWith("cnn:lenet", 0)}) {
    const absl::Status s = CheckCalibrationFits(c, "cnn:lenet", 32);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("does not say which model and batch it was measured with"));
    EXPECT_THAT(s.message(), HasSubstr("re-run `ringside calibrate --model=cnn:lenet --batch=32`"));
  }
}

// ----- simulate -----

std::string RunToString(const SimulateOptions& options, absl::Status* status) {
  return CapturePrinted([&](FILE* f) { return RunSimulate(options, f); }, status);
}

TEST(Simulate, PrintsATablePerLinkAndTheCrossovers) {
  SimulateOptions o;
  o.calibration.compute_s = 0.01;
  o.calibration.backward_s = 0.006;
  o.calibration.allreduce = {1e-3, 1e9};
  o.calibration.push_pull = {1e-4, 1e9};
  o.calibration.model_bytes = 1e6;
  o.link_bytes_per_s = {1.25e8, 1.25e9};
  absl::Status st;
  const std::string text = RunToString(o, &st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(text, HasSubstr("== link 1 Gbit/s"));
  EXPECT_THAT(text, HasSubstr("== link 10 Gbit/s"));
  EXPECT_THAT(text, HasSubstr("PS S=1"));
  EXPECT_THAT(text, HasSubstr("PS S=2"));
  EXPECT_THAT(text, HasSubstr("PS S=N colocated"));
  EXPECT_THAT(text, HasSubstr("halving-doubling"));
  EXPECT_THAT(text, HasSubstr("\n  1024 "));
  EXPECT_THAT(text, HasSubstr("crossover: PS S=1 overtakes ring between N=1 and N=2"));
}

TEST(Simulate, SaysWhatTheCalibrationWasMeasuredWith) {
  SimulateOptions o;
  o.calibration = MeasuredWith("mlp:784-256-256-10", 64);
  o.calibration.threads = 1;
  absl::Status st;
  std::string text = RunToString(o, &st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(text, HasSubstr("calibration measured with mlp:784-256-256-10 at batch 64, 1 thread(s)\n"));
  o.model = "mlp:784-256-256-10";  // The calibration's own: fine.
  RunToString(o, &st);
  EXPECT_TRUE(st.ok()) << st;
  o.calibration = MeasuredWith("", 0);
  o.model.clear();
  text = RunToString(o, &st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(text, HasSubstr("calibration of an unknown model and batch"));
}

TEST(Simulate, RefusesAnotherModelOrBatch) {
  SimulateOptions o;
  o.calibration = MeasuredWith("mlp:784-256-256-10", 64);
  o.batch = 128;
  absl::Status st;
  std::string text = RunToString(o, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("at batch 64, this run is mlp:784-256-256-10 at batch 128"));
  EXPECT_EQ(text, "");
  o.batch = 0;
  o.model = "cnn:lenet";
  RunToString(o, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("this run is cnn:lenet at batch 64"));
  o.calibration = MeasuredWith("", 0);  // An old file cannot vouch for any model.
  RunToString(o, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Simulate, NeedsAModelSize) {
  SimulateOptions o;
  o.calibration.allreduce = {0, 1e9};
  o.calibration.push_pull = {0, 1e9};
  absl::Status st;
  RunToString(o, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringside
