// PsStrategy as a unit: N workers as threads, each training its shard of the data
// through the shared Trainer with a PsStrategy, against S shards hosted in this process
// (reached through gRPC's in-process channels; the servers listen on ports the OS
// picks). Under BSP, N workers with batch b end where one process with batch N*b over
// the same samples ends (up to float summation order), with and without prefetch; and
// every worker ends with the very same parameters.
//
// Staging (the GPU worker's path: gradients copied to host chunks, parameters copied
// back from them) run on the CPU backend through stage_through_host gives the direct
// path's parameters bit for bit. On a GPU (a CUDA build on a machine with one), GPU
// workers end within 1e-4 (relative to the largest parameter) of CPU workers; without
// one that test skips, naming the reason.
#include "ps_worker/ps_strategy.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/common.h"
#include "common/ops_factory.h"
#include "common/test_util.h"
#include "gtest/gtest.h"
#include "ps_server/server_role.h"
#include "ps_worker/ps_worker.h"

namespace ringside {
namespace {

constexpr int kBatch = 8;
constexpr int kSteps = 8;
constexpr absl::Duration kTimeout = absl::Seconds(30);

// mlp:64-16-4 has 1108 parameters: 1 KiB chunks cut each shard into several chunks.
RunConfig JobConfig(int workers, int shards, bool prefetch) {
  RunConfig c;
  c.set_strategy("ps");
  c.set_model("mlp:64-16-4");
  c.set_dataset("synthetic:train=600,test=100,shape=1x8x8,classes=4,seed=3");
  c.set_epochs(1);
  c.set_max_steps(kSteps);
  c.set_batch(kBatch);
  c.set_lr(0.05f);
  c.set_momentum(0.9f);
  c.set_weight_decay(1e-4f);
  c.set_seed(9);
  c.set_threads(1);
  c.set_grad_accum(1);
  c.set_prefetch(prefetch);
  c.set_world_size(workers);
  c.set_ps_shards(shards);
  c.set_ps_sync("bsp");
  c.set_ps_chunk_bytes(1024);
  return c;
}

// The job's shards, hosted here.
struct Shards {
  std::vector<HostedShard> hosted;
  std::vector<std::string> addresses;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
};

Shards HostShards(const RunConfig& config) {
  Shards shards;
  for (int s = 0; s < PsLayout::Of(config).shards(); ++s) {
    absl::StatusOr<HostedShard> h = HostShard(config, s, "127.0.0.1:0", kTimeout, "");
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok()) break;
    shards.addresses.push_back(absl::StrCat("127.0.0.1:", h->server->port()));
    shards.channels.push_back(h->server->InProcessChannel());
    shards.hosted.push_back(std::move(*h));
  }
  return shards;
}

// How a worker runs its PsStrategy.
struct WorkerMode {
  bool params_arrive_late = true;  // BSP: the next forward waits for each chunk.
  bool stage_through_host = false;
};

// One worker: registers, trains through the Trainer (the strategy's lifecycle: start
// parameters from the shards, steps, goodbye) and returns its final parameters.
absl::StatusOr<std::vector<float>> RunWorker(const RunConfig& config, int worker,
                                             const Shards& shards, const WorkerMode& mode = {}) {
  RINGSIDE_ASSIGN_OR_RETURN(Replica replica, NewReplica(config));
  RINGSIDE_ASSIGN_OR_RETURN(
      std::vector<std::unique_ptr<ShardClient>> clients,
      RegisterWithShards(config, worker, *replica.model, shards.addresses, shards.channels,
                         kTimeout));
  PsStrategyOptions so;
  so.worker_id = worker;
  so.num_workers = config.world_size();
  so.has_momentum = true;
  so.params_arrive_late = mode.params_arrive_late;
  so.stage_through_host = mode.stage_through_host;
  so.summation = config.ps_mode() == kPsModeSummation;
  if (config.ps_worker_summers()) so.shard_weights = PsLayout::Of(config).ShardWeights();
  so.hyper = SgdHyperFor(config);
  RINGSIDE_ASSIGN_OR_RETURN(
      std::unique_ptr<PsStrategy> strategy,
      PsStrategy::Create(std::move(clients), replica.model.get(), replica.ops.get(), so));
  RunOptions run;
  run.config = config;
  RINGSIDE_ASSIGN_OR_RETURN(
      TrainResult result,
      TrainReplica(run, worker, config.world_size(), &replica, strategy.get()));
  if (result.steps != kSteps) {
    return absl::InternalError(absl::StrCat("ran ", result.steps, " steps"));
  }
  const Model& m = *replica.model;
  std::vector<float> params(m.num_params());
  RINGSIDE_RETURN_IF_ERROR(
      replica.ops->CopyToHost(params.data(), m.params(), params.size() * sizeof(float)));
  return params;
}

// A whole job: `config.world_size()` workers as threads against its shards hosted
// here; each worker's final parameters (or error).
std::vector<absl::StatusOr<std::vector<float>>> RunJob(const RunConfig& config,
                                                       const WorkerMode& mode) {
  const int workers = config.world_size();
  Shards shards = HostShards(config);
  EXPECT_EQ(static_cast<int>(shards.hosted.size()), PsLayout::Of(config).shards());
  std::vector<absl::StatusOr<std::vector<float>>> params(workers, std::vector<float>());
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] { params[w] = RunWorker(config, w, shards, mode); });
  }
  for (auto& t : threads) t.join();
  for (HostedShard& h : shards.hosted) EXPECT_TRUE(h.server->Wait().ok());
  return params;
}

// One process, the single strategy, batch workers * kBatch over the same samples.
std::vector<float> RunReference(int workers) {
  RunConfig c = JobConfig(1, 1, /*prefetch=*/false);
  c.set_strategy("single");
  c.set_batch(workers * kBatch);
  absl::StatusOr<Replica> replica = NewReplica(c);
  EXPECT_TRUE(replica.ok()) << replica.status();
  if (!replica.ok()) return {};
  auto strategy =
      LocalSgdStrategy::Create(replica->hyper, replica->model.get(), replica->ops.get());
  EXPECT_TRUE(strategy.ok()) << strategy.status();
  RunOptions run;
  run.config = c;
  absl::StatusOr<TrainResult> r = TrainReplica(run, 0, 1, &*replica, strategy->get());
  EXPECT_TRUE(r.ok()) << r.status();
  const Model& m = *replica->model;
  return std::vector<float>(m.params(), m.params() + m.num_params());
}

// (workers, shards, prefetch)
class PsStrategyTest : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(PsStrategyTest, WorkersAsThreadsMatchOneBigBatch) {
  const auto [workers, num_shards, prefetch] = GetParam();
  const RunConfig config = JobConfig(workers, num_shards, prefetch);
  Shards shards = HostShards(config);
  ASSERT_EQ(static_cast<int>(shards.hosted.size()), num_shards);
  std::vector<absl::StatusOr<std::vector<float>>> params(workers, std::vector<float>());
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] { params[w] = RunWorker(config, w, shards); });
  }
  for (auto& t : threads) t.join();
  // Every worker said goodbye: each shard is done, without an abort.
  for (HostedShard& h : shards.hosted) EXPECT_TRUE(h.server->Wait().ok());
  const std::vector<float> reference = RunReference(workers);
  ASSERT_FALSE(reference.empty());
  for (int w = 0; w < workers; ++w) {
    ASSERT_TRUE(params[w].ok()) << "worker " << w << ": " << params[w].status();
    ASSERT_EQ(params[w]->size(), reference.size()) << "worker " << w;
    EXPECT_LT(MaxRelativeDifference(*params[w], reference), 1e-5) << "worker " << w;
    EXPECT_EQ(*params[w], *params[0]) << "worker " << w;  // All pulled the same floats.
  }
}

INSTANTIATE_TEST_SUITE_P(WorkersShardsPrefetch, PsStrategyTest,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values(1, 2),
                                            ::testing::Bool()));

