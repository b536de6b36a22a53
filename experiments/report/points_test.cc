#include "experiments/report/points.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "experiments/matrix/summary.h"
#include "experiments/report/report.h"
#include "gtest/gtest.h"
#include "google/protobuf/text_format.h"

namespace ringside {
namespace {

// Compute-only calibration (no communication costs), so a prediction is its compute.
Calibration ComputeOnly() {
  Calibration c;
  c.compute_s = 0.008;
  c.backward_s = 0.004;
  c.model_bytes = 1e6;
  c.push_pull.bytes_per_s = 1e15;
  c.allreduce.bytes_per_s = 1e15;
  return c;
}

std::vector<ReportPoint> DdpPoints() {
  std::vector<ReportPoint> points(2);
  for (int i = 0; i < 2; ++i) {
    points[i].label = "ddp";
    points[i].kind = "ddp";
    points[i].workers = i == 0 ? 1 : 4;
    points[i].ok_repeats = 1;
    points[i].step_ms = 1;
  }
  return points;
}

double Predicted(const std::string& spec_text, int cores) {
  ExperimentSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(spec_text, &spec));
  std::vector<ReportPoint> points = DdpPoints();
  PredictPoints(ComputeOnly(), spec, cores, &points);
  EXPECT_GT(points[0].predicted_step_ms, 7.9);  // One worker: the calibrated 8 ms.
  return points[1].predicted_step_ms;
}

TEST(PredictPointsTest, WeakScalingKeepsEachWorkersCompute) {
  EXPECT_NEAR(Predicted("strategies { kind: 'ddp' } batch_per_worker: 64", 8), 8.0, 0.1);
}

TEST(PredictPointsTest, StrongScalingSplitsTheComputeOverTheWorkers) {
  EXPECT_NEAR(Predicted("strategies { kind: 'ddp' } global_batch: 256", 8), 2.0, 0.1);
}

TEST(PredictPointsTest, WorkersBeyondTheCoresShareThem) {
  EXPECT_NEAR(Predicted("strategies { kind: 'ddp' } batch_per_worker: 64", 2), 16.0, 0.1);
}

CellResult Result(const std::string& label, const std::string& kind, int workers, int repeat,
                  const std::string& device, bool emulated, int gpus) {
  CellResult r;
  r.set_cell(label + "-n" + std::to_string(workers) + "-r" + std::to_string(repeat));
  r.set_label(label);
  r.set_kind(kind);
  r.set_workers(workers);
  r.set_repeat(repeat);
  r.set_status("ok");
  r.set_median_step_ms(10);
  r.set_samples_per_sec(1000);
  r.set_device(device);
  r.set_emulated(emulated);
  r.set_gpus(gpus);
  return r;
}

TEST(BuildPointsTest, APointIsEmulatedIfAnyRepeatWasAndKeepsItsDevice) {
  const std::vector<ReportPoint> points = BuildPoints({
      Result("single-cuda", "single", 1, 0, "cuda:0", false, 1),
      Result("ddp-nccl", "ddp", 2, 0, "cuda:0", false, 2),
      Result("ddp-nccl", "ddp", 2, 1, "cuda:0", true, 1),
      Result("ddp", "ddp", 2, 0, "cpu", false, 0),
  });
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(PointDevice(points[0]), "cuda:0");
  EXPECT_FALSE(points[0].emulated);
  EXPECT_TRUE(points[1].emulated);
  EXPECT_EQ(points[1].gpus, 2);
  EXPECT_EQ(PointDevice(points[1]), "cuda:0 (emulated: 2 ranks share 2 GPUs, NCCL over sockets)");
  EXPECT_EQ(PointDevice(points[2]), "cpu");
}

TEST(BuildPointsTest, PsWorkersSharingAGpuAreLabelledWithoutNccl) {
  const std::vector<ReportPoint> points = BuildPoints({Result("ps-cuda", "ps", 4, 0, "cuda:0", true, 1)});
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(PointDevice(points[0]), "cuda:0 (emulated: 4 workers share one GPU)");
}

// The matrix's single cell computed 6 ms a step against the calibration's 8: every
// prediction computes 6 (backward scaled alike), and the basis says both.
TEST(PredictPointsTest, ComputeComesFromTheMatrixsOwnSingleCells) {
  ExperimentSpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "strategies { kind: 'single' } strategies { kind: 'ddp' } workers: 4 batch_per_worker: 64", &spec));
  std::vector<ReportPoint> points = DdpPoints();
  points[0].label = "single";
  points[0].kind = "single";
  points[0].compute_ms = 6;
  const ComputeBasis basis = PredictPoints(ComputeOnly(), spec, 8, &points);
  EXPECT_NEAR(basis.calibrated_ms, 8, 1e-9);
  EXPECT_NEAR(basis.single_ms, 6, 1e-9);
  EXPECT_NEAR(points[0].predicted_step_ms, 6, 1e-6);
  EXPECT_NEAR(points[1].predicted_step_ms, 6, 0.1);
  // Without a single cell: the calibration's, and no basis.
  std::vector<ReportPoint> ddp_only = DdpPoints();
  const ComputeBasis none = PredictPoints(ComputeOnly(), spec, 8, &ddp_only);
  EXPECT_EQ(none.single_ms, 0);
  EXPECT_NEAR(ddp_only[1].predicted_step_ms, 8, 0.1);
}

