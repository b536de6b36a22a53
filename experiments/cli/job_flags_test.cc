// The command line's job description: one parse of the flags' values into a JobSpec,
// its errors naming the flag, usage errors (exit 2) apart from the failures of a run
// (exit 1), in the order the command line checks them.
#include "experiments/cli/job_flags.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/run_config.h"
#include "experiments/cli/command.h"
#include "experiments/cli/flags.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// The flags' defaults, with `strategy`.
JobFlags Defaults(const std::string& strategy) {
  JobFlags f = ReadJobFlags();
  f.strategy = strategy;
  return f;
}

// The error of `f` for `verb`, checking whether it is a usage error.
std::string Error(const JobFlags& f, bool usage, JobVerb verb = JobVerb::kTrain,
                  bool launch_here = true) {
  absl::StatusOr<JobSpec> job = ParseJobSpec(f, verb, launch_here);
  if (job.ok()) return "(ok)";
  EXPECT_EQ(IsUsageError(job.status()), usage) << job.status();
  return std::string(job.status().message());
}

TEST(JobFlagsTest, DefaultsAreASingleJobOfTheDefaultConfig) {
  absl::StatusOr<JobSpec> job = ParseJobSpec(Defaults("single"), JobVerb::kTrain, true);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->strategy, JobStrategy::kSingle);
  EXPECT_EQ(ConfigDifference(DefaultRunConfig(), job->run.config), "");
  EXPECT_FALSE(job->emulation.requested());
}

TEST(JobFlagsTest, APsJobIsTyped) {
  JobFlags f = Defaults("ps");
  f.workers = 3;
  f.ps_shards = 2;
  f.ps_sync = "ssp:2";
  f.timeout_s = 9;
  absl::StatusOr<JobSpec> job = ParseJobSpec(f, JobVerb::kTrain, true);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->strategy, JobStrategy::kPs);
  EXPECT_EQ(job->ps, PsLayout(2, 3, false));
  EXPECT_EQ(job->sync.mode, SyncMode::kSsp);
  EXPECT_EQ(job->sync.staleness, 2);
  EXPECT_EQ(job->timeout, absl::Seconds(9));
  EXPECT_EQ(job->run.config.strategy(), "ps");
  EXPECT_EQ(job->run.config.ps_sync(), "ssp");
  EXPECT_EQ(job->run.config.ps_staleness(), 2);
  EXPECT_EQ(job->run.config.world_size(), 3);
  EXPECT_EQ(job->run.config.ps_shards(), 2);
}

// The PS's transport: TCP's data plane unless named (stored unset, the default), gRPC's
// where --tls_* asks for encryption and no transport is named; TCP with TLS refused.
TEST(JobFlagsTest, ThePsTransportIsTcpUnlessTlsOrNamed) {
  JobFlags f = Defaults("ps");
  absl::StatusOr<JobSpec> job = ParseJobSpec(f, JobVerb::kTrain, true);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->run.config.ps_transport(), "");
  EXPECT_EQ(PsTransportOf(job->run.config), kPsTransportTcp);
  f.ps_transport = kPsTransportGrpc;
  job = ParseJobSpec(f, JobVerb::kTrain, true);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(PsTransportOf(job->run.config), kPsTransportGrpc);

  // Any readable files do for the parse (the handshake would check them).
  const std::string pem = absl::StrCat(std::getenv("TEST_TMPDIR"), "/some.pem");
  FILE* file = std::fopen(pem.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fputs("-----BEGIN X-----\n", file);
  std::fclose(file);
  f.tls_cert = f.tls_key = f.tls_ca = pem;
  f.ps_transport = "";
  job = ParseJobSpec(f, JobVerb::kTrain, true);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(PsTransportOf(job->run.config), kPsTransportGrpc);
  f.ps_transport = kPsTransportTcp;
  EXPECT_EQ(Error(f, true),
            "--ps_transport=tcp does not encrypt its data plane yet: for TLS use --ps_transport=grpc");

  f = Defaults("ddp");
  f.ps_transport = kPsTransportGrpc;
  EXPECT_EQ(Error(f, true), "--ps_transport needs --strategy=ps");
}

