// The spread of a constant's repeats (calibration_spread.h) on synthetic repeats: the
// median kept, (max - min) / median, the warning above 20% and not below; the
// calibration file's new fields (repeats, spreads, the sweeps' largest messages) through
// a JSON round trip; a file from before they existed still loads; how far the automatic
// sweeps reach (SweepMaxBytes).
#include "experiments/costmodel/calibration_spread.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "experiments/costmodel/calibrate.h"
#include "experiments/costmodel/calibration_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;

ConstantSpread Summary(const std::string& name, std::vector<double> values) {
  absl::StatusOr<ConstantSpread> s = SummarizeRepeats(name, std::move(values));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : ConstantSpread();
}

TEST(Spread, A25PercentSpreadWarnsAndKeepsTheMedian) {
  // 100, 120, 95 us: median 100, spread (120 - 95) / 100 = 25%.
  const ConstantSpread s = Summary("allreduce.alpha_s", {100e-6, 120e-6, 95e-6});
  EXPECT_DOUBLE_EQ(s.median, 100e-6);
  EXPECT_DOUBLE_EQ(s.min, 95e-6);
  EXPECT_DOUBLE_EQ(s.max, 120e-6);
  EXPECT_NEAR(s.spread, 0.25, 1e-12);
  EXPECT_TRUE(IsUnsteady(s));
  EXPECT_EQ(SpreadWarning(s),
            "calibrate: warning: allreduce.alpha_s varies by 25% between repeats (100, 120, 95 us): "
            "the median 100 us is kept");
  EXPECT_EQ(DescribeSpread(s), "allreduce.alpha_s 100 us (min-max 95-120 us, 25%)");
}

TEST(Spread, A10PercentSpreadDoesNotWarn) {
  // 1.0, 1.05, 0.95 GB/s: spread 10%.
  const ConstantSpread s = Summary("push_pull.bytes_per_s", {1.0e9, 1.05e9, 0.95e9});
  EXPECT_DOUBLE_EQ(s.median, 1.0e9);
  EXPECT_NEAR(s.spread, 0.10, 1e-12);
  EXPECT_FALSE(IsUnsteady(s));
  EXPECT_EQ(SpreadWarning(s), "");
  EXPECT_EQ(DescribeSpread(s), "push_pull.bytes_per_s 1 GB/s (min-max 0.95-1.05 GB/s, 10%)");
}

TEST(Spread, TheThresholdIsStrictAndUnitsFollowTheName) {
  // Exactly 20% is still steady; just above is not.
  EXPECT_FALSE(IsUnsteady(Summary("compute_s", {100, 110, 90})));
  EXPECT_TRUE(IsUnsteady(Summary("compute_s", {100, 110.001, 90})));
  EXPECT_THAT(DescribeSpread(Summary("compute_s", {0.1})), HasSubstr("100 ms"));
  EXPECT_THAT(DescribeSpread(Summary("reduce_s_per_byte", {1e-10})), HasSubstr("0.1 ns/B (1 repeat)"));
  // An even count keeps the upper median (a value measured, as Median does).
  EXPECT_DOUBLE_EQ(Summary("backward_s", {4, 1, 3, 2}).median, 3);
}

