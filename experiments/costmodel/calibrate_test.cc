// `ringside calibrate` end to end on the CNN (the model the text-parsing calibrate could
// not measure), with a tiny budget: every constant measured in two repeats and kept as
// their median, the byte count the model's own, the provenance and the spreads recorded
// and surviving the file's round trip, one progress line per phase of each round (then
// one per constant) without carriage returns; a sweep below the model's size said so;
// bad options and models refused before measuring.
#include "experiments/costmodel/calibrate.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/costmodel/calibration_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

CalibrateOptions TinyBudget(const std::string& model, int batch) {
  CalibrateOptions o;
  o.model = model;
  o.batch = batch;
  o.threads = 1;
  o.warmup_steps = 1;
  o.steps = 3;
  o.repeats = 3;
  o.calibration_repeats = 2;
  // Big enough that the transfer, not the shard's SGD or noise, sets the sweeps' slope.
  o.max_message_bytes = 4 << 20;
  return o;
}

std::string ReadBack(FILE* f) {
  std::rewind(f);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  return text;
}

TEST(Calibrate, MeasuresTheCnnFromTheModelItself) {
  CalibrateOptions o = TinyBudget("cnn:lenet", 16);
  FILE* progress = std::tmpfile();
  ASSERT_NE(progress, nullptr);
  o.progress = progress;
  absl::StatusOr<CalibrationRun> run = CalibrateWithSpreads(o);
  const std::string lines = ReadBack(progress);
  std::fclose(progress);
  ASSERT_TRUE(run.ok()) << run.status() << "\n" << lines;
  const Calibration* c = &run->calibration;

  // LeNet: conv 1*25*32+32, conv 32*25*64+64, fc 1024*512+512, fc 512*10+10 parameters.
  EXPECT_EQ(c->model_bytes, 4.0 * (832 + 51264 + 524800 + 5130));
  EXPECT_EQ(c->model, "cnn:lenet");
  EXPECT_EQ(c->batch, 16);
  EXPECT_EQ(c->threads, 1);
  EXPECT_GT(c->compute_s, 0);
  EXPECT_GT(c->backward_s, 0);
  EXPECT_LE(c->backward_s, c->compute_s);
  EXPECT_GT(c->update_s_per_byte, 0);
  EXPECT_GT(c->reduce_s_per_byte, 0);
  EXPECT_GT(c->push_pull.bytes_per_s, 0);
  EXPECT_GT(c->push_pull_tcp.bytes_per_s, 0);  // The same path over the TCP data plane.
  EXPECT_GT(c->allreduce.bytes_per_s, 0);
  // Sending costs CPU, but far less than a microsecond a byte (loopback TCP moves GB/s).
  EXPECT_GT(c->allreduce_cpu_s_per_byte, 0);
  EXPECT_LT(c->allreduce_cpu_s_per_byte, 1e-7);
  // The codecs measured: a value's encode and decode take more than nothing and less
  // than a microsecond.
  for (double codec : {c->fp16_codec_s_per_value, c->bf16_codec_s_per_value, c->topk_codec_s_per_value}) {
    EXPECT_GT(codec, 0);
    EXPECT_LT(codec, 1e-6);
  }
  // PowerSGD's GEMMs: between 10 MFLOP/s and 10 TFLOP/s on one thread.
  EXPECT_GT(c->powersgd_codec_s_per_flop, 1e-13);
  EXPECT_LT(c->powersgd_codec_s_per_flop, 1e-7);
  // Raw TCP measured beside the paths (a loopback socket moves more than 10 MB/s).
  EXPECT_GT(c->raw_tcp_bytes_per_s, 1e7);
  EXPECT_TRUE(ValidateCalibration(*c).ok());
  EXPECT_TRUE(CheckCalibrationFits(*c, "cnn:lenet", 16).ok());

  // Every constant measured in two rounds, the median kept (the upper one of two: the
  // larger).
  const CalibrationMeasurement& m = run->measurement;
  EXPECT_EQ(m.repeats, 2);
  const std::vector<std::pair<std::string, double>> kept = {
      {"compute_s", c->compute_s},
      {"backward_s", c->backward_s},
      {"update_s_per_byte", c->update_s_per_byte},
      {"reduce_s_per_byte", c->reduce_s_per_byte},
      {"fp16_codec_s_per_value", c->fp16_codec_s_per_value},
      {"bf16_codec_s_per_value", c->bf16_codec_s_per_value},
      {"topk_codec_s_per_value", c->topk_codec_s_per_value},
      {"powersgd_codec_s_per_flop", c->powersgd_codec_s_per_flop},
      {"allreduce_cpu_s_per_byte", c->allreduce_cpu_s_per_byte},
      {"raw_tcp_bytes_per_s", c->raw_tcp_bytes_per_s},
      {"push_pull.alpha_s", c->push_pull.alpha_s},
      {"push_pull.bytes_per_s", c->push_pull.bytes_per_s},
      {"push_pull_tcp.alpha_s", c->push_pull_tcp.alpha_s},
      {"push_pull_tcp.bytes_per_s", c->push_pull_tcp.bytes_per_s},
      {"allreduce.alpha_s", c->allreduce.alpha_s},
      {"allreduce.bytes_per_s", c->allreduce.bytes_per_s},
  };
  ASSERT_EQ(m.spreads.size(), kept.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(m.spreads[i].name, kept[i].first);
    ASSERT_EQ(m.spreads[i].values.size(), 2u) << kept[i].first;
    EXPECT_EQ(m.spreads[i].median, kept[i].second) << kept[i].first;
    EXPECT_EQ(m.spreads[i].median, std::max(m.spreads[i].values[0], m.spreads[i].values[1]));
  }
  // The sweeps as asked: 4 KiB x4 and x2 up to 4 MiB, past the model's 2.33 MB.
  EXPECT_EQ(m.push_pull_max_bytes, 4 << 20);
  EXPECT_EQ(m.allreduce_max_bytes, 4 << 20);
  EXPECT_GE(m.busy_cpus_elsewhere, 0);  // Probed (whatever else runs beside the test).

  CalibrationMeasurement back_m;
  absl::StatusOr<Calibration> back = CalibrationFromJson(CalibrationToJson(*c, m), &back_m);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model, "cnn:lenet");
  EXPECT_EQ(back->batch, 16);
  EXPECT_EQ(back->compute_s, c->compute_s);
  EXPECT_EQ(back->allreduce_cpu_s_per_byte, c->allreduce_cpu_s_per_byte);
  EXPECT_EQ(back->push_pull_tcp.bytes_per_s, c->push_pull_tcp.bytes_per_s);
  EXPECT_EQ(back->push_pull_tcp.alpha_s, c->push_pull_tcp.alpha_s);
  EXPECT_EQ(back->raw_tcp_bytes_per_s, c->raw_tcp_bytes_per_s);
  EXPECT_EQ(back->fp16_codec_s_per_value, c->fp16_codec_s_per_value);
  EXPECT_EQ(back->bf16_codec_s_per_value, c->bf16_codec_s_per_value);
  EXPECT_EQ(back->topk_codec_s_per_value, c->topk_codec_s_per_value);
  EXPECT_EQ(back->powersgd_codec_s_per_flop, c->powersgd_codec_s_per_flop);
  EXPECT_EQ(back_m.repeats, 2);
  EXPECT_EQ(back_m.spreads.size(), kept.size());

  // Not a terminal: whole lines. Per phase of each round, one line with what, the
  // round, the expectation and the result; then a heading and one indented line per
  // constant (median, min-max, spread); then any warnings, naming the constant.
  EXPECT_EQ(lines.find('\r'), std::string::npos);
  std::vector<std::string> split = absl::StrSplit(lines, '\n', absl::SkipEmpty());
  std::vector<std::string> phases, constants;
  for (const std::string& line : split) {
    if (absl::StartsWith(line, "calibrate [")) {
      phases.push_back(line);
    } else if (absl::StartsWith(line, "  ")) {
      constants.push_back(line);
    } else if (!absl::StartsWith(line, "calibrate: every constant the median of 2 round(s)") &&
               !absl::StartsWith(line, "calibrate: push-pull over TCP at ") &&
               !absl::StartsWith(line, "calibrate: raw TCP ")) {
      // An unsteady constant, or the machine busy with other work before a round.
      EXPECT_THAT(line, StartsWith("calibrate: warning: ")) << lines;
      EXPECT_THAT(line, ::testing::AnyOf(HasSubstr("the median"), HasSubstr("other processes kept")));
    }
  }
  // The paths beside raw TCP, once, at the end.
  EXPECT_EQ(std::count_if(split.begin(), split.end(),
                          [](const std::string& l) {
                            return absl::StartsWith(l, "calibrate: raw TCP ") &&
                                   absl::StrContains(l, "; PS push-pull over gRPC ") &&
                                   absl::StrContains(l, ", over TCP ") && absl::StrContains(l, "; ring all-reduce ");
                          }),
            1)
      << lines;
  ASSERT_EQ(phases.size(), 10u) << lines;
  for (int i = 0; i < 10; ++i) {
    EXPECT_THAT(phases[i], StartsWith("calibrate [" + std::to_string(i % 5 + 1) + "/5] "));
    EXPECT_THAT(phases[i], HasSubstr("(round " + std::to_string(i / 5 + 1) + "/2; expect "));
    EXPECT_THAT(phases[i], ::testing::EndsWith(" s]"));
  }
  EXPECT_THAT(phases[0], HasSubstr("compute: cnn:lenet at batch 16, 1 thread(s), 1 + 3 steps"));
  EXPECT_THAT(phases[0], HasSubstr("M = 2.33 MB"));
  EXPECT_THAT(phases[2], HasSubstr("push-pull over gRPC"));
  EXPECT_THAT(phases[3], HasSubstr("push-pull over TCP"));
  EXPECT_THAT(phases[4], HasSubstr("all-reduce"));
  EXPECT_THAT(phases[5], HasSubstr("compute"));
  ASSERT_EQ(constants.size(), kept.size()) << lines;
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_THAT(constants[i], StartsWith("  " + kept[i].first + " "));
    EXPECT_THAT(constants[i], HasSubstr("(min-max "));
    EXPECT_THAT(constants[i], ::testing::EndsWith("%)"));
  }
  EXPECT_THAT(lines, Not(HasSubstr("extrapolated")));
  EXPECT_THAT(lines, HasSubstr("% of gRPC's rate and "));  // The two transports side by side.
}