// BytePS's layout: a summer in each worker beside k = 0 dedicated servers.
TEST(JobFlagsTest, WorkerSummersAreTyped) {
  JobFlags f = Defaults("ps");
  f.workers = 3;
  f.ps_shards = 0;
  f.ps_mode = "summation";
  f.ps_worker_summers = true;
  absl::StatusOr<JobSpec> job = ParseJobSpec(f, JobVerb::kTrain, true);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->ps, PsLayout(0, 3, false, true));
  EXPECT_EQ(job->ps.shards(), 3);
  EXPECT_EQ(job->run.config.ps_shards(), 0);
  EXPECT_TRUE(job->run.config.ps_worker_summers());
}

TEST(JobFlagsTest, ADdpJobIsTyped) {
  JobFlags f = Defaults("ddp");
  f.allreduce = "ring";
  absl::StatusOr<JobSpec> job = ParseJobSpec(f, JobVerb::kTrain, true);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->backend, Backend::kGloo);
  EXPECT_EQ(job->allreduce, AllReduceAlgorithm::kRing);
  EXPECT_EQ(job->run.config.backend(), "gloo");
  EXPECT_EQ(job->run.config.allreduce(), "ring");
}

TEST(JobFlagsTest, BadFlagsAreUsageErrorsNamingTheFlag) {
  struct Case {
    const char* strategy;
    void (*set)(JobFlags*);
    const char* error;
  };
  const Case cases[] = {
      {"foo", [](JobFlags*) {}, "unknown strategy 'foo' (expected single, dp, ps or ddp)"},
      {"ps", [](JobFlags* f) { f->ps_sync = "often"; },
       "--ps_sync must be bsp, ssp:K (K >= 0) or asp, got 'often'"},
      {"ps", [](JobFlags* f) { f->ps_shards = 0; }, "--ps_shards must be >= 1, got 0"},
      {"ddp", [](JobFlags* f) { f->timeout_s = 0; }, "--timeout_s must be >= 1"},
      {"ddp", [](JobFlags* f) { f->backend = "bogus"; },
       "--backend=bogus is not a process-group backend (gloo or nccl)"},
      {"dp", [](JobFlags* f) { f->network = "none"; },
       "--network is not supported with --strategy=dp: DataParallel is one process "
       "(threads), with no nodes to emulate; use --strategy=ddp or ps"},
      {"single", [](JobFlags* f) { f->ps_min_workers = 1; }, "--ps_min_workers needs --strategy=ps"},
      // Summation servers (issue 35).
      {"ps", [](JobFlags* f) { f->ps_mode = "sum"; },
       "unknown --ps_mode 'sum' (expected optimizer or summation)"},
      {"ps",
       [](JobFlags* f) {
         f->ps_mode = "summation";
         f->ps_sync = "ssp:2";
       },
       "--ps_mode=summation needs --ps_sync=bsp, got ssp (every worker applies the same "
       "summed gradient each step)"},
      {"ps",
       [](JobFlags* f) {
         f->ps_mode = "summation";
         f->workers = 2;
         f->ps_min_workers = 1;
       },
       "--ps_mode=summation does not take --ps_min_workers (summation servers hold no "
       "parameters a rejoining worker could pull)"},
      {"ps",
       [](JobFlags* f) {
         f->ps_mode = "summation";
         f->ps_shards = 0;
       },
       "--ps_shards must be >= 1, got 0"},
      {"ddp", [](JobFlags* f) { f->ps_mode = "summation"; }, "--ps_mode needs --strategy=ps"},
      // Summers in the workers (BytePS's colocated summation service).
      {"ps", [](JobFlags* f) { f->ps_worker_summers = true; }, "--ps_worker_summers needs --ps_mode=summation"},
      {"ps",
       [](JobFlags* f) {
         f->ps_mode = "summation";
         f->ps_worker_summers = true;
         f->workers = 2;
         f->ps_shards = 2;
       },
       "--ps_worker_summers takes --ps_shards from 0 to --workers - 1 = 1, got 2 (from k = n dedicated "
       "servers on, BytePS's optimum leaves the workers' summers nothing)"},
      {"ps",
       [](JobFlags* f) {
         f->ps_mode = "summation";
         f->ps_worker_summers = true;
         f->workers = 2;
         f->ps_shards = -1;
       },
       "--ps_shards must be >= 0, got -1"},
      {"ps",
       [](JobFlags* f) {
         f->ps_mode = "summation";
         f->ps_worker_summers = true;
         f->workers = 2;
         f->ps_colocated = true;
       },
       "--ps_worker_summers and --ps_colocated place the servers two ways: pick one"},
      {"ps",
       [](JobFlags* f) {
         f->ps_mode = "summation";
         f->ps_worker_summers = true;
         f->workers = 3;
         f->ps_placement = "tensor_greedy";
       },
       "--ps_worker_summers cuts byte slices by BytePS's optimum: it takes --ps_placement=balanced, got "
       "tensor_greedy"},
      {"ddp", [](JobFlags* f) { f->ps_worker_summers = true; }, "--ps_worker_summers needs --strategy=ps"},
      {"single", [](JobFlags* f) { f->batch = 0; }, "--batch must be >= 1, got 0"},
      {"single", [](JobFlags* f) { f->cluster = "gige-cpu"; },
       "--cluster shapes the links between a job's nodes: --strategy=single has none (ps or ddp)"},
  };
  for (const Case& c : cases) {
    JobFlags f = Defaults(c.strategy);
    c.set(&f);
    EXPECT_EQ(Error(f, /*usage=*/true), c.error);
  }
}