// A top-k cell is predicted from its buckets' payloads: mlp:784-64-10 is one bucket of
// 50890 floats, whose encode and decode at 10 ns a value (0.509 ms) follow backward on
// infinitely fast links; PowerSGD's 6 m n r flops likewise (r = 4: 6 x 4 x (64 x 784 +
// 10 x 64) = 1219584 flops, 1.22 ms at 1 ns a flop).
TEST(PredictPointsTest, LossyCellsPayTheirEncodingPerBucket) {
  Calibration c = ComputeOnly();
  c.topk_codec_s_per_value = 1e-8;
  c.powersgd_codec_s_per_flop = 1e-9;
  for (const auto& [compress, extra_ms] : {std::pair<std::string, double>{"topk:0.01", 0.5089},
                                         std::pair<std::string, double>{"powersgd:4", 1.219584}}) {
    ExperimentSpec spec;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        "strategies { kind: 'ddp' compress: '" + compress + "' label: 'ddp' } model: 'mlp:784-64-10' "
        "batch_per_worker: 64",
        &spec));
    std::vector<ReportPoint> points = DdpPoints();
    PredictPoints(c, spec, 8, &points);
    EXPECT_NEAR(points[1].predicted_step_ms, 8.0 + extra_ms, 1e-3) << compress;
  }
}

TEST(PredictPointsTest, PointsOnTheGpuGetNoPrediction) {
  ExperimentSpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "device: 'cuda' strategies { kind: 'ddp' } batch_per_worker: 64", &spec));
  std::vector<ReportPoint> points = DdpPoints();
  for (ReportPoint& p : points) p.label = "ddp-nccl";
  PredictPoints(ComputeOnly(), spec, 8, &points);
  EXPECT_EQ(points[0].predicted_step_ms, 0);
  EXPECT_EQ(points[1].predicted_step_ms, 0);
}

// Round 0 ran on a fast host (single 1000 samples/s, ddp 3000), round 1 on one half as
// fast (500, 1500): paired by round both are 3x; against the singles' median (1000,
// the upper of two) round 1's would read 1.5x.
TEST(BuildPointsTest, SpeedupsPairEachRepeatWithItsRoundsSingle) {
  std::vector<CellResult> cells;
  for (int round = 0; round < 2; ++round) {
    const double pace = round == 0 ? 1.0 : 0.5;
    CellResult single = Result("single", "single", 1, round, "cpu", false, 0);
    single.set_samples_per_sec(1000 * pace);
    CellResult ddp = Result("ddp", "ddp", 4, round, "cpu", false, 0);
    ddp.set_samples_per_sec(3000 * pace);
    cells.push_back(single);
    cells.push_back(ddp);
  }
  std::vector<ReportPoint> points = BuildPoints(cells);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_NEAR(points[1].speedup, 3, 1e-9);
  EXPECT_NEAR(points[1].speedup_min, 3, 1e-9);
  EXPECT_NEAR(points[1].speedup_max, 3, 1e-9);
  // A repeat with no single of its round: the singles' median for every repeat.
  cells.push_back(Result("ddp", "ddp", 4, 2, "cpu", false, 0));
  cells.back().set_samples_per_sec(3000);
  points = BuildPoints(cells);
  EXPECT_NEAR(points[1].speedup, 3.0, 1e-9);  // Median of 3000, 1500, 3000 over 1000.
  EXPECT_NEAR(points[1].speedup_min, 1.5, 1e-9);
}

