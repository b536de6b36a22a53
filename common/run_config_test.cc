#include "common/run_config.h"

#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace ringside {
namespace {

RunConfig Good() {
  RunConfig c;
  c.set_model("mlp:4-2");
  c.set_epochs(1);
  c.set_batch(8);
  c.set_lr(0.02f);
  c.set_grad_accum(1);
  return c;
}

TEST(ValidateRunConfigTest, NamesTheFlag) {
  EXPECT_TRUE(ValidateRunConfig(Good()).ok());
  RunConfig c = Good();
  c.set_batch(0);
  EXPECT_EQ(ValidateRunConfig(c).message(), "--batch must be >= 1, got 0");
  c = Good();
  c.set_lr(-0.5f);
  EXPECT_EQ(ValidateRunConfig(c).message(), "--lr must be >= 0, got -0.5");
  c = Good();
  c.set_grad_accum(0);
  EXPECT_EQ(ValidateRunConfig(c).message(), "--grad_accum must be >= 1, got 0");
  c = Good();
  c.set_threads(-1);
  EXPECT_EQ(ValidateRunConfig(c).message(), "--threads must be >= 0, got -1");
  c = Good();
  c.set_epochs(0);
  EXPECT_EQ(ValidateRunConfig(c).code(), absl::StatusCode::kInvalidArgument);
}

// Numerical safety (issue 23): settings that cannot give finite training.
TEST(ValidateRunConfigTest, RefusesNonFiniteSgdSettingsAndUnknownNanPolicies) {
  const float inf = std::numeric_limits<float>::infinity();
  RunConfig c = Good();
  c.set_lr(inf);
  EXPECT_EQ(ValidateRunConfig(c).message(),
            "--lr must be finite, got inf (training cannot stay finite)");
  c = Good();
  c.set_lr(1e30f);  // Finite: left to the checks during training.
  EXPECT_TRUE(ValidateRunConfig(c).ok());
  c = Good();
  c.set_momentum(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(ValidateRunConfig(c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ValidateRunConfig(c).message().find("--momentum must be finite"), std::string::npos);
  c = Good();
  c.set_weight_decay(-inf);
  EXPECT_NE(ValidateRunConfig(c).message().find("--weight_decay must be finite"),
            std::string::npos);
  c = Good();
  c.set_nan_policy("bogus");
  EXPECT_EQ(ValidateRunConfig(c).message(),
            "--nan_policy must be stop or skip_step, got 'bogus'");
  for (const char* policy : {"", "stop", "skip_step"}) {
    c = Good();
    c.set_nan_policy(policy);
    EXPECT_TRUE(ValidateRunConfig(c).ok()) << policy;
  }
  c = Good();
  c.set_nan_policy("skip_step");
  c.set_grad_accum(2);
  c.set_strategy("single");
  EXPECT_EQ(ValidateRunConfig(c).code(), absl::StatusCode::kInvalidArgument);
  c.set_strategy("ddp");
  EXPECT_TRUE(ValidateRunConfig(c).ok());
}

TEST(CheckSameConfigTest, NamesTheDifferingField) {
  const RunConfig a = Good();
  EXPECT_TRUE(CheckSameConfig(a, "rank 0", a, "rank 1").ok());
  EXPECT_EQ(ConfigDifference(a, a), "");
  RunConfig b = a;
  b.set_lr(0.5f);
  const absl::Status s = CheckSameConfig(a, "rank 0", b, "rank 1");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "rank 1 runs a different configuration than rank 0: modified: lr: 0.02 -> 0.5");
}

// --compress's names: the formats, top-k's fraction in (0, 1], PowerSGD's rank >= 1,
// error feedback on unless :no_ef; anything else one line naming it.
TEST(CompressionTest, ParsesEveryMethodAndRefusesBadValues) {
  absl::StatusOr<Compression> c = ParseCompressionSpec("none");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->method, Compression::Method::kNone);
  c = ParseCompressionSpec("bf16");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->method, Compression::Method::kWire);
  EXPECT_EQ(c->wire, WireFormat::kBf16);
  c = ParseCompressionSpec("topk:0.01");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, Compression::Method::kTopK);
  EXPECT_DOUBLE_EQ(c->topk_fraction, 0.01);
  EXPECT_TRUE(c->error_feedback);
  EXPECT_EQ(c->wire, WireFormat::kFp32);
  c = ParseCompressionSpec("topk:1:no_ef");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->error_feedback);
  c = ParseCompressionSpec("powersgd:4");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, Compression::Method::kPowerSgd);
  EXPECT_EQ(c->powersgd_rank, 4);
  EXPECT_TRUE(c->lossy());
  EXPECT_EQ(ParseCompression("powersgd:4").value(), WireFormat::kFp32);
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"zstd", "unknown --compress 'zstd' (expected none, fp16, bf16, topk:F or powersgd:R)"},
           {"topk", "--compress 'topk': expected topk:F or topk:F:no_ef"},
           {"topk:0", "--compress 'topk:0': top-k's fraction F must be a number in (0, 1]"},
           {"topk:1.5", "--compress 'topk:1.5': top-k's fraction F must be a number in (0, 1]"},
           {"topk:-0.1", "--compress 'topk:-0.1': top-k's fraction F must be a number in (0, 1]"},
           {"topk:x", "--compress 'topk:x': top-k's fraction F must be a number in (0, 1]"},
           {"powersgd:0", "--compress 'powersgd:0': PowerSGD's rank R must be a whole number >= 1"},
           {"powersgd:2.5", "--compress 'powersgd:2.5': PowerSGD's rank R must be a whole number >= 1"},
           {"powersgd:4:ef", "--compress 'powersgd:4:ef': expected powersgd:R or powersgd:R:no_ef"},
       }) {
    c = ParseCompressionSpec(bad);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(c.status().message(), says) << bad;
  }
  // Where each runs: the lossy methods on DDP's Gloo group with any all-reduce.
  EXPECT_TRUE(CheckCompression("topk:0.01", "ddp", "gloo", "halving-doubling").ok());
  EXPECT_EQ(CheckCompression("powersgd:4", "ps", "", "", "tcp").message(),
            "--compress=powersgd:4 runs on --strategy=ddp (the PS compresses fp16 and bf16)");
  EXPECT_EQ(CheckCompression("topk:0.1", "dp", "", "").message(), "--compress=topk:0.1 needs --strategy=ddp");
  EXPECT_EQ(CheckCompression("topk:0.1", "ddp", "nccl", "").message(),
            "--compress=topk:0.1 runs on --backend=gloo (NCCL's is not wired in yet)");
  EXPECT_EQ(CheckCompression("fp16", "ddp", "gloo", "halving-doubling").message(),
            "--compress=fp16 runs on the ring: drop --allreduce=halving-doubling or use --allreduce=ring");
}

TEST(SgdHyperForTest, CopiesTheSgdFields) {
  RunConfig c = Good();
  c.set_momentum(0.9f);
  c.set_weight_decay(1e-4f);
  c.set_nesterov(true);
  const SgdHyper h = SgdHyperFor(c);
  EXPECT_EQ(h.lr, 0.02f);
  EXPECT_EQ(h.momentum, 0.9f);
  EXPECT_EQ(h.weight_decay, 1e-4f);
  EXPECT_TRUE(h.nesterov);
}

}  // namespace
}  // namespace ringside