TEST(JobFlagsTest, PsProcessesByHand) {
  JobFlags f = Defaults("single");  // ps-server and ps-worker take no --strategy.
  f.shard = 1;
  EXPECT_EQ(Error(f, true, JobVerb::kPsServer), "--shard=1 is outside [0, --ps_shards=1)");
  f.shard = 0;
  f.listen = "127.0.0.1:7000";
  absl::StatusOr<JobSpec> server = ParseJobSpec(f, JobVerb::kPsServer, true);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(server->strategy, JobStrategy::kPs);
  EXPECT_EQ(server->run.config.strategy(), "ps");
  EXPECT_EQ(server->ps_process.listen, "127.0.0.1:7000");

  f.worker_id = 2;
  EXPECT_EQ(Error(f, true, JobVerb::kPsWorker), "--worker_id=2 is outside [0, --workers=2)");
  f.worker_id = 1;
  f.ps_servers = "a:1,b:2";
  EXPECT_EQ(Error(f, true, JobVerb::kPsWorker), "--ps_servers lists 2 addresses for --ps_shards=1");
  f.ps_servers = "a:1";
  absl::StatusOr<JobSpec> worker = ParseJobSpec(f, JobVerb::kPsWorker, true);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->ps_process.worker_id, 1);
  EXPECT_EQ(worker->ps_process.servers, std::vector<std::string>({"a:1"}));
}

TEST(JobFlagsTest, EmulationIsParsedWhereTheJobIsLaunched) {
  JobFlags f = Defaults("ddp");
  f.network = "bw=fast";
  const std::string bad_network(ParseNetworkProfile("bw=fast").status().message());
  EXPECT_EQ(Error(f, /*usage=*/false), bad_network);  // A failure of the run: exit 1.
  // Inside a launched job the launcher placed this process already.
  EXPECT_TRUE(ParseJobSpec(f, JobVerb::kTrain, /*launch_here=*/false).ok());
  // A single process sends nothing: its --network is not read.
  f.strategy = "single";
  EXPECT_TRUE(ParseJobSpec(f, JobVerb::kTrain, true).ok());
  f.node_cpus = "0.5";
  absl::StatusOr<JobSpec> single = ParseJobSpec(f, JobVerb::kTrain, true);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_TRUE(single->emulation.node_cpus.enabled);
  EXPECT_FALSE(single->emulation.network_given);
}

TEST(JobFlagsTest, ALaunchedPsProcessReadsTheShardsAddresses) {
  JobFlags f = Defaults("ps");
  f.ps_shards = 2;
  f.ps_servers = "h:1,h:2";
  absl::StatusOr<JobSpec> job = ParseJobSpec(f, JobVerb::kTrain, /*launch_here=*/false);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->ps_process.servers, std::vector<std::string>({"h:1", "h:2"}));
  f.ps_servers = "h:1";
  EXPECT_EQ(Error(f, false, JobVerb::kTrain, false), "--ps_servers does not list --ps_shards addresses");
  // A local job sets --ps_servers for its processes; its own is not read.
  EXPECT_TRUE(ParseJobSpec(f, JobVerb::kTrain, /*launch_here=*/true).ok());
}

}  // namespace
}  // namespace ringside
