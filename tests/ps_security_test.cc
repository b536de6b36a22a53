// The shard's transport security: every method refuses a call without the job's token
// (UNAUTHENTICATED; the shard's state, read back through Stats, is unchanged), a real
// worker with the token is served, and a flood of idle connections and refused calls
// neither starves it nor leaves threads behind.
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc_flood_test_util.h"
#include "common/rpc_security.h"
#include "grpcpp/grpcpp.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "ps_server/ps.grpc.pb.h"
#include "ps_server/ps_service.h"
#include "ps_worker/shard_client.h"

namespace ringside {
namespace {

constexpr char kToken[] = "shard-test-token-0123456789abcdef";
constexpr char kWrongToken[] = "shard-test-token-0123456789abcdeX";
constexpr char kModel[] = "mlp:4-2";
constexpr int kWorkers = 2;
constexpr absl::Duration kPrompt = absl::Seconds(10);
// The shard's and the clients' peer timeout.
constexpr absl::Duration kTimeout = absl::Seconds(5);

RunConfig JobConfig() {
  RunConfig c;
  c.set_model(kModel);
  c.set_lr(0.02f);
  return c;
}

ps::RegisterRequest Registration(int worker) {
  ps::RegisterRequest r;
  r.set_worker_id(worker);
  r.set_num_workers(kWorkers);
  *r.mutable_config() = JobConfig();
  r.set_model(kModel);
  r.set_num_params(10);
  return r;
}

RpcSecurity WithToken(const std::string& token) {
  RpcSecurity s;
  s.token = token;
  return s;
}

class PsSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PsShardOptions o;
    o.num_workers = kWorkers;
    o.chunk_bytes = 16;
    o.config = JobConfig();
    o.model = kModel;
    o.timeout = kTimeout;
    absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start("127.0.0.1:0", o, WithToken(kToken));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
  }
  std::unique_ptr<ps::ParameterServer::Stub> StubWith(const RpcSecurity& security) {
    grpc::ChannelArguments args;
    SetPsChannelArgs(&args);
    return ps::ParameterServer::NewStub(NewSecureChannel(address_, security, args));
  }

  ps::ShardStats ReadStats() {
    auto stub = StubWith(WithToken(kToken));
    grpc::ClientContext c;
    c.set_deadline(absl::ToChronoTime(absl::Now() + kPrompt));
    ps::ShardStats stats;
    EXPECT_TRUE(stub->Stats(&c, ps::StatsRequest(), &stats).ok());
    return stats;
  }

  std::unique_ptr<PsServer> server_;
  std::string address_;
};

// Calls every method of the service through `stub`; returns each call's code.
std::vector<grpc::StatusCode> CallEveryMethod(ps::ParameterServer::Stub* stub) {
  auto context = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(absl::ToChronoTime(absl::Now() + kPrompt));
    return c;
  };
  std::vector<grpc::StatusCode> codes;
  {
    auto c = context();
    ps::RegisterResponse r;
    codes.push_back(stub->Register(c.get(), Registration(0), &r).error_code());
  }
  {
    auto c = context();
    auto stream = stub->PushPull(c.get());
    ps::Chunk chunk;
    chunk.set_worker_id(0);
    chunk.set_kind(ps::GRADIENTS);
    const float huge = 1e30f;
    chunk.set_data(&huge, sizeof(huge));
    stream->Write(chunk);
    stream->WritesDone();
    while (stream->Read(&chunk)) {
    }
    codes.push_back(stream->Finish().error_code());
  }
  {
    auto c = context();
    ps::PushResponse r;
    auto stream = stub->Push(c.get(), &r);
    ps::Chunk chunk;
    chunk.set_worker_id(0);
    chunk.set_kind(ps::PARAMS);
    const float nan = std::nanf("");
    chunk.set_data(&nan, sizeof(nan));
    stream->Write(chunk);
    stream->WritesDone();
    codes.push_back(stream->Finish().error_code());
  }
  {
    auto c = context();
    ps::PullRequest request;
    request.set_kind(ps::PARAMS);
    request.set_step(1000);
    auto stream = stub->Pull(c.get(), request);
    ps::Chunk chunk;
    while (stream->Read(&chunk)) {
    }
    codes.push_back(stream->Finish().error_code());
  }
  {
    auto c = context();
    ps::BarrierRequest request;
    request.set_name("made-up");
    ps::BarrierResponse r;
    codes.push_back(stub->Barrier(c.get(), request, &r).error_code());
  }
  {
    auto c = context();
    ps::ShardStats r;
    codes.push_back(stub->Stats(c.get(), ps::StatsRequest(), &r).error_code());
  }
  for (int worker : {0, 1}) {  // Two goodbyes would end an unprotected shard.
    auto c = context();
    ps::ShutdownRequest request;
    request.set_worker_id(worker);
    ps::ShutdownResponse r;
    codes.push_back(stub->Shutdown(c.get(), request, &r).error_code());
  }
  {
    auto c = context();
    ps::AbortRequest request;
    request.set_worker_id(0);
    request.set_reason("forged");
    ps::AbortResponse r;
    codes.push_back(stub->Abort(c.get(), request, &r).error_code());
  }
  return codes;
}