// On a cluster each cell ran on its own d, measured just before it: the single at
// d = 5 (1000 samples/s on the host), DDP at 4 nodes while the host had slowed by a
// fifth (d = 6, 2500 samples/s). In the cluster's time that is 5000 against 15000
// samples/s: 3x, where the host's times alone would read 2.5x.
TEST(BuildPointsTest, OnAClusterSpeedupsAreInTheClustersTime) {
  CellResult single = Result("single", "single", 1, 0, "cpu", false, 0);
  single.set_samples_per_sec(1000);
  single.set_dilation(5);
  CellResult ddp = Result("ddp", "ddp", 4, 0, "cpu", false, 0);
  ddp.set_samples_per_sec(2500);
  ddp.set_dilation(6);
  std::vector<ReportPoint> points = BuildPoints({single, ddp});
  ASSERT_EQ(points.size(), 2u);
  EXPECT_NEAR(points[1].speedup, 3, 1e-9);
  EXPECT_NEAR(points[1].samples_per_sec, 2500, 1e-9);  // The table's throughput stays the host's.
}

// The host's pace around a cell: the single's own probe read d = 8 where the probes
// before and after it (and the true pace) were 5. Taken alone it would make DDP's 3x
// read 1.9x; the median of it and its neighbours in time, 5, gives 3x. At the ends of
// the run the mean of the two there are; without start times each cell's own d.
TEST(BuildPointsTest, TheHostsPaceAroundACellIsTheMedianOfThreeProbes) {
  std::vector<CellResult> cells;
  const auto add = [&cells](const char* kind, int workers, double sps, double d, int64_t at) {
    CellResult r = Result(kind, kind, workers, 0, "cpu", false, 0);
    r.set_cell(absl::StrCat(kind, "-n", workers));
    r.set_samples_per_sec(sps);
    r.set_dilation(d);
    r.set_started_unix_ms(at);
    cells.push_back(r);
  };
  add("ddp", 2, 1800, 5, 1000);
  add("single", 1, 1000, 8, 2000);  // The noisy probe.
  add("ddp", 4, 3000, 5, 3000);
  add("ps", 4, 2400, 5, 4000);
  add("ps", 2, 1500, 7, 5000);      // The last: the mean of 5 and 7.
  std::vector<ReportPoint> points = BuildPoints(cells);  // ddp x2, x4, single, ps x2, x4
  ASSERT_EQ(points.size(), 5u);
  EXPECT_NEAR(points[1].speedup, 3, 1e-9);                     // 3000 x median(8, 5, 5) / (1000 x median(5, 8, 5))
  EXPECT_NEAR(points[0].speedup, 1800 * 6.5 / 5000, 1e-9);     // the first: mean(5, 8)
  EXPECT_NEAR(points[3].speedup, 1500 * 6.0 / 5000, 1e-9);     // the last: mean(5, 7)
  EXPECT_NEAR(points[4].speedup, 2400 * 5.0 / 5000, 1e-9);
  for (CellResult& r : cells) r.set_started_unix_ms(0);       // No start times: own d.
  points = BuildPoints(cells);
  EXPECT_NEAR(points[1].speedup, 3000 * 5 / 8000.0, 1e-9);
}

// With the profile's step known, a PS cell is read over the single process as its own
// probe measured it: that probe read d = 5 and shaped the cell's links for it; in the
// cluster's time the single (256 samples per 100 ms step) does 2560 samples/s, the PS
// cell 2400 x 5 = 12000: 4.69x, whatever the round's single cell ran at (its probe read
// d = 8 and it ran at 1000 samples/s: 8000 in the cluster's time, which would make the
// PS cell 1.5x). The single stays 1x (its own forward pace); DDP keeps its forward pace.
TEST(BuildPointsTest, OnAClusterAPsCellIsReadOverItsOwnProbesSingle) {
  CellResult single = Result("single", "single", 1, 0, "cpu", false, 0);
  single.set_samples_per_sec(1000);
  single.set_dilation(8);
  single.set_forward_ms(400);
  single.set_global_batch(256);
  CellResult ps = Result("ps", "ps", 4, 0, "cpu", false, 0);
  ps.set_samples_per_sec(2400);
  ps.set_dilation(5);
  ps.set_forward_ms(700);
  ps.set_global_batch(1024);
  CellResult ddp = Result("ddp", "ddp", 4, 0, "cpu", false, 0);
  ddp.set_samples_per_sec(3000);
  ddp.set_dilation(5);
  ddp.set_forward_ms(400);
  ddp.set_median_step_ms(1000);
  ddp.set_compute_ms(1000);
  std::vector<ReportPoint> points = BuildPoints({single, ps, ddp}, 100);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_NEAR(points[0].speedup, 1, 1e-9);
  EXPECT_NEAR(points[1].speedup, 2400.0 * 5 / 2560, 1e-9);
  EXPECT_NEAR(points[2].speedup, 3, 1e-9);  // Compute-bound at the single's forward pace.
  // Without the profile's step: the probes around it (own d here, no start times).
  points = BuildPoints({single, ps, ddp});
  EXPECT_NEAR(points[1].speedup, 2400.0 * 5 / 8000, 1e-9);
  // A PS cell without a dilation keeps the host's reading.
  ps.set_dilation(0);
  single.set_dilation(0);
  points = BuildPoints({single, ps, ddp}, 100);
  EXPECT_NEAR(points[1].speedup, 2.4, 1e-9);
}

