// `simulate` for a described cluster (no calibration) against the closed forms of
// docs/cost_model.md, "Simulating a described cluster", computed here from the formulas
// and not from the model's code: ring, halving-doubling, PS with S = 1, S standalone,
// S = N colocated, at N = 2..1024, one device a node and eight. Also the model presets'
// published sizes, models from specs and sizes, the command-line lists, the one PS
// schedule report and simulate share, and simulate's header at the calibrated share.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "experiments/cluster/profile.h"
#include "experiments/costmodel/cost_model.h"
#include "experiments/costmodel/model_presets.h"
#include "experiments/costmodel/print_capture_test_util.h"
#include "experiments/costmodel/simulate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The described cluster: NIC 10 Gbit/s (1.25e9 B/s) with 20 us, intra-node 100 GB/s
// with 2 us, `g` devices a node; one device's step 50 ms.
constexpr double kNic = 1.25e9, kNicLatency = 20e-6;
constexpr double kIntra = 100e9, kIntraLatency = 2e-6;
constexpr double kStep = 0.050, kBackward = kStep * 2 / 3;
constexpr double kModel = 100e6;
constexpr double kFirstBucket = 1 << 20;  // The reducer's first bucket.

ClusterProfile Profile(int g) {
  const std::string text = absl::StrCat(
      "name: \"test\" device_tflops: 10 devices_per_node: ", g,
      " nic { bandwidth: \"10gbit\" latency_us: 20 } intra_node { bandwidth: \"100GB/s\" latency_us: 2 }");
  absl::StatusOr<ClusterProfile> p = ParseClusterProfile(text, "test");
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

const std::vector<int> kWorkers = {2, 3, 4, 8, 16, 32, 64, 100, 128, 256, 512, 1000, 1024};

ClusterSimulateOptions Options(int g, std::vector<int> shards, bool colocated) {
  ClusterSimulateOptions o;
  o.cluster = Profile(g);
  absl::StatusOr<SimulatedModel> m = ResolveSimulatedModel("", 0, kModel / 1e6, {});
  EXPECT_TRUE(m.ok()) << m.status();
  o.model = *m;
  o.step_s = kStep;
  o.workers = kWorkers;
  o.shards = std::move(shards);
  o.shards_colocated = colocated;
  o.bucket_cap_bytes = kModel;  // Two DDP buckets: 1 MiB, then the rest.
  return o;
}

const Curve& Find(const std::vector<Curve>& curves, const std::string& label) {
  for (const Curve& c : curves) {
    if (c.label == label) return c;
  }
  ADD_FAILURE() << "no curve " << label;
  return curves.front();
}

int FloorLog2(int n) {
  int lg = 0;
  while ((2 << lg) <= n) ++lg;
  return lg;
}

// ----- the closed forms, written out -----

// The ring laid out node by node: 2(N-1) steps, each M/N on every edge; the one edge
// leaving each node crosses its NIC, the other g - 1 stay inside; the slower bounds the
// step. One node: every edge inside.
double RingSeconds(int n, int g, double b) {
  const double chunk = b / n;
  const double across = kNicLatency + chunk / kNic;
  const double inside = kIntraLatency + chunk / kIntra;
  if (n <= g) return 2 * (n - 1) * inside;
  return 2 * (n - 1) * (g > 1 ? std::max(across, inside) : across);
}

// Halving-doubling (farthest partner first, as ddp_ring runs it): the steps with mask
// >= g cross nodes and all g ranks of a node send their half through its NIC; the
// others stay inside. N not a power of two: min(g, N - p) ranks of a node fold their
// whole bucket into partners p ranks below (another node when N > g) and get it back.
double HalvingDoublingSeconds(int n, int g, double b) {
  const int p = 1 << FloorLog2(n);
  double t = 0;
  for (int mask = p / 2; mask >= 1; mask /= 2) {
    const double chunk = b * mask / p;
    t += 2 * (mask >= g ? kNicLatency + g * chunk / kNic : kIntraLatency + chunk / kIntra);
  }
  if (p != n) {
    t += 2 * (n > g ? kNicLatency + std::min(g, n - p) * b / kNic : kIntraLatency + b / kIntra);
  }
  return t;
}

// DDP with overlap and a bucket cap >= M: a 1 MiB first bucket ready at T_b x b1 / M,
// the rest at T_b; the second waits for the first.
double DdpStepSeconds(double (*all_reduce)(int, int, double), int n, int g) {
  const double b1 = kFirstBucket, b2 = kModel - kFirstBucket;
  const double done1 = kBackward * b1 / kModel + all_reduce(n, g, b1);
  return (kStep - kBackward) + std::max(kBackward, done1) + all_reduce(n, g, b2);
}

// ringside's PS step (UseRingsidePsSchedule): 2 alpha + max(0, T - T_b) + T x the last
// chunk's share of a shard's slice, T the busiest node's one-way transfer time.
double PsStepSeconds(double transfer_s, double alpha, int shards) {
  const double slice = kModel / shards;
  const double unpipelined = std::min<double>(kDefaultPsChunkBytes, slice) / slice;
  return kStep + 2 * alpha + std::max(0.0, transfer_s - kBackward) + transfer_s * unpipelined;
}

// Standalone: g workers a node push and pull g M through its NIC; a server node of one
// shard carries N M / S.
double PsStandaloneSeconds(int n, int g, int shards) {
  const double transfer = std::max(std::min(g, n) * kModel / kNic, n * kModel / shards / kNic);
  return PsStepSeconds(transfer, kNicLatency, shards);
}

// S = N colocated: a node of w workers holding w shards (F = w / N) moves
// w (1 - F) M + (N - w) F M = 2 w (N - w) / N x M through its NIC; a device sends
// (F - 1/N) M + (w - 1) M / N = 2 (w - 1) / N x M inside. One node: intra latency.
double PsColocatedPerWorkerSeconds(int n, int g) {
  double nic = 0, intra = 0;
  for (int lo = 0; lo < n; lo += g) {
    const int w = std::min(g, n - lo);
    nic = std::max(nic, 2.0 * w * (n - w) / n * kModel);
    intra = std::max(intra, 2.0 * (w - 1) / n * kModel);
  }
  const double transfer = std::max(nic / kNic, intra / kIntra);
  return PsStepSeconds(transfer, n <= g && g > 1 ? kIntraLatency : kNicLatency, n);
}

void ExpectRelative(double actual, double expected, const std::string& what) {
  EXPECT_NEAR(actual, expected, 1e-9 * expected) << what;
}

class ClosedForms : public ::testing::TestWithParam<int> {};

TEST_P(ClosedForms, RingAndHalvingDoubling) {
  const int g = GetParam();
  absl::StatusOr<std::vector<Curve>> curves = PredictClusterCurves(Options(g, {}, false), 0);
  ASSERT_TRUE(curves.ok()) << curves.status();
  const Curve& ring = Find(*curves, "ring");
  const Curve& hd = Find(*curves, "halving-doubling");
  for (size_t k = 0; k < kWorkers.size(); ++k) {
    const int n = kWorkers[k];
    const std::string at = absl::StrCat("N=", n, " g=", g);
    ExpectRelative(ring.predictions[k].step_s, DdpStepSeconds(RingSeconds, n, g), "ring " + at);
    ExpectRelative(hd.predictions[k].step_s, DdpStepSeconds(HalvingDoublingSeconds, n, g), "hd " + at);
    ExpectRelative(ring.speedups[k], n * kStep / ring.predictions[k].step_s, "speedup " + at);
    // Bytes through each NIC: the ring's 2(N-1)/N M (node_traffic.h), not g times it.
    const double ring_nic = n > g ? 2.0 * (n - 1) / n * kModel : 0;
    ExpectRelative(ring.predictions[k].busiest_node_bytes_out + 1, ring_nic + 1, "ring NIC bytes " + at);
  }
}

TEST_P(ClosedForms, PsStandaloneAndColocated) {
  const int g = GetParam();
  absl::StatusOr<std::vector<Curve>> standalone =
      PredictClusterCurves(Options(g, {1, 4, kShardsPerWorker}, false), 0);
  ASSERT_TRUE(standalone.ok()) << standalone.status();
  absl::StatusOr<std::vector<Curve>> colocated = PredictClusterCurves(Options(g, {kShardsPerWorker}, true), 0);
  ASSERT_TRUE(colocated.ok()) << colocated.status();
  for (size_t k = 0; k < kWorkers.size(); ++k) {
    const int n = kWorkers[k];
    const std::string at = absl::StrCat("N=", n, " g=", g);
    ExpectRelative(Find(*standalone, "PS S=1").predictions[k].step_s, PsStandaloneSeconds(n, g, 1), "S=1 " + at);
    ExpectRelative(Find(*standalone, "PS S=4").predictions[k].step_s, PsStandaloneSeconds(n, g, 4), "S=4 " + at);
    ExpectRelative(Find(*standalone, "PS S=N").predictions[k].step_s, PsStandaloneSeconds(n, g, n), "S=N " + at);
    ExpectRelative(Find(*colocated, "PS S=N colocated").predictions[k].step_s, PsColocatedPerWorkerSeconds(n, g),
                   "S=N colocated " + at);
  }
}

INSTANTIATE_TEST_SUITE_P(DevicesPerNode, ClosedForms, ::testing::Values(1, 8));

TEST(ClusterSimulate, SingleMasterIsBoundByTheServerAndSharedNicsByTheirWorkers) {
  absl::StatusOr<std::vector<Curve>> curves = PredictClusterCurves(Options(8, {1, kShardsPerWorker}, false), 0);
  ASSERT_TRUE(curves.ok()) << curves.status();
  // N = 1024: the master carries N M; a node of 8 workers 8 M, more than a server of
  // one shard (M) at S = N.
  EXPECT_EQ(Find(*curves, "PS S=1").predictions.back().bottleneck, "master link");
  EXPECT_EQ(Find(*curves, "PS S=N").predictions.back().bottleneck, "worker link");
  EXPECT_NEAR(Find(*curves, "PS S=N").predictions.back().busiest_node_bytes_in, 8 * kModel, 1);
  // The bandwidth used: the NIC's rate while the transfer runs, less the wait for the
  // last 1 MiB chunk's reply (1% of the 100 MB slice) and the latency.
  const Prediction& master = Find(*curves, "PS S=1").predictions.back();
  ExpectRelative(UsedBytesPerSecond(master),
                 1024 * kModel / (2 * kNicLatency + 1024 * kModel / kNic * (1 + kDefaultPsChunkBytes / kModel)),
                 "used bandwidth");
}

TEST(ClusterSimulate, LinkLatencyAndRateOverrideTheProfile) {
  ClusterSimulateOptions o = Options(1, {}, false);
  o.workers = {4};
  o.link_latency_s = 1e-3;
  absl::StatusOr<std::vector<Curve>> curves = PredictClusterCurves(o, 2 * kNic);
  ASSERT_TRUE(curves.ok()) << curves.status();
  const double b1 = kFirstBucket, b2 = kModel - b1;
  auto ring = [](double b) { return 6 * (1e-3 + b / 4 / (2 * kNic)); };
  const double expected = (kStep - kBackward) + std::max(kBackward, kBackward * b1 / kModel + ring(b1)) + ring(b2);
  ExpectRelative(Find(*curves, "ring").predictions[0].step_s, expected, "ring at 1 ms, 20 Gbit/s");
}

TEST(ClusterSimulate, BucketsAreWholeLayers) {
  // Layers of 30, 50, 20 MB: reverse order, first bucket capped at 1 MiB (the 20 MB
  // layer alone), then 25 MiB caps: each bigger layer its own bucket.
  EXPECT_THAT(DdpBucketBytes({30e6, 50e6, 20e6}, 100e6, 0, 0), ::testing::ElementsAre(20e6, 50e6, 30e6));
  // A cap of 100 MiB groups the last two.
  EXPECT_THAT(DdpBucketBytes({30e6, 50e6, 20e6}, 100e6, 0, 100 * double(1 << 20)),
              ::testing::ElementsAre(20e6, 80e6));
  // No layers: 1 MiB, then pieces of the cap.
  EXPECT_THAT(DdpBucketBytes({}, 60 * double(1 << 20), 0, 0),
              ::testing::ElementsAre(1 << 20, 25 << 20, 25 << 20, 9 << 20));
}

// ----- models -----

TEST(ModelPresets, PublishedSizes) {
  absl::StatusOr<ModelPreset> resnet = FindModelPreset("resnet-50");
  ASSERT_TRUE(resnet.ok()) << resnet.status();
  EXPECT_EQ(PresetParams(*resnet), 25557032);  // torchvision resnet50.
  EXPECT_NEAR(resnet->flops_per_sample, 3 * 2 * 4.09e9, 1);
  absl::StatusOr<ModelPreset> vgg = FindModelPreset("vgg-16");
  ASSERT_TRUE(vgg.ok());
  EXPECT_EQ(PresetParams(*vgg), 138357544);  // torchvision vgg16.
  double largest = 0;
  for (const LayerShape& l : vgg->layers) largest = std::max(largest, l.params);
  EXPECT_EQ(largest, 25088.0 * 4096 + 4096);  // fc6, 102.8M.
  absl::StatusOr<ModelPreset> bert = FindModelPreset("bert-large");
  ASSERT_TRUE(bert.ok());
  EXPECT_EQ(PresetParams(*bert), 335141888);  // BertModel, the paper's "340M".
  EXPECT_EQ(bert->layers.front().params, 30522.0 * 1024);  // The word embedding, 31.3M.
  double layer0 = 0;
  for (const LayerShape& l : bert->layers) {
    if (l.name.rfind("encoder.0.", 0) == 0) layer0 += l.params;
  }
  EXPECT_EQ(layer0, 12596224);  // ~12.6M per encoder layer.
  EXPECT_THAT(ModelPresetNames(), ::testing::ElementsAre("bert-large", "resnet-50", "vgg-16"));
}

TEST(ResolveSimulatedModel, PresetSpecAndSizes) {
  absl::StatusOr<SimulatedModel> m = ResolveSimulatedModel("vgg-16", 32, 0, {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->bytes, 4.0 * 138357544);
  EXPECT_EQ(m->layer_bytes.size(), 16u);
  EXPECT_NEAR(m->flops_per_step, 32 * 3 * 2 * 15.47e9, 1e3);
  // A ringside spec: 784 x 256 + 256 and 256 x 10 + 10 parameters; GEMMs 2 x batch x
  // in x out, x 2 for the first layer (no input gradient), x 3 for the second.
  m = ResolveSimulatedModel("mlp:784-256-10", 32, 0, {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->bytes, 4.0 * (784 * 256 + 256 + 256 * 10 + 10));
  EXPECT_THAT(m->layer_bytes, ::testing::ElementsAre(4.0 * (784 * 256 + 256), 4.0 * (256 * 10 + 10)));
  EXPECT_NEAR(m->flops_per_step, 2.0 * 32 * 784 * 256 * 2 + 2.0 * 32 * 256 * 10 * 3, 1);
  m = ResolveSimulatedModel("", 0, 528, {});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->bytes, 528e6);
  EXPECT_TRUE(m->layer_bytes.empty());
  m = ResolveSimulatedModel("", 0, 0, {102.8, 16.8});
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(m->bytes, 119.6e6, 1e-3);
}

TEST(ResolveSimulatedModel, BadInputIsOneLine) {
  absl::StatusOr<SimulatedModel> m = ResolveSimulatedModel("resnet-51", 32, 0, {});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("unknown model preset 'resnet-51' (presets: bert-large, resnet-50, vgg-16"));
  EXPECT_EQ(ResolveSimulatedModel("mlp:0-1", 32, 0, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ResolveSimulatedModel("", 0, 0, {}).status().message(), HasSubstr("needs a model"));
  EXPECT_THAT(ResolveSimulatedModel("vgg-16", 0, 10, {}).status().message(), HasSubstr("not both"));
  EXPECT_THAT(ResolveSimulatedModel("", 0, 10, {4, 5}).status().message(), HasSubstr("add up to 9 MB"));
  for (const auto& s : {ResolveSimulatedModel("resnet-51", 1, 0, {}).status(),
                        ResolveSimulatedModel("", 0, 10, {4, 5}).status()}) {
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr("\n")));
  }
}