TEST_F(PsSecurityTest, EveryMethodRefusesAMissingOrWrongTokenAndNothingChanges) {
  ASSERT_EQ(google::protobuf::DescriptorPool::generated_pool()
                    ->FindServiceByName("ringside.ps.ParameterServer")
                    ->method_count(), 8)
      << "a new method: check its token and call it in CallEveryMethod";
  const ps::ShardStats before = ReadStats();
  for (const RpcSecurity& bad : {RpcSecurity(), WithToken(kWrongToken)}) {
    auto stub = StubWith(bad);
    for (grpc::StatusCode code : CallEveryMethod(stub.get())) {
      EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED);
    }
  }
  const ps::ShardStats after = ReadStats();
  EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString());
  EXPECT_TRUE(server_->shard()->health().ok()) << server_->shard()->health();
  // The shard still takes its real workers: worker 0 registers with the token (a
  // refused Register did not take its id), through the worker's own channel.
  ShardClient worker(NewPsChannel(address_, WithToken(kToken), kTimeout), "shard 0", 0, kTimeout);
  absl::StatusOr<ps::RegisterResponse> layout = worker.Register(Registration(0));
  EXPECT_TRUE(layout.ok()) << layout.status();
}

// Liveness's AbortRequest: only the session's holder may end the job with it; a
// forged one (right token, no or wrong session) is refused and changes nothing; the
// holder's aborts the job with its reason, on one line.
TEST_F(PsSecurityTest, OnlyTheSessionHolderCanReportAFailure) {
  ShardClient worker(NewPsChannel(address_, WithToken(kToken), kTimeout), "shard 0", 0, kTimeout);
  ASSERT_TRUE(worker.Register(Registration(0)).ok());
  auto stub = StubWith(WithToken(kToken));
  for (uint64_t session : {uint64_t{0}, uint64_t{12345}}) {
    grpc::ClientContext c;
    c.set_deadline(absl::ToChronoTime(absl::Now() + kPrompt));
    ps::AbortRequest request;
    request.set_worker_id(0);
    request.set_session(session);
    request.set_reason("forged");
    ps::AbortResponse r;
    EXPECT_EQ(stub->Abort(&c, request, &r).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_TRUE(server_->shard()->health().ok()) << server_->shard()->health();
  ASSERT_TRUE(worker.Abort("worker 0: shard 1 at h:1: push-pull of step 7: stopped answering\n"
                           "second line; job aborted").ok());
  EXPECT_EQ(server_->shard()->health().message(),
            "shard 0: worker 0 reports: shard 1 at h:1: push-pull of step 7: stopped answering "
            "second line; job aborted");
}

TEST_F(PsSecurityTest, ARefusedWorkerGetsOneClearLine) {
  ShardClient rogue(NewPsChannel(address_, WithToken(kWrongToken), kTimeout),
                    "shard 0 at " + address_, 0, kTimeout);
  absl::Status s = rogue.Register(Registration(0)).status();
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
  EXPECT_EQ(s.message(), "shard 0 at " + address_ +
                             ": register: refused: wrong token (not this job's --token_file or "
                             "RINGSIDE_TOKEN)");
}

TEST_F(PsSecurityTest, InProcessChannelCarriesTheToken) {
  ShardClient worker(server_->InProcessChannel(), "shard 0", 1, absl::Seconds(5));
  EXPECT_TRUE(worker.Register(Registration(1)).ok());
}

TEST_F(PsSecurityTest, FloodDoesNotStarveOrLeakThreads) {
  constexpr int kIdle = 300;
  constexpr int kRogue = 100;
  ReadStats();  // Warm.
  const int baseline = ThreadCount();
  std::vector<int> idle = OpenIdleConnections(server_->port(), kIdle);
  EXPECT_GE(static_cast<int>(idle.size()), kIdle / 2);
  // Rogue connections each with a Pull of a far step, which would hold a thread until
  // the shard's timeout if it were served.
  std::vector<std::unique_ptr<ps::ParameterServer::Stub>> rogues;
  std::vector<std::thread> callers;
  for (int i = 0; i < kRogue; ++i) rogues.push_back(StubWith(RpcSecurity()));
  for (auto& rogue : rogues) {
    callers.emplace_back([&rogue] {
      grpc::ClientContext c;
      c.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      ps::PullRequest request;
      request.set_kind(ps::PARAMS);
      request.set_step(1 << 20);
      auto stream = rogue->Pull(&c, request);
      ps::Chunk chunk;
      while (stream->Read(&chunk)) {
      }
      stream->Finish();
    });
  }
  const absl::Time start = absl::Now();
  ShardClient worker(NewPsChannel(address_, WithToken(kToken), kTimeout), "shard 0", 0, kTimeout);
  ASSERT_TRUE(worker.Register(Registration(0)).ok());
  ASSERT_TRUE(worker.Stats().ok());
  EXPECT_LT(absl::Now() - start, kPrompt);
  for (std::thread& t : callers) t.join();
  const int during = ThreadCount();
  CloseAll(&idle);
  callers.clear();
  rogues.clear();
  absl::SleepFor(absl::Seconds(1));
  const int after = ThreadCount();
  EXPECT_TRUE(worker.Stats().ok());
  EXPECT_LE(after, baseline + 16) << "baseline " << baseline << ", during " << during;
  EXPECT_LE(during, baseline + LimitsForClients(kWorkers, 8).max_threads + 16);
}

}  // namespace
}  // namespace ringside
