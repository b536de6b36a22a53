#include "experiments/report/points.h"

#include <string>
#include <vector>

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

}  // namespace
}  // namespace ringside
