#include "experiments/report/points.h"

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

}  // namespace
}  // namespace ringside
