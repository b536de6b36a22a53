// `ringside simulate` end to end through RunCli: a described cluster answers with exit
// 0, bad input is one usage error (exit 2), and `simulate --help` describes simulate's
// own flags.
#include <string>
#include <vector>

#include "absl/flags/reflection.h"
#include "experiments/cli/cli.h"
#include "experiments/cli/command.h"
#include "experiments/cli/help.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int Simulate(std::vector<std::string> args) {
  absl::FlagSaver saver;  // Flags are process-wide: every call starts from the defaults.
  args.insert(args.begin(), {"ringside", "simulate"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return RunCli(static_cast<int>(argv.size()), argv.data());
}

TEST(SimulateCli, DescribedClusterAnswers) {
  EXPECT_EQ(Simulate({"--cluster=horovod-2017", "--model_mb=528", "--step_ms=489", "--workers=16,64,512"}), 0);
  EXPECT_EQ(Simulate({"--cluster=aws-p3.16xlarge", "--model=resnet-50", "--batch=32", "--shards=1,N",
                      "--colocated", "--link_latency=50us", "--bucket_mb=50", "--max_workers=64"}),
            0);
  EXPECT_EQ(Simulate({"--cluster=dgx-a100", "--model=mlp:784-256-10", "--batch=64", "--workers=3,100"}), 0);
}

TEST(SimulateCli, BadInputIsAUsageError) {
  const std::vector<std::vector<std::string>> bad = {
      {"--cluster=aws-p3.16xlarge", "--model=resnet-51", "--batch=32"},       // Unknown preset.
      {"--cluster=aws-p3.16xlarge", "--model_mb=100"},                        // No step time.
      {"--cluster=aws-p3.16xlarge", "--model=vgg-16"},                        // No batch, no step.
      {"--cluster=aws-p3.16xlarge", "--model_mb=1", "--step_ms=1", "--workers=0"},
      {"--cluster=aws-p3.16xlarge", "--model_mb=1", "--step_ms=1", "--workers=8,x"},
      {"--cluster=aws-p3.16xlarge", "--model_mb=1", "--step_ms=1", "--shards=0"},
      {"--cluster=aws-p3.16xlarge", "--model_mb=1", "--step_ms=1", "--workers=8", "--max_workers=8"},
      {"--cluster=no-such-cluster", "--model_mb=1", "--step_ms=1"},
      {"--cluster=aws-p3.16xlarge", "--calibration=c.json"},
      {},
  };
  for (const auto& args : bad) EXPECT_EQ(Simulate(args), 2) << ::testing::PrintToString(args);
}

// A calibration file in the test's directory: `tcp` adds the TCP push-pull path.
std::string WriteCalibration(const std::string& name, bool tcp) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return "";
  fputs("{\"compute_s\": 0.01, \"backward_s\": 0.006, \"model_bytes\": 1e6, "
        "\"push_pull\": {\"alpha_s\": 1e-4, \"bytes_per_s\": 1e8}, "
        "\"allreduce\": {\"alpha_s\": 1e-4, \"bytes_per_s\": 2e8}",
        f);
  if (tcp) fputs(", \"push_pull_tcp\": {\"alpha_s\": 1e-4, \"bytes_per_s\": 2e8}", f);
  fputs("}\n", f);
  fclose(f);
  return path;
}