// Cells with a forward pass are read at the host's pace during them: the single computed
// its forward in 400 ms at 1000 samples/s (its probe read d = 8, a noisy one); DDP at 4
// nodes ran while the host was a quarter slower (forward 500 ms, 2400 samples/s on the
// host, probe d = 5). Its step of 1000 ms is 900 ms of compute, which runs at the
// host's pace (720 ms at the single's), and 100 ms the step waited on the links, which
// were shaped for the cluster (kept): 820 ms at the single's pace. In the cluster's
// time DDP is 2400 x 1000 / 820 / 1000 = 2.93x, the probes notwithstanding (a
// compute-bound cell: 2400 x 500 / (1000 x 400) = 3x). A cell without a dilation keeps
// the host's reading.
TEST(BuildPointsTest, OnAClusterEachCellIsReadAtItsOwnForwardPace) {
  CellResult single = Result("single", "single", 1, 0, "cpu", false, 0);
  single.set_samples_per_sec(1000);
  single.set_dilation(8);
  single.set_forward_ms(400);
  single.set_median_step_ms(1024);
  single.set_compute_ms(1000);
  CellResult ddp = Result("ddp", "ddp", 4, 0, "cpu", false, 0);
  ddp.set_samples_per_sec(2400);
  ddp.set_dilation(5);
  ddp.set_forward_ms(500);
  ddp.set_median_step_ms(1000);
  ddp.set_compute_ms(900);
  ddp.set_comm_ms(80);
  ddp.set_wait_ms(20);
  std::vector<ReportPoint> points = BuildPoints({single, ddp});
  ASSERT_EQ(points.size(), 2u);
  EXPECT_NEAR(points[1].speedup, 2400.0 * 1000 / 820 / 1000, 1e-9);
  EXPECT_NEAR(points[1].paced_step_ms, 820, 1e-9);
  EXPECT_NEAR(points[1].paced_compute_ms, 720, 1e-9);
  EXPECT_NEAR(StepForModel(points[1]), 820, 1e-9);
  EXPECT_NEAR(ComputeAtSinglePace(points[1]), 720, 1e-9);
  EXPECT_NEAR(points[0].paced_step_ms, 1024, 1e-9);  // The single at its own pace.
  // Its 100 ms of communication and waiting on links shaped for d = 5: 20 ms at the
  // cluster.
  EXPECT_NEAR(points[1].cluster_comm_ms, 20, 1e-9);
  // With links (a network on record), the cost model sees the link part at the
  // matrix's reference d, the median cell's (here the DDP cell's own, 5): 820 again.
  // A second DDP cell at d = 10 (its links twice as slow), the reference d = 10 (the
  // upper median of 5 and 10): the first's 100 ms of links count 200, the second's as
  // measured.
  CellResult with_links = ddp;
  with_links.set_network("bw=100mbit");
  CellResult slower = with_links;
  slower.set_label("ddp2");
  slower.set_cell("ddp2-n4-r0");
  slower.set_dilation(10);
  points = BuildPoints({single, with_links, slower});
  ASSERT_EQ(points.size(), 3u);
  EXPECT_NEAR(points[1].model_step_ms, 200 + 720, 1e-9);
  EXPECT_NEAR(points[2].model_step_ms, 100 + 720, 1e-9);
  EXPECT_NEAR(StepForModel(points[1]), 920, 1e-9);
  EXPECT_NEAR(MedianLinkDilation({single, with_links, slower}), 10, 1e-9);
  // A PS cell's forward shares its node with the arriving parameters: its probes' d,
  // 2400 x 5 / (1000 x 8), whatever its forward.
  CellResult ps = ddp;
  ps.set_kind("ps");
  ps.set_label("ps");
  points = BuildPoints({single, ps});
  ASSERT_EQ(points.size(), 2u);
  EXPECT_NEAR(points[1].speedup, 1.5, 1e-9);
  EXPECT_EQ(points[1].paced_step_ms, 0);
  // No forward pass on record (older results): the probes' d likewise.
  ddp.set_forward_ms(0);
  points = BuildPoints({single, ddp});
  EXPECT_NEAR(points[1].speedup, 1.5, 1e-9);
  EXPECT_EQ(points[1].paced_step_ms, 0);
  EXPECT_NEAR(StepForModel(points[1]), 1000, 1e-9);
  // No dilation (no cluster): the host's throughputs as they are, 2400 / 1000.
  single.set_dilation(0);
  ddp.set_dilation(0);
  ddp.set_forward_ms(500);
  points = BuildPoints({single, ddp});
  EXPECT_NEAR(points[1].speedup, 2.4, 1e-9);
  EXPECT_EQ(points[1].paced_step_ms, 0);
}