// A model larger than the sweeps' largest message: each sweep says so in one line.
TEST(Calibrate, SaysWhenTheSweepsStopBelowTheModel) {
  // 1168660 parameters: 4.67 MB, past TinyBudget's 4 MiB sweeps (big enough that the
  // transfer sets their slope: sweeps of 256 KiB fitted no bandwidth on a busy host).
  CalibrateOptions o = TinyBudget("mlp:784-1470-10", 8);
  // The push-pull fits subtract the shard's SGD (phase 1's median): of 2 steps on a host
  // busy compiling, one descheduled step made it 9.3 ms where it takes 1-2 and left the
  // TCP sweep no bandwidth. The median of 7 rides out a few such steps.
  o.steps = 7;
  o.calibration_repeats = 1;
  FILE* progress = std::tmpfile();
  ASSERT_NE(progress, nullptr);
  o.progress = progress;
  absl::StatusOr<CalibrationRun> run = CalibrateWithSpreads(o);
  const std::string lines = ReadBack(progress);
  std::fclose(progress);
  ASSERT_TRUE(run.ok()) << run.status() << "\n" << lines;
  EXPECT_THAT(lines, HasSubstr("calibrate: the push-pull sweep reached 4 MiB, the model is 4.67 MB: "
                               "bandwidth extrapolated"));
  EXPECT_THAT(lines, HasSubstr("calibrate: the all-reduce sweep reached 4 MiB, the model is 4.67 MB: "
                               "bandwidth extrapolated"));
  EXPECT_THAT(lines, HasSubstr("compute_s "));
  EXPECT_THAT(lines, HasSubstr("(1 repeat)"));
  EXPECT_EQ(run->measurement.push_pull_max_bytes, 4 << 20);
}

TEST(Calibrate, RefusesBadOptionsAndModelsBeforeMeasuring) {
  CalibrateOptions o = TinyBudget("cnn:lenet", 0);
  EXPECT_EQ(Calibrate(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = TinyBudget("cnn:lenet", 8);
  o.max_message_bytes = 1024;
  EXPECT_EQ(Calibrate(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = TinyBudget("cnn:lenet", 8);
  o.calibration_repeats = 0;
  EXPECT_EQ(Calibrate(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = TinyBudget("mlp:100-10", 8);  // The input is 784 wide.
  FILE* progress = std::tmpfile();
  o.progress = progress;
  absl::Status s = Calibrate(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(ReadBack(progress), "");  // Refused before the first phase began.
  std::fclose(progress);
  EXPECT_EQ(Calibrate(TinyBudget("rnn:big", 8)).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringside
