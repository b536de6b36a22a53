// `ringside calibrate` end to end on the CNN (the model the text-parsing calibrate could
// not measure), with a tiny budget: every constant measured, the byte count the model's
// own, the provenance recorded and surviving the file's round trip, one progress line
// per phase without carriage returns; bad options and models refused before measuring.
#include "experiments/costmodel/calibrate.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/costmodel/calibration_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

CalibrateOptions TinyBudget(const std::string& model, int batch) {
  CalibrateOptions o;
  o.model = model;
  o.batch = batch;
  o.threads = 1;
  o.warmup_steps = 1;
  o.steps = 3;
  o.repeats = 3;
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
  absl::StatusOr<Calibration> c = Calibrate(o);
  const std::string lines = ReadBack(progress);
  std::fclose(progress);
  ASSERT_TRUE(c.ok()) << c.status() << "\n" << lines;

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
  EXPECT_GT(c->allreduce.bytes_per_s, 0);
  EXPECT_TRUE(ValidateCalibration(*c).ok());
  EXPECT_TRUE(CheckCalibrationFits(*c, "cnn:lenet", 16).ok());

  absl::StatusOr<Calibration> back = CalibrationFromJson(CalibrationToJson(*c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model, "cnn:lenet");
  EXPECT_EQ(back->batch, 16);
  EXPECT_EQ(back->compute_s, c->compute_s);

  // Not a terminal: four whole lines, one per phase, each with what, the expectation
  // and the result.
  EXPECT_EQ(lines.find('\r'), std::string::npos);
  std::vector<std::string> split = absl::StrSplit(lines, '\n', absl::SkipEmpty());
  ASSERT_EQ(split.size(), 4u) << lines;
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(split[i], StartsWith("calibrate [" + std::to_string(i + 1) + "/4] "));
    EXPECT_THAT(split[i], HasSubstr("(expect "));
    EXPECT_THAT(split[i], ::testing::EndsWith(" s]"));
  }
  EXPECT_THAT(split[0], HasSubstr("compute: cnn:lenet at batch 16"));
  EXPECT_THAT(split[0], HasSubstr("M = 2.33 MB"));
  EXPECT_THAT(split[2], HasSubstr("push-pull"));
  EXPECT_THAT(split[3], HasSubstr("all-reduce"));
}

TEST(Calibrate, RefusesBadOptionsAndModelsBeforeMeasuring) {
  CalibrateOptions o = TinyBudget("cnn:lenet", 0);
  EXPECT_EQ(Calibrate(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = TinyBudget("cnn:lenet", 8);
  o.max_message_bytes = 1024;
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