// The single's pace by its probes is d = 10 (one probe: its own); a cell whose forward
// is 1.3x the single's ran at d = 13 while its link was shaped for d = 10: 30% off,
// past 15%. One at 1.1x (d = 11 against a link for 10.5) is 4.8% off. Past a quarter of
// the cells strayed, the report disowns the run.
// One single that ran while the host was slow (forward 160 ms where its probe and the
// other rounds' say 100 at d = 10) does not make its round's DDP cell look strayed: the
// forward per unit of d is the median over the rounds, 10 ms.
TEST(LinkPaceDriftTest, OneSlowSingleDoesNotStrayItsRound) {
  std::vector<CellResult> cells;
  for (int round = 0; round < 3; ++round) {
    CellResult single = Result("single", "single", 1, round, "cpu", false, 0);
    single.set_cell(absl::StrCat("single-r", round));
    single.set_forward_ms(round == 2 ? 160 : 100);
    single.set_dilation(10);
    CellResult ddp = Result("ddp", "ddp", 4, round, "cpu", false, 0);
    ddp.set_cell(absl::StrCat("ddp-r", round));
    ddp.set_forward_ms(102);
    ddp.set_dilation(10);
    cells.push_back(single);
    cells.push_back(ddp);
  }
  const LinkPaceDrift drift = MeasureLinkPaceDrift(cells, 0.15);
  EXPECT_EQ(drift.cells, 3);
  EXPECT_EQ(drift.strayed, 0);
  EXPECT_NEAR(drift.worst, 0.02, 1e-9);
}

TEST(LinkPaceDriftTest, CountsCellsWhosePaceLeftTheirLinks) {
  std::vector<CellResult> cells;
  const auto add = [&cells](const char* kind, int workers, double forward, double d) {
    CellResult r = Result(kind, kind, workers, 0, "cpu", false, 0);
    r.set_cell(absl::StrCat(kind, "-n", workers));
    r.set_samples_per_sec(1000);
    r.set_forward_ms(forward);
    r.set_dilation(d);
    cells.push_back(r);
  };
  add("single", 1, 100, 10);
  add("ddp", 2, 130, 10);
  add("ddp", 4, 110, 10.5);
  const LinkPaceDrift drift = MeasureLinkPaceDrift(cells, 0.15);
  EXPECT_EQ(drift.cells, 2);
  EXPECT_EQ(drift.strayed, 1);
  EXPECT_NEAR(drift.worst, 0.3, 1e-9);
  EXPECT_EQ(drift.worst_cell, "ddp-n2");
  const std::string disowned = LinkPaceSentence(cells);  // 1 of 2: past a quarter.
  EXPECT_NE(disowned.find("**The host did not hold the profile while the cells ran: 1 of 2 DDP cells"),
            std::string::npos)
      << disowned;
  cells[1].set_forward_ms(105);  // d = 10.5 against 10: 5%.
  const std::string held = LinkPaceSentence(cells);
  EXPECT_NE(held.find("Every DDP cell computed within 15% of the pace its links were shaped for"), std::string::npos)
      << held;
  EXPECT_EQ(held.find("**"), std::string::npos);
  for (CellResult& r : cells) r.set_forward_ms(0);  // No forward passes: nothing to say.
  EXPECT_EQ(LinkPaceSentence(cells), "");
}

// Where compare recorded a DDP cell's pace against its own probe (CellResult.pace_off),
// the guard reads that: the singles' forward per d says ddp-n2 strayed by 30%, but
// compare ran it again and kept a run 4% off its probe; ddp-n4 was kept 20% off.
TEST(LinkPaceDriftTest, APaceCompareRecordedIsTheOneRead) {
  std::vector<CellResult> cells;
  const auto add = [&cells](const char* kind, int workers, double forward, double d) {
    CellResult r = Result(kind, kind, workers, 0, "cpu", false, 0);
    r.set_cell(absl::StrCat(kind, "-n", workers));
    r.set_forward_ms(forward);
    r.set_dilation(d);
    cells.push_back(r);
  };
  add("single", 1, 100, 10);
  add("ddp", 2, 130, 10);
  cells.back().set_pace_off(0.04);
  add("ddp", 4, 100, 10);
  cells.back().set_pace_off(-0.2);
  const LinkPaceDrift drift = MeasureLinkPaceDrift(cells, 0.15);
  EXPECT_EQ(drift.cells, 2);
  EXPECT_EQ(drift.strayed, 1);
  EXPECT_NEAR(drift.worst, 0.2, 1e-9);
  EXPECT_EQ(drift.worst_cell, "ddp-n4");
  cells[1].set_pace_attempts(3);
  const std::string said = LinkPaceSentence(cells);
  EXPECT_NE(said.find("1 of 2 DDP cells computed more than 15%"), std::string::npos) << said;
  EXPECT_NE(said.find("compare ran 1 of them again, 2 more runs, each on a fresh probe: its first run's pace"), std::string::npos) << said;
  cells.erase(cells.begin());  // No single cell: the recorded paces still count.
  EXPECT_EQ(MeasureLinkPaceDrift(cells, 0.15).cells, 2);
}

TEST(BuildPointsTest, LateRanksNamedByMostRepeats) {
  std::vector<CellResult> cells;
  for (int repeat = 0; repeat < 3; ++repeat) {
    CellResult r = Result("ps", "ps", 4, repeat, "cpu", false, 0);
    r.set_ps_sync("ssp:2");
    r.add_late_ranks(2);
    r.set_late_named(repeat < 2);  // Two of three repeats name worker 2.
    r.set_late_share(repeat == 0 ? 0.9 : 0.8);
    r.set_late_wait_ms(repeat == 0 ? 30 : 20);
    r.set_late_wait_fraction(0.25);
    cells.push_back(r);
  }
  std::vector<ReportPoint> points = BuildPoints(cells);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].ps_sync, "ssp:2");
  EXPECT_EQ(points[0].late_ranks, std::vector<int>({2}));
  EXPECT_DOUBLE_EQ(points[0].late_share, 0.9);  // Upper median of the naming repeats.
  EXPECT_DOUBLE_EQ(points[0].late_wait_ms, 30);
  EXPECT_DOUBLE_EQ(points[0].late_wait_fraction, 0.25);
  // One of three: not named.
  cells[1].set_late_named(false);
  points = BuildPoints(cells);
  EXPECT_TRUE(points[0].late_ranks.empty());
}

// Post-processing of synthetic step records: who was late, how often, what it cost.

// DDP rank records: rank r waits wait(step, r) ms in the step's all-reduces; steps of
// `step_ms`.
template <typename F>
std::vector<std::vector<StepMetrics>> DdpRecords(int world, int steps, double step_ms, F wait) {
  std::vector<std::vector<StepMetrics>> ranks(world);
  for (int r = 0; r < world; ++r) {
    for (int s = 0; s < steps; ++s) {
      StepMetrics m;
      m.set_step(100 + s);
      m.set_rank(r);
      m.set_role("rank");
      m.set_step_ms(step_ms);
      m.set_allreduce_wait_ms(wait(s, r));
      ranks[r].push_back(m);
    }
  }
  return ranks;
}

// A deterministic jitter in [0, 1) per (step, process).
double Jitter(int step, int process) {
  uint32_t x = static_cast<uint32_t>(step * 7919 + process * 104729 + 12345);
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return (x % 10007) / 10007.0;
}

TEST(LateRanksTest, DdpNamesTheRankThatWaitsLeast) {
  // Rank 3 ends backward ~40 ms after the others: it waits ~2 ms, they ~42 ms.
  const auto records = DdpRecords(4, 50, 150, [](int s, int r) {
    return (r == 3 ? 2.0 : 42.0) + Jitter(s, r) + (r == 3 && s == 7 ? 60 : 0);  // One odd step.
  });
  const LateRanks late = FindLateDdpRanks(records);
  EXPECT_TRUE(late.named);
  EXPECT_EQ(late.ranks, std::vector<int>({3}));
  EXPECT_EQ(late.steps, 50);
  EXPECT_DOUBLE_EQ(late.share, 49.0 / 50);
  EXPECT_NEAR(late.wait_ms, 40, 1);
  EXPECT_NEAR(late.wait_fraction, 40.0 / 150, 0.01);
}

TEST(LateRanksTest, DdpTwoRanksOfOneSlowNode) {
  // Ranks 2 and 3 share a slow node and take turns being last.
  const auto records = DdpRecords(4, 40, 100, [](int s, int r) {
    if (r < 2) return 30.0 + Jitter(s, r);
    return (r == 2 + s % 2 ? 1.0 : 3.0) + Jitter(s, r);
  });
  const LateRanks late = FindLateDdpRanks(records);
  EXPECT_TRUE(late.named);
  EXPECT_EQ(late.ranks, std::vector<int>({2, 3}));
  EXPECT_DOUBLE_EQ(late.share, 1.0);
  EXPECT_NEAR(late.wait_ms, 29, 1);
}

TEST(LateRanksTest, DdpEvenRanksNameNobody) {
  // Equal ranks: who waits least is chance, and the waits differ by jitter only.
  for (int world : {2, 3, 4, 8}) {
    const auto records = DdpRecords(world, 60, 50, [](int s, int r) { return 10 + 2 * Jitter(s, r); });
    const LateRanks late = FindLateDdpRanks(records);
    EXPECT_FALSE(late.named) << "world " << world << ": share " << late.share;
    EXPECT_EQ(late.ranks.size(), 1u);  // The most often last, for the record.
  }
}

TEST(LateRanksTest, DdpAlwaysLastButNoRealWaitNamesNobody) {
  // Rank 1 always waits least, but only 0.3 ms less: below noise.
  const auto records = DdpRecords(2, 30, 20, [](int s, int r) { return r == 1 ? 5.0 : 5.3; });
  const LateRanks late = FindLateDdpRanks(records);
  EXPECT_EQ(late.ranks, std::vector<int>({1}));
  EXPECT_DOUBLE_EQ(late.share, 1.0);
  EXPECT_FALSE(late.named);
  // 3 ms of a 200 ms step: above 1 ms, below 5% of the step.
  const auto slow_steps = DdpRecords(2, 30, 200, [](int s, int r) { return r == 1 ? 5.0 : 8.0; });
  EXPECT_FALSE(FindLateDdpRanks(slow_steps).named);
}

TEST(LateRanksTest, DdpTwoRanksTakingTurnsNameNobody) {
  const auto records = DdpRecords(2, 40, 100, [](int s, int r) { return r == s % 2 ? 1.0 : 40.0; });
  const LateRanks late = FindLateDdpRanks(records);
  EXPECT_DOUBLE_EQ(late.share, 0.5);
  EXPECT_FALSE(late.named);
}

TEST(LateRanksTest, DdpComparesOnlyStepsEveryRankRecordedAndNeedsEnough) {
  auto records = DdpRecords(2, 8, 100, [](int s, int r) { return r == 0 ? 1.0 : 40.0; });
  records[1].erase(records[1].begin(), records[1].begin() + 4);
  LateRanks late = FindLateDdpRanks(records);
  EXPECT_EQ(late.steps, 4);
  EXPECT_EQ(late.ranks, std::vector<int>({0}));
  EXPECT_FALSE(late.named);  // Fewer than 5 steps.
  records[1].clear();
  EXPECT_EQ(FindLateDdpRanks(records).steps, 0);
  EXPECT_TRUE(FindLateDdpRanks({records[0]}).ranks.empty());  // One rank: nothing to compare.
}

// PS worker records (pull_ms = pull(step, worker)) and one shard record per step and
// shard saying who pushed last (late(step, shard)).
template <typename P, typename L>
void PsRecords(int workers, int shards, int steps, double step_ms, P pull, L late,
               std::vector<std::vector<StepMetrics>>* worker_records,
               std::vector<std::vector<StepMetrics>>* shard_records) {
  worker_records->assign(workers, {});
  shard_records->assign(shards, {});
  for (int s = 0; s < steps; ++s) {
    for (int w = 0; w < workers; ++w) {
      StepMetrics m;
      m.set_step(s);
      m.set_rank(w);
      m.set_role("worker");
      m.set_step_ms(step_ms);
      m.set_pull_ms(pull(s, w));
      (*worker_records)[w].push_back(m);
    }
    for (int k = 0; k < shards; ++k) {
      StepMetrics m;
      m.set_step(s);
      m.set_rank(k);
      m.set_role("server");
      m.set_late_worker(late(s, k));
      (*shard_records)[k].push_back(m);
    }
  }
}

TEST(LateRanksTest, PsBspNamesTheWorkerThatPushedLast) {
  std::vector<std::vector<StepMetrics>> workers, shards;
  // Worker 2 pushes last on both shards (shard 1 once disagrees); the others wait ~25 ms
  // more than it for the next step's parameters.
  PsRecords(3, 2, 30, 100, [](int s, int w) { return (w == 2 ? 3.0 : 28.0) + Jitter(s, w); },
            [](int s, int k) { return k == 1 && s == 5 ? 0 : 2; }, &workers, &shards);
  const LateRanks late = FindLatePsWorkers(workers, shards);
  EXPECT_TRUE(late.named);
  EXPECT_EQ(late.ranks, std::vector<int>({2}));
  EXPECT_EQ(late.steps, 29);  // Step 0's pull follows no recorded step.
  EXPECT_DOUBLE_EQ(late.share, 1.0);
  EXPECT_NEAR(late.wait_ms, 25, 1);
  EXPECT_NEAR(late.wait_fraction, 0.25, 0.01);
}