// A worker whose configuration differs from the shards' is refused at registration;
// the refusal tells it nothing of the shards' configuration (the shard's own log names
// the differing field).
TEST(PsRegistrationTest, DifferentConfigurationIsRefused) {
  const RunConfig config = JobConfig(1, 1, true);
  Shards shards = HostShards(config);
  ASSERT_EQ(shards.hosted.size(), 1u);
  RunConfig mine = config;
  mine.set_lr(0.5f);
  absl::StatusOr<Replica> replica = NewReplica(mine);
  ASSERT_TRUE(replica.ok()) << replica.status();
  absl::StatusOr<std::vector<std::unique_ptr<ShardClient>>> clients = RegisterWithShards(
      mine, 0, *replica->model, shards.addresses, shards.channels, kTimeout);
  ASSERT_FALSE(clients.ok());
  EXPECT_EQ(clients.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(clients.status().message().find("register: configuration mismatch"),
            absl::string_view::npos)
      << clients.status();
  EXPECT_EQ(clients.status().message().find("0.05"), absl::string_view::npos) << clients.status();
}

// (shards, params_arrive_late). Two workers: a shard sums two pushes in one rounding,
// whichever arrives first, so the runs are deterministic to the bit.
class PsStagingTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(PsStagingTest, StagingThroughHostGivesTheDirectPathsParameters) {
  const auto [num_shards, late] = GetParam();
  // 1 KiB chunks: several chunks per shard, so ranges and chunks cut each other.
  const RunConfig config = JobConfig(2, num_shards, /*prefetch=*/true);
  WorkerMode direct;
  direct.params_arrive_late = late;
  WorkerMode staged = direct;
  staged.stage_through_host = true;
  const auto want = RunJob(config, direct);
  const auto got = RunJob(config, staged);
  for (int w = 0; w < config.world_size(); ++w) {
    ASSERT_TRUE(want[w].ok()) << "direct worker " << w << ": " << want[w].status();
    ASSERT_TRUE(got[w].ok()) << "staged worker " << w << ": " << got[w].status();
    ASSERT_EQ(got[w]->size(), want[w]->size());
    EXPECT_EQ(*got[w], *want[w]) << "worker " << w;
  }
  // And they trained: not the initial parameters.
  absl::StatusOr<Replica> initial = NewReplica(config);
  ASSERT_TRUE(initial.ok()) << initial.status();
  ASSERT_TRUE(initial->model->InitParams(config.seed()).ok());
  const Model& m = *initial->model;
  EXPECT_NE(std::vector<float>(m.params(), m.params() + m.num_params()), *want[0]);
}

INSTANTIATE_TEST_SUITE_P(ShardsLate, PsStagingTest,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Bool()));

// Summation servers (ps_mode "summation"): the shards sum and serve the mean; every
// worker steps the same SGD on it. The floats are those the optimizer shards compute
// (the same ordered sum, the same SGD pass over each chunk's range), so the runs agree
// to the bit, and every worker ends with the same parameters. (workers, shards)
class PsSummationTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(PsSummationTest, SummationServersGiveTheOptimizerShardsParameters) {
  const auto [workers, num_shards] = GetParam();
  const RunConfig optimizer = JobConfig(workers, num_shards, /*prefetch=*/true);
  RunConfig summation = optimizer;
  summation.set_ps_mode(kPsModeSummation);
  const auto want = RunJob(optimizer, WorkerMode());
  const auto got = RunJob(summation, WorkerMode());
  const std::vector<float> reference = RunReference(workers);
  ASSERT_FALSE(reference.empty());
  for (int w = 0; w < workers; ++w) {
    ASSERT_TRUE(want[w].ok()) << "optimizer worker " << w << ": " << want[w].status();
    ASSERT_TRUE(got[w].ok()) << "summation worker " << w << ": " << got[w].status();
    EXPECT_EQ(*got[w], *want[w]) << "worker " << w;
    EXPECT_EQ(*got[w], *got[0]) << "worker " << w;
    EXPECT_LT(MaxRelativeDifference(*got[w], reference), 1e-5) << "worker " << w;
  }
}

INSTANTIATE_TEST_SUITE_P(WorkersShards, PsSummationTest,
                         ::testing::Combine(::testing::Values(1, 3), ::testing::Values(1, 2)));

// A summer in each worker beside k dedicated servers (BytePS's optimum cuts slices of
// other sizes): every float gets the same ordered sum and SGD, but the SGD's vector
// loop rounds a slice's unaligned head and tail its own way, so the parameters equal the
// optimizer shards' within 1e-6 (not to the bit), and every worker holds the same
// floats. (Here every summer is hosted by the test; a worker hosting its own is
// tests/ps_equivalence_test.sh's.) k = 0, 1, 2 at 3 workers.
class PsWorkerSummersTest : public ::testing::TestWithParam<int> {};

TEST_P(PsWorkerSummersTest, WorkerSummersGiveTheOptimizerShardsParameters) {
  const int k = GetParam();
  const RunConfig optimizer = JobConfig(3, 1, /*prefetch=*/true);
  RunConfig summers = optimizer;
  summers.set_ps_mode(kPsModeSummation);
  summers.set_ps_shards(k);
  summers.set_ps_worker_summers(true);
  ASSERT_TRUE(ValidateRunConfig(summers).ok()) << ValidateRunConfig(summers);
  const auto want = RunJob(optimizer, WorkerMode());
  const auto got = RunJob(summers, WorkerMode());
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(want[w].ok()) << "optimizer worker " << w << ": " << want[w].status();
    ASSERT_TRUE(got[w].ok()) << "summers worker " << w << ": " << got[w].status();
    EXPECT_LT(MaxRelativeDifference(*got[w], *want[w]), 1e-6) << "worker " << w;
    EXPECT_EQ(*got[w], *got[0]) << "worker " << w;
  }
}

INSTANTIATE_TEST_SUITE_P(Servers, PsWorkerSummersTest, ::testing::Values(0, 1, 2));

// A summation server refuses SSP and ASP (the shard's own check, behind the
// configuration's).
TEST(PsSummationTest, ASummationShardNeedsBsp) {
  RunConfig config = JobConfig(2, 1, true);
  config.set_ps_mode(kPsModeSummation);
  config.set_ps_sync("asp");
  absl::StatusOr<HostedShard> h = HostShard(config, 0, "127.0.0.1:0", kTimeout, "");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("--ps_mode=summation needs --ps_sync=bsp"), std::string::npos)
      << h.status();
}

// GPU workers (stage through pinned host chunks) against CPU workers, same job
// otherwise. (shards, params_arrive_late).
class PsGpuTest : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Ops>> gpu = NewOps("cuda", 0, 0);
    if (!gpu.ok()) GTEST_SKIP() << "no CUDA GPU: " << gpu.status();
  }
};

// The job `cpu` (2 workers) on CPU workers and on GPU workers, whose final parameters
// agree within the bound between the GPU and the CPU (GEMMs sum in another
// order), every GPU worker holding the same floats.
void ExpectGpuWorkersMatchCpuWorkers(const RunConfig& cpu, bool late) {
  RunConfig gpu = cpu;
  gpu.set_device("cuda");
  WorkerMode mode;
  mode.params_arrive_late = late;
  const auto want = RunJob(cpu, mode);
  const auto got = RunJob(gpu, mode);
  for (int w = 0; w < cpu.world_size(); ++w) {
    ASSERT_TRUE(want[w].ok()) << "cpu worker " << w << ": " << want[w].status();
    ASSERT_TRUE(got[w].ok()) << "gpu worker " << w << ": " << got[w].status();
    ASSERT_EQ(got[w]->size(), want[w]->size());
    EXPECT_LT(MaxRelativeDifference(*got[w], *want[w]), 1e-4) << "worker " << w;
    EXPECT_EQ(*got[w], *got[0]) << "worker " << w;  // All pulled the same floats.
  }
}

TEST_P(PsGpuTest, GpuWorkersMatchCpuWorkers) {
  const auto [num_shards, late] = GetParam();
  ExpectGpuWorkersMatchCpuWorkers(JobConfig(2, num_shards, /*prefetch=*/true), late);
}

// The same against summation servers: each GPU worker steps SGD on the device.
TEST_P(PsGpuTest, GpuWorkersMatchCpuWorkersAgainstSummationServers) {
  const auto [num_shards, late] = GetParam();
  RunConfig cpu = JobConfig(2, num_shards, /*prefetch=*/true);
  cpu.set_ps_mode(kPsModeSummation);
  ExpectGpuWorkersMatchCpuWorkers(cpu, late);
}

INSTANTIATE_TEST_SUITE_P(ShardsLate, PsGpuTest,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Bool()));

}  // namespace
}  // namespace ringside
