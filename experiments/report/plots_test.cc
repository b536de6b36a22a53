#include "experiments/report/plots.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;

ReportPoint Point(const std::string& label, int workers) {
  ReportPoint p;
  p.label = label;
  p.kind = label == "single" ? "single" : label;
  p.workers = workers;
  p.ok_repeats = 1;
  p.step_ms = 1;
  p.samples_per_sec = 100;
  p.speedup = 0.5;
  p.efficiency = 0.5 / workers;
  p.wall_s = 3;
  p.test_accuracy = 0.8;
  return p;
}

// Every plot draws a strategy in one colour: its index in the points' order of labels.
TEST(PlotScriptTest, OneColourPerStrategyInEveryPlot) {
  ReportData data;
  data.points = {Point("single", 1), Point("ps", 2), Point("ddp", 2)};
  const std::string script = PlotScript(data);
  // Line plots and the step-time plot: ps is colour 2, ddp colour 3.
  EXPECT_THAT(script, HasSubstr("$speedup0 using 1:2 with linespoints lw 2 pt 7 lc 2 title 'ps'"));
  EXPECT_THAT(script, HasSubstr("$speedup1 using 1:2 with linespoints lw 2 pt 7 lc 3 title 'ddp'"));
  EXPECT_THAT(script, HasSubstr("$stepm2 using 1:2 with linespoints lw 2 pt 7 lc 3 title 'ddp'"));
  // The accuracy plot colours each point by the same index (column 4, lc variable).
  EXPECT_THAT(script, HasSubstr("3 0.8 \"ps n2\" 2\n"));
  EXPECT_THAT(script, HasSubstr("3 0.8 \"ddp n2\" 3\n"));
  EXPECT_THAT(script, HasSubstr("using 1:2:4 with points pt 7 ps 1.2 lc variable"));
  // The breakdown's parts do not borrow the strategies' indexed colours.
  EXPECT_THAT(script, HasSubstr("using 3 lc rgb '#a6cee3' title 'compute'"));
}

TEST(PlotScriptTest, TitlesSayWeakOrStrongScalingAndTheSpeedupAxesAreLogLog) {
  ReportData data;
  data.points = {Point("single", 1), Point("ddp", 2)};
  EXPECT_THAT(PlotScript(data), HasSubstr("Speedup vs workers (weak scaling, log-log axes)"));
  data.strong_scaling = true;
  const std::string script = PlotScript(data);
  EXPECT_THAT(script, HasSubstr("Speedup vs workers (strong scaling, log-log axes)"));
  // y = x is straight: both axes logarithmic while the speedup plot is drawn.
  const size_t speedup = script.find("set output 'speedup.svg'");
  const size_t plot = script.find("plot $speedup0", speedup);
  const std::string setup = script.substr(speedup, plot - speedup);
  EXPECT_THAT(setup, HasSubstr("set logscale x 2"));
  EXPECT_THAT(setup, HasSubstr("set logscale y 2"));
}

// The emulation in force is stated at the foot of every plot: one label, set before
// the first plot, that gnuplot keeps for the ones after it.
TEST(PlotScriptTest, EveryPlotStatesTheEmulation) {
  ReportData data;
  data.points = {Point("single", 1), Point("ddp", 2)};
  data.emulation_short = "emulated on one machine: 0.40 CPU/node, bw=1gbit links, 1 process/node";
  const std::string script = PlotScript(data);
  const size_t label = script.find("set label 1000 'emulated on one machine: 0.40 CPU/node, bw=1gbit links");
  ASSERT_NE(label, std::string::npos) << script;
  EXPECT_LT(label, script.find("set output"));
  EXPECT_EQ(script.find("unset label"), std::string::npos);
}

}  // namespace
}  // namespace ringside