TEST(LateRanksTest, PsAspNamesNobody) {
  // Worker 1 pushes last every step, but under ASP nobody waits for it.
  std::vector<std::vector<StepMetrics>> workers, shards;
  PsRecords(4, 1, 30, 100, [](int s, int w) { return 0.2 * Jitter(s, w); },
            [](int s, int k) { return 1; }, &workers, &shards);
  const LateRanks late = FindLatePsWorkers(workers, shards);
  EXPECT_EQ(late.ranks, std::vector<int>({1}));
  EXPECT_DOUBLE_EQ(late.share, 1.0);
  EXPECT_FALSE(late.named);
}

TEST(LateRanksTest, PsWithoutShardRecordsUsesTheShortestPull) {
  std::vector<std::vector<StepMetrics>> workers, shards;
  PsRecords(2, 0, 20, 50, [](int s, int w) { return w == 0 ? 1.0 : 21.0; },
            [](int s, int k) { return 0; }, &workers, &shards);
  const LateRanks late = FindLatePsWorkers(workers, {});
  EXPECT_TRUE(late.named);
  EXPECT_EQ(late.ranks, std::vector<int>({0}));
  EXPECT_EQ(late.steps, 20);
  EXPECT_NEAR(late.wait_ms, 20, 1e-9);
}

TEST(HostHeldClusterTest, DriftBeyondTheBoundIsSaidInBold) {
  DilationRecord d;
  d.set_cluster("gige-cpu");
  d.set_factor(2.5);
  d.set_host_compute_ms(200);
  ReportPoint single;
  single.kind = "single";
  single.ok_repeats = 1;
  single.compute_ms = 210;  // +5%: held.
  std::string held = HostHeldCluster(d, {single});
  EXPECT_NE(held.find("The host held cluster gige-cpu's profile"), std::string::npos) << held;
  EXPECT_EQ(held.find("**"), std::string::npos);
  single.compute_ms = 260;  // +30%: a busier host.
  std::string missed = HostHeldCluster(d, {single});
  EXPECT_NE(missed.find("**The host did not hold cluster gige-cpu's profile"), std::string::npos) << missed;
  EXPECT_NE(missed.find("+30%"), std::string::npos) << missed;
  EXPECT_NE(missed.find("these speedups are not gige-cpu's"), std::string::npos) << missed;
  EXPECT_NE(HostHeldCluster(d, {}).find("cannot be checked"), std::string::npos);
}

// Cells that each measured d: the median cell's d and links stand for the matrix, the
// host step scaled alike, the description the range; one d throughout: the record as
// it was.
TEST(MedianCellDilationTest, TheMedianCellStandsForTheMatrix) {
  DilationRecord first;
  first.set_factor(5);
  first.set_network("bw=200000kbit");
  first.set_host_compute_ms(500);
  first.set_host_step_ms(510);
  first.set_description("d = 5");
  std::vector<CellResult> results;
  const std::pair<double, const char*> cells[] = {{5, "bw=200000kbit"}, {6, "bw=166667kbit"}, {4, "bw=250000kbit"}};
  for (const auto& [d, links] : cells) {
    CellResult c;
    c.set_dilation(d);
    c.set_network(links);
    results.push_back(c);
  }
  const DilationRecord median = MedianCellDilation(first, results);
  EXPECT_EQ(median.factor(), 5);
  EXPECT_EQ(median.network(), "bw=200000kbit");
  EXPECT_NE(median.description().find("re-measured before each cell: d = 4.00 to 6.00 over 3 cells with links, median 5.00"),
            std::string::npos)
      << median.description();
  results[0].set_dilation(7);  // 4 / 6 / 7: the median cell is the one at 6.
  const DilationRecord moved = MedianCellDilation(first, results);
  EXPECT_EQ(moved.factor(), 6);
  EXPECT_EQ(moved.network(), "bw=166667kbit");
  EXPECT_NEAR(moved.host_compute_ms(), 600, 1e-9);
  EXPECT_NEAR(moved.host_step_ms(), 612, 1e-9);
  for (CellResult& c : results) c.set_dilation(5);  // One d throughout.
  EXPECT_EQ(MedianCellDilation(first, results).description(), "d = 5");
}

}  // namespace
}  // namespace ringside