TEST(ClusterStep, FromTheFlagTheProfileOrTheFlops) {
  ClusterSimulateOptions o = Options(1, {}, false);
  o.step_s = 0;
  absl::StatusOr<double> step = ClusterStepSeconds(o);  // By size, no --step_ms.
  EXPECT_EQ(step.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(step.status().message(), HasSubstr("no step time for a model given by size on cluster test: give --step_ms"));
  absl::StatusOr<SimulatedModel> m = ResolveSimulatedModel("resnet-50", 0, 0, {});
  ASSERT_TRUE(m.ok());
  o.model = *m;
  step = ClusterStepSeconds(o);  // A preset without --batch: no FLOPs yet.
  EXPECT_THAT(step.status().message(), HasSubstr("or --batch=B"));
  o.batch = 32;
  o.model = *ResolveSimulatedModel("resnet-50", 32, 0, {});
  step = ClusterStepSeconds(o);  // 32 x 24.54 GFLOP / 10 TFLOP/s.
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_NEAR(*step, 32 * 3 * 2 * 4.09e9 / 10e12, 1e-12);
  o.cluster.steps.push_back({"resnet-50", 32, 0.123, "measured"});
  EXPECT_NEAR(*ClusterStepSeconds(o), 0.123, 1e-15);
  o.step_s = 0.2;
  EXPECT_NEAR(*ClusterStepSeconds(o), 0.2, 1e-15);
}

// ----- lists -----

TEST(Lists, WorkersShardsAndSizes) {
  EXPECT_THAT(*ParseWorkerList("8,32,100"), ::testing::ElementsAre(8, 32, 100));
  EXPECT_THAT(*ParseShardList("1,2,N"), ::testing::ElementsAre(1, 2, kShardsPerWorker));
  EXPECT_THAT(*ParseSizeList("102.8,16.8"), ::testing::ElementsAre(102.8, 16.8));
  for (const char* bad : {"0", "8,x", "", "8,,16", "-2", "1.5"}) {
    absl::StatusOr<std::vector<int>> w = ParseWorkerList(bad);
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(w.status().message(), HasSubstr("--workers: bad worker count")) << bad;
  }
  EXPECT_THAT(ParseShardList("0").status().message(), HasSubstr("--shards: bad shard count '0'"));
  EXPECT_THAT(ParseShardList("1,M").status().message(), HasSubstr("'M'"));
  EXPECT_FALSE(ParseSizeList("1,0").ok());
}

// ----- output -----


TEST(ClusterSimulate, PrintsTheClusterTheStepAndEveryPoint) {
  ClusterSimulateOptions o = Options(4, {1, kShardsPerWorker}, false);
  o.workers = {16, 64, 512};
  absl::Status st;
  const std::string text = CapturePrinted([&](FILE* f) { return RunClusterSimulate(o, f); }, &st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(text, HasSubstr("cluster test: 4 x device per node, NIC 10 Gbit/s (latency 20 us), intra-node"));
  EXPECT_THAT(text, HasSubstr("step on one device: 50.000 ms, given (--step_ms)"));
  EXPECT_THAT(text, HasSubstr("PS pushes overlap backward"));
  EXPECT_THAT(text, HasSubstr("PS shards on server nodes of their own (standalone)"));
  EXPECT_THAT(text, HasSubstr("|       PS S=N        |        ring         |  halving-doubling"));
  EXPECT_THAT(text, HasSubstr("\n   512 "));
  EXPECT_THAT(text, HasSubstr("| server "));
  EXPECT_THAT(text, HasSubstr(" Gb/s"));
  o.step_s = 0;  // Nothing printed when the step is unknown.
  const std::string none = CapturePrinted([&](FILE* f) { return RunClusterSimulate(o, f); }, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none, "");
}

// ----- one PS schedule for report and simulate -----

TEST(PsSchedule, SimulateUsesRingsidesSchedule) {
  Calibration c;
  c.compute_s = 0.01;
  c.backward_s = 0.006;
  c.push_pull = {1e-4, 1e8};
  c.allreduce = {1e-4, 1e8};
  SweepOptions o;
  o.model_bytes = 8e6;
  o.workers = {4};
  o.colocated = false;
  absl::StatusOr<std::vector<Curve>> curves = PredictCurves(c, o);
  ASSERT_TRUE(curves.ok());
  Scenario s;  // As report's points.cc builds a PS cell.
  s.strategy = Strategy::kPs;
  s.workers = 4;
  s.model_bytes = 8e6;
  UseRingsidePsSchedule(&s);
  EXPECT_TRUE(s.ps_overlap);
  EXPECT_EQ(s.chunk_bytes, kDefaultPsChunkBytes);
  absl::StatusOr<Prediction> p = Predict(c, s);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Find(*curves, "PS S=1").predictions[0].step_s, p->step_s);
  // 4 x 8 MB through the master at 100 MB/s: T = 0.32 s; pushes hide 6 ms of it, the
  // last 1 MiB chunk's reply of 8 MB waits T x 1/8 more.
  EXPECT_NEAR(p->step_s, 0.01 + 1e-4 + (0.32 - 0.006) + 0.32 * kDefaultPsChunkBytes / 8e6, 1e-12);
}

// ----- no silent rescaling between node shares -----

TEST(Simulate, PredictsForTheCalibratedShareUnlessTold) {
  SimulateOptions o;
  o.calibration.compute_s = 0.0662;
  o.calibration.backward_s = 0.04;
  o.calibration.threads = 1;
  o.calibration.node_cpus = 0.4;
  o.calibration.allreduce = {1e-4, 1e8};
  o.calibration.push_pull = {1e-4, 1e8};
  o.calibration.model_bytes = 1e6;
  o.workers = {1, 2};
  absl::Status st;
  std::string text = CapturePrinted([&](FILE* f) { return RunSimulate(o, f); }, &st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(text, HasSubstr("compute 66.200 ms/step (backward 40.000 ms) on a node of 0.4 CPU"));
  EXPECT_THAT(text, HasSubstr("single process: 66.200 ms/step"));
  EXPECT_THAT(text, HasSubstr("0.4 CPU each, the calibration's share (no rescaling)"));
  o.node_cpus = 1;  // Told otherwise: said, with the factor.
  text = CapturePrinted([&](FILE* f) { return RunSimulate(o, f); }, &st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(text, HasSubstr("emulated nodes: 1 CPU each, NOT the calibration's share"));
  EXPECT_THAT(text, HasSubstr("rescaled x0.4"));
  EXPECT_THAT(text, HasSubstr("single process: 26.480 ms/step"));
}

}  // namespace
}  // namespace ringside