// --ps_transport picks the PS rows' path: tcp needs a calibration that measured it (a
// run error otherwise; the default falls back to gRPC's path there), an unknown
// transport is a usage error, and a described cluster has no transport to pick.
TEST(SimulateCli, PsTransportPicksTheCalibratedPath) {
  const std::string both = WriteCalibration("both.json", true);
  const std::string grpc_only = WriteCalibration("grpc.json", false);
  ASSERT_FALSE(both.empty());
  EXPECT_EQ(Simulate({"--calibration=" + both, "--ps_transport=tcp", "--max_workers=4"}), 0);
  EXPECT_EQ(Simulate({"--calibration=" + grpc_only, "--max_workers=4"}), 0);
  EXPECT_EQ(Simulate({"--calibration=" + grpc_only, "--ps_transport=grpc", "--max_workers=4"}), 0);
  EXPECT_EQ(Simulate({"--calibration=" + both, "--max_workers=4"}), 0);
  EXPECT_EQ(Simulate({"--calibration=" + grpc_only, "--ps_transport=tcp", "--max_workers=4"}), 1);
  EXPECT_EQ(Simulate({"--calibration=" + both, "--ps_transport=udp"}), 2);
  EXPECT_EQ(Simulate({"--cluster=horovod-2017", "--model_mb=528", "--step_ms=489", "--ps_transport=tcp"}), 2);
}

// --ps_placement deals a model's layers: a preset's or a calibration's model answers; a
// model given by its size alone has no layers to deal (usage error), nor does an unknown
// placement.
TEST(SimulateCli, PsPlacementDealsTheModelsLayers) {
  EXPECT_EQ(Simulate({"--cluster=horovod-2017", "--model=vgg-16", "--batch=32", "--shards=1,4,16",
                      "--ps_placement=tensor_round_robin", "--max_workers=64"}),
            0);
  EXPECT_EQ(Simulate({"--cluster=horovod-2017", "--model_mb=528", "--step_ms=489", "--ps_placement=tensor_greedy"}), 2);
  EXPECT_EQ(Simulate({"--cluster=horovod-2017", "--model=vgg-16", "--batch=32", "--ps_placement=by_size"}), 2);
  const std::string both = WriteCalibration("placed.json", true);
  EXPECT_EQ(Simulate({"--calibration=" + both, "--ps_placement=tensor_round_robin", "--max_workers=4"}), 1)
      << "a calibration without its model has no tensors to deal";
}

// --ps_mode=summation and --ps_chunk_kb reach the PS rows; an unknown mode and a chunk
// size outside [1, 65536] are usage errors.
TEST(SimulateCli, PsModeAndChunkSize) {
  EXPECT_EQ(Simulate({"--cluster=gige-cpu", "--model=mlp:784-2560-256-10", "--batch=64", "--shards=N",
                      "--ps_mode=summation", "--ps_chunk_kb=64", "--workers=4,16"}),
            0);
  EXPECT_EQ(Simulate({"--cluster=gige-cpu", "--model_mb=10", "--step_ms=8", "--ps_mode=sum"}), 2);
  EXPECT_EQ(Simulate({"--cluster=gige-cpu", "--model_mb=10", "--step_ms=8", "--ps_chunk_kb=0"}), 2);
}

TEST(SimulateCli, ProfileWithAMissingFieldIsAUsageError) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/no_nic.textproto";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("name: \"x\" device_tflops: 1\n", f);
  fclose(f);
  EXPECT_EQ(Simulate({"--cluster=" + path, "--model_mb=1", "--step_ms=1"}), 2);
}

TEST(SimulateCli, HelpIsSimulatesOwn) {
  const Command* simulate = FindCommand("simulate");
  ASSERT_NE(simulate, nullptr);
  const std::string help = VerbHelp(*simulate);
  EXPECT_THAT(help, HasSubstr("--workers (default: \"\")\n      simulate: worker (device) counts"));
  EXPECT_THAT(help, HasSubstr("--model (default: \"\")\n      simulate --cluster: a published model"));
  EXPECT_THAT(help, HasSubstr("--shards (default: \"1,2,N\")"));
  EXPECT_THAT(help, HasSubstr("--cluster"));
  EXPECT_THAT(help, Not(HasSubstr("ps/ddp")));
  EXPECT_THAT(help, Not(HasSubstr("local launch")));
  EXPECT_THAT(help, Not(HasSubstr("batch size per worker")));
}

}  // namespace
}  // namespace ringside