TEST(Spread, EdgeCases) {
  const ConstantSpread one = Summary("compute_s", {0.2});
  EXPECT_EQ(one.spread, 0);
  EXPECT_FALSE(IsUnsteady(one));
  // A median of 0 (an alpha clamped to 0 twice) with a non-zero repeat: unbounded.
  const ConstantSpread zero = Summary("allreduce.alpha_s", {0, 0, 5e-6});
  EXPECT_TRUE(std::isinf(zero.spread));
  EXPECT_TRUE(IsUnsteady(zero));
  EXPECT_THAT(SpreadWarning(zero), HasSubstr("varies by inf%"));
  EXPECT_EQ(Summary("allreduce.alpha_s", {0, 0}).spread, 0);
  EXPECT_EQ(SummarizeRepeats("compute_s", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SummarizeRepeats("compute_s", {1, -1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SummarizeRepeats("compute_s", {1, NAN}).status().code(), absl::StatusCode::kInvalidArgument);
}

Calibration SomeCalibration() {
  Calibration c;
  c.compute_s = 0.12;
  c.backward_s = 0.066;
  c.update_s_per_byte = 1.3e-10;
  c.reduce_s_per_byte = 7.6e-11;
  c.model_bytes = 2329704;
  c.push_pull = {117e-6, 1.467e9};
  c.allreduce = {52e-6, 1.134e9};
  c.model = "cnn:lenet";
  c.batch = 256;
  c.threads = 1;
  c.node_cpus = 0.4;
  return c;
}

TEST(SpreadJson, RoundTripOfTheNewFields) {
  CalibrationMeasurement m;
  m.repeats = 3;
  m.spreads = {Summary("compute_s", {0.12, 0.1216, 0.1195}),
               Summary("allreduce.alpha_s", {50.9e-6, 51.9e-6, 68.8e-6})};
  m.push_pull_max_bytes = 16 << 20;
  m.allreduce_max_bytes = 128 << 20;
  m.busy_cpus_elsewhere = 0.75;
  const std::string json = CalibrationToJson(SomeCalibration(), m);
  EXPECT_THAT(json, HasSubstr("\"repeats\": 3"));
  EXPECT_THAT(json, HasSubstr("\"spreads\""));
  CalibrationMeasurement back;
  absl::StatusOr<Calibration> c = CalibrationFromJson(json, &back);
  ASSERT_TRUE(c.ok()) << c.status() << "\n" << json;
  EXPECT_EQ(c->compute_s, 0.12);
  EXPECT_EQ(c->node_cpus, 0.4);
  EXPECT_EQ(back.repeats, 3);
  EXPECT_EQ(back.push_pull_max_bytes, 16 << 20);
  EXPECT_EQ(back.allreduce_max_bytes, 128 << 20);
  EXPECT_EQ(back.busy_cpus_elsewhere, 0.75);
  ASSERT_EQ(back.spreads.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.spreads[i].name, m.spreads[i].name);
    EXPECT_EQ(back.spreads[i].values, m.spreads[i].values);
    EXPECT_EQ(back.spreads[i].median, m.spreads[i].median);
    EXPECT_EQ(back.spreads[i].spread, m.spreads[i].spread);
  }
  EXPECT_TRUE(IsUnsteady(back.spreads[1]));
  // The plain reader ignores them.
  EXPECT_TRUE(CalibrationFromJson(json).ok());
}

TEST(SpreadJson, AFileFromBeforeRepeatsStillLoads) {
  // As written by ringside before repeats and spreads were recorded.
  const std::string old_file = R"({
 "compute_s": 0.159221,
 "backward_s": 0.086934,
 "update_s_per_byte": 1.8285e-10,
 "reduce_s_per_byte": 1.22e-10,
 "model_bytes": 2329704,
 "push_pull_per_call_s": 0,
 "push_pull": {"alpha_s": 6.34e-05, "bytes_per_s": 855000000},
 "allreduce": {"alpha_s": 7.88e-05, "bytes_per_s": 986000000},
 "halving_doubling": {"alpha_s": 0, "bytes_per_s": 0},
 "model": "cnn:lenet",
 "batch": 256,
 "threads": 1
})";
  CalibrationMeasurement m;
  m.repeats = 7;  // Overwritten.
  absl::StatusOr<Calibration> c = CalibrationFromJson(old_file, &m);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->compute_s, 0.159221);
  EXPECT_EQ(c->allreduce.alpha_s, 7.88e-05);
  EXPECT_EQ(m.repeats, 0);
  EXPECT_TRUE(m.spreads.empty());
  EXPECT_EQ(m.push_pull_max_bytes, 0);
  // And one without the spreads written by CalibrationToJson(c) alone reads back empty.
  CalibrationMeasurement none;
  ASSERT_TRUE(CalibrationFromJson(CalibrationToJson(*c), &none).ok());
  EXPECT_EQ(none.repeats, 0);
  EXPECT_TRUE(none.spreads.empty());
}

TEST(SpreadJson, RejectsBadSpreads) {
  const std::string head =
      R"({"compute_s": 1, "push_pull": {"alpha_s": 0, "bytes_per_s": 1},
          "allreduce": {"alpha_s": 0, "bytes_per_s": 1}, )";
  for (const std::string& bad : {
           head + R"("repeats": -1})",
           head + R"("spreads": [{"name": "compute_s"}]})",           // no values
           head + R"("spreads": [{"values": [1, 2]}]})",              // no name
           head + R"("spreads": [{"name": "compute_s", "values": [-1]}]})",
           head + R"("allreduce_max_bytes": -5})",
           head + R"("busy_cpus_elsewhere": -0.5})",
           head + R"("spreads": [{"name": "x", "values": [1], "typo": 1}]})",
       }) {
    EXPECT_EQ(CalibrationFromJson(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SweepReach, TheAutomaticSweepReachesTheModelUpToTheCap) {
  constexpr int64_t kKiB = 1024, kMiB = 1024 * 1024;
  // LeNet's 2.33 MB: the default 16 MiB, whatever the step.
  EXPECT_EQ(SweepMaxBytes(0, 4 * kKiB, 4, 2.33e6), 16 * kMiB);
  EXPECT_EQ(SweepMaxBytes(0, 4 * kKiB, 2, 2.33e6), 16 * kMiB);
  // 103 MB: the sweep's next size, 128 MiB by x2, 256 MiB by x4.
  EXPECT_EQ(SweepMaxBytes(0, 4 * kKiB, 2, 103e6), 128 * kMiB);
  EXPECT_EQ(SweepMaxBytes(0, 4 * kKiB, 4, 103e6), 256 * kMiB);
  // 553 MB: capped at 256 MiB (and said to be extrapolated).
  EXPECT_EQ(SweepMaxBytes(0, 4 * kKiB, 2, 553e6), kMaxSweepBytes);
  EXPECT_EQ(SweepMaxBytes(0, 4 * kKiB, 4, 553e6), kMaxSweepBytes);
  // Asked for: as asked.
  EXPECT_EQ(SweepMaxBytes(4 * kMiB, 4 * kKiB, 2, 103e6), 4 * kMiB);
}

}  // namespace
}  // namespace ringside
