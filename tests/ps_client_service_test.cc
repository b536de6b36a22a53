// End-to-end tests of the parameter-server gRPC service on a loopback port picked by
// the kernel: legitimate workers drive it through ShardClient, a rogue client through
// the raw stub with hand-made (malformed) messages. Every call has a deadline.
#include "ps_server/ps_service.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ps_server/ps.grpc.pb.h"
#include "ps_server/sharding.h"
#include "ps_server/tcp_wire.h"
#include "common/socket_io.h"
#include "ps_worker/shard_client.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;

constexpr int kWorkers = 2;
constexpr char kModel[] = "mlp:4-2";
// The configuration the shard and its workers run.
// `transport`: RunConfig.ps_transport (these tests' default: gRPC's streams; "" would
// be the job default, TCP).
RunConfig JobConfig(const std::string& transport = kPsTransportGrpc) {
  RunConfig c;
  c.set_model(kModel);
  c.set_lr(0.02f);
  c.set_ps_transport(transport);
  return c;
}
// One shard over 10 floats, 16-byte chunks: chunks of 2, 4 and 4 floats (the grid is
// aligned on the slice's end).
constexpr int64_t kFullAt = 2;  // Offset of chunk 1, a full one.
constexpr int64_t kNumParams = 10;
constexpr int64_t kChunkBytes = 16;
constexpr int64_t kChunkFloats = 4;
constexpr int64_t kNumChunks = 3;
// How long the server lets a worker keep the others waiting, and the bound on anything
// that should be prompt.
constexpr absl::Duration kServerTimeout = absl::Seconds(5);
constexpr absl::Duration kPrompt = absl::Seconds(5);
constexpr double kTol = 1e-5;

SgdHyper Hyper(float lr, float momentum = 0) {
  SgdHyper h;
  h.lr = lr;
  h.momentum = momentum;
  return h;
}

ps::RegisterRequest Registration(int worker, const std::string& transport = kPsTransportGrpc) {
  ps::RegisterRequest r;
  r.set_worker_id(worker);
  r.set_num_workers(kWorkers);
  *r.mutable_config() = JobConfig(transport);
  r.set_model(kModel);
  r.set_num_params(kNumParams);
  return r;
}

std::vector<float> InitialParams() {
  std::vector<float> p(kNumParams);
  for (int64_t i = 0; i < kNumParams; ++i) p[i] = 0.5f - 0.125f * static_cast<float>(i);
  return p;
}

// Worker w's gradient of step s (already scaled by 1/N, as workers do).
std::vector<float> Gradient(int worker, int64_t step) {
  std::vector<float> g(kNumParams);
  for (int64_t i = 0; i < kNumParams; ++i) {
    g[i] = 0.25f * static_cast<float>(worker + 1) * static_cast<float>((i % 3) - 1) +
           0.125f * static_cast<float>(step + 1);
  }
  return g;
}

// p -= lr * (sum of `workers`' step-s gradients) * scale, with momentum (torch SGD).
// `carried` is the optimizer state ringside keeps: momentum * PyTorch's momentum_buffer.
void SgdStep(const SgdHyper& h, const std::vector<int>& workers, int64_t step, double scale,
             std::vector<double>* params, std::vector<double>* carried) {
  for (int64_t i = 0; i < kNumParams; ++i) {
    double d = 0;
    for (int w : workers) d += scale * Gradient(w, step)[i];
    const double v = (*carried)[i] + d;
    (*carried)[i] = h.momentum * v;
    (*params)[i] -= h.lr * v;
  }
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], kTol * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

ps::Chunk MakeChunk(int worker, int64_t step, ps::TensorKind kind, int64_t offset,
                    int64_t payload_bytes) {
  ps::Chunk c;
  c.set_worker_id(worker);
  c.set_step(step);
  c.set_kind(kind);
  c.set_offset(offset);
  c.mutable_data()->assign(payload_bytes, '\0');
  return c;
}

// A client that speaks the protocol with the raw stub and may send anything. Its calls
// carry sessions[w] for worker w (none: 0), unless a chunk has a session of its own.
class Rogue {
 public:
  explicit Rogue(const std::string& address)
      : stub_(ps::ParameterServer::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  std::map<int, uint64_t> sessions;
  uint64_t SessionOf(int worker) const {
    auto it = sessions.find(worker);
    return it == sessions.end() ? 0 : it->second;
  }
  ps::Chunk WithSession(ps::Chunk c) const {
    if (c.session() == 0) c.set_session(SessionOf(c.worker_id()));
    return c;
  }

  grpc::Status Shutdown(int worker) {
    grpc::ClientContext context;
    SetDeadline(&context);
    ps::ShutdownRequest request;
    request.set_worker_id(worker);
    request.set_session(SessionOf(worker));
    ps::ShutdownResponse response;
    return stub_->Shutdown(&context, request, &response);
  }

  grpc::Status Register(const ps::RegisterRequest& request) {
    grpc::ClientContext context;
    SetDeadline(&context);
    ps::RegisterResponse response;
    return stub_->Register(&context, request, &response);
  }

  // Streams `chunks` (protobuf-encoded, as any generated client would), half-closes,
  // reads whatever comes back.
  grpc::Status PushPull(const std::vector<ps::Chunk>& chunks,
                        std::vector<ps::Chunk>* replies = nullptr) {
    grpc::ClientContext context;
    SetDeadline(&context);
    auto stream = stub_->PushPull(&context);
    bool ok = true;
    for (const ps::Chunk& c : chunks) {
      if (!(ok = stream->Write(WithSession(c)))) break;
    }
    if (ok) stream->WritesDone();
    ps::Chunk in;
    while (stream->Read(&in)) {
      if (replies != nullptr) replies->push_back(in);
    }
    return stream->Finish();
  }

  grpc::Status Push(const std::vector<ps::Chunk>& chunks) {
    grpc::ClientContext context;
    SetDeadline(&context);
    ps::PushResponse response;
    auto writer = stub_->Push(&context, &response);
    bool ok = true;
    for (const ps::Chunk& c : chunks) {
      if (!(ok = writer->Write(WithSession(c)))) break;
    }
    if (ok) writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status Pull(int worker, int64_t step, ps::TensorKind kind) {
    grpc::ClientContext context;
    SetDeadline(&context);
    ps::PullRequest request;
    request.set_worker_id(worker);
    request.set_step(step);
    request.set_kind(kind);
    request.set_session(SessionOf(worker));
    auto reader = stub_->Pull(&context, request);
    ps::Chunk in;
    while (reader->Read(&in)) {
    }
    return reader->Finish();
  }

  grpc::Status Barrier(int worker, const std::string& name) {
    grpc::ClientContext context;
    SetDeadline(&context);
    ps::BarrierRequest request;
    request.set_worker_id(worker);
    request.set_name(name);
    request.set_session(SessionOf(worker));
    ps::BarrierResponse response;
    return stub_->Barrier(&context, request, &response);
  }

  ps::ParameterServer::Stub* stub() { return stub_.get(); }

  static void SetDeadline(grpc::ClientContext* context) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + kPrompt));
  }

 private:
  std::unique_ptr<ps::ParameterServer::Stub> stub_;
};

bool AlwaysReady(int64_t) { return true; }

class PsServiceTest : public ::testing::Test {
 protected:
  void StartServer(SyncPolicy sync, SgdHyper hyper,
                   absl::Duration timeout = kServerTimeout) {
    PsShardOptions options;
    options.num_workers = kWorkers;
    options.sync = sync;
    options.chunk_bytes = kChunkBytes;
    options.hyper = hyper;
    options.config = JobConfig(transport_);
    options.model = kModel;
    options.timeout = timeout;
    absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start("127.0.0.1:0", options, RpcSecurity());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
  }

  // Worker 0 uses the in-process channel (a colocated worker), the others TCP.
  std::unique_ptr<ShardClient> NewClient(int worker) {
    std::shared_ptr<grpc::Channel> channel =
        worker == 0 ? server_->InProcessChannel()
                    : NewPsChannel(address_, RpcSecurity(), kServerTimeout);
    return std::make_unique<ShardClient>(channel, absl::StrCat("shard 0 at ", address_), worker,
                                         kServerTimeout);
  }

  // Runs fn(w) for every worker on its own thread; returns their statuses.
  std::vector<absl::Status> OnEveryWorker(const std::function<absl::Status(int)>& fn) {
    std::vector<absl::Status> status(kWorkers);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w) threads.emplace_back([&, w] { status[w] = fn(w); });
    for (std::thread& t : threads) t.join();
    return status;
  }

  // Every worker pulls the step-0 parameters (worker 0 initialises them first).
  void InitialiseAndPull(std::vector<std::unique_ptr<ShardClient>>& clients,
                         std::vector<std::vector<float>>* params) {
    params->assign(kWorkers, std::vector<float>(kNumParams, -1.0f));
    const std::vector<float> p0 = InitialParams();
    std::vector<absl::Status> status = OnEveryWorker([&](int w) {
      if (w == 0) {
        absl::Status s = clients[0]->Push(0, ps::PARAMS, p0.data());
        if (!s.ok()) return s;
      }
      return clients[w]->Pull(0, ps::PARAMS, (*params)[w].data());
    });
    for (int w = 0; w < kWorkers; ++w) {
      ASSERT_TRUE(status[w].ok()) << "worker " << w << ": " << status[w];
      EXPECT_EQ((*params)[w], p0) << "worker " << w;
    }
  }

  // One BSP step on every worker; checks everybody's parameters against `want`.
  void StepAndCheck(std::vector<std::unique_ptr<ShardClient>>& clients, int64_t step,
                    std::vector<std::vector<float>>* params, const std::vector<double>& want,
                    std::vector<PushPullTiming>* timings = nullptr) {
    std::vector<PushPullTiming> t(kWorkers);
    std::vector<absl::Status> status = OnEveryWorker([&](int w) {
      const std::vector<float> g = Gradient(w, step);
      return clients[w]->PushPull(step, g.data(), (*params)[w].data(), AlwaysReady, AlwaysReady, nullptr,
                                  &t[w]);
    });
    for (int w = 0; w < kWorkers; ++w) {
      SCOPED_TRACE(absl::StrCat("worker ", w, " step ", step));
      ASSERT_TRUE(status[w].ok()) << status[w];
      ExpectNear((*params)[w], want);
      EXPECT_GT(t[w].bytes_sent, 0);
      EXPECT_GT(t[w].bytes_received, 0);
    }
    if (timings != nullptr) *timings = t;
  }

  // After hostile input: the shard is healthy, and the workers initialise, pull and
  // step 0 (lr 0.5) as if nothing had happened.
  void ExpectTheJobGoesOn(std::vector<std::unique_ptr<ShardClient>>& clients) {
    EXPECT_TRUE(server_->shard()->health().ok());
    std::vector<std::vector<float>> params;
    InitialiseAndPull(clients, &params);
    const std::vector<float> p0 = InitialParams();
    std::vector<double> want(p0.begin(), p0.end());
    std::vector<double> buf(kNumParams, 0.0);
    SgdStep(Hyper(0.5f), {0, 1}, 0, 1.0, &want, &buf);
    StepAndCheck(clients, 0, &params, want);
  }

  // Every worker says goodbye; the server's Wait returns OK.
  void ShutdownAll(std::vector<std::unique_ptr<ShardClient>>& clients) {
    auto done = std::async(std::launch::async, [&] { return server_->Wait(); });
    for (auto& c : clients) ASSERT_TRUE(c->Shutdown().ok());
    ASSERT_EQ(done.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
    EXPECT_TRUE(done.get().ok());
  }

  std::vector<std::unique_ptr<ShardClient>> RegisterAll() {
    std::vector<std::unique_ptr<ShardClient>> clients;
    for (int w = 0; w < kWorkers; ++w) {
      clients.push_back(NewClient(w));
      absl::StatusOr<ps::RegisterResponse> r = clients.back()->Register(Registration(w, transport_));
      EXPECT_TRUE(r.ok()) << r.status();
      ConnectDataPlane(clients.back().get());
    }
    return clients;
  }

  // With the TCP transport, connects the registered client's data plane.
  void ConnectDataPlane(ShardClient* client) {
    if (transport_ != kPsTransportTcp) {
      EXPECT_EQ(client->layout().data_port(), 0);
      return;
    }
    EXPECT_GT(client->layout().data_port(), 0);
    absl::Status s = client->ConnectDataPlane("127.0.0.1", "");
    EXPECT_TRUE(s.ok()) << s;
  }

  // Two workers, BSP with momentum: each step's parameters against the closed form;
  // the shard's byte counts against the workers'; the optimizer state, a barrier and
  // the goodbyes. Over the transport of `transport_`.
  void TrainInLockstep();

  // An ASP job: worker 0 has set the parameters to InitialParams() and pulled them into
  // `params`.
  std::vector<std::unique_ptr<ShardClient>> StartAspJob(const SgdHyper& hyper,
                                                        std::vector<float>* params) {
    StartServer(SyncPolicy{SyncMode::kAsp, 0}, hyper);
    std::vector<std::unique_ptr<ShardClient>> clients = RegisterAll();
    const std::vector<float> p0 = InitialParams();
    EXPECT_TRUE(clients[0]->Push(0, ps::PARAMS, p0.data()).ok());
    params->assign(kNumParams, 0.0f);
    EXPECT_TRUE(clients[0]->Pull(0, ps::PARAMS, params->data()).ok());
    return clients;
  }

  std::unique_ptr<PsServer> server_;
  std::string address_;
  std::string transport_ = kPsTransportGrpc;  // RunConfig.ps_transport of the job.
};

TEST_F(PsServiceTest, StartRejectsBadOptions) {
  PsShardOptions options;
  options.num_workers = 0;
  EXPECT_EQ(PsServer::Start("127.0.0.1:0", options, RpcSecurity()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A port another shard listens on is refused (gRPC's default SO_REUSEPORT would let
// both listen and split the workers between them), on both transports; the half-built
// server is destroyed without touching the gRPC server it never got (it crashed so).
TEST_F(PsServiceTest, StartOnAPortInUseFailsCleanly) {
  for (const std::string transport : {kPsTransportGrpc, kPsTransportTcp}) {
    transport_ = transport;
    StartServer(SyncPolicy{SyncMode::kBsp, 0}, SgdHyper{});
    PsShardOptions options = server_->shard()->options();
    absl::StatusOr<std::unique_ptr<PsServer>> second = PsServer::Start(address_, options, RpcSecurity());
    EXPECT_TRUE(absl::IsUnavailable(second.status())) << transport << ": " << second.status();
    EXPECT_THAT(std::string(second.status().message()),
                ::testing::HasSubstr(absl::StrCat("cannot listen on ", address_)));
    server_.reset();
  }
}

TEST_F(PsServiceTest, TwoWorkersTrainInLockstep) { TrainInLockstep(); }

// The same job with the tensors over the TCP data plane: the same parameters, the
// same byte counts on both ends (frames instead of Chunk messages).
TEST_F(PsServiceTest, TwoWorkersTrainInLockstepOverTcp) {
  transport_ = kPsTransportTcp;
  TrainInLockstep();
}

void PsServiceTest::TrainInLockstep() {
  const SgdHyper hyper = Hyper(0.25f, /*momentum=*/0.9f);
  StartServer(SyncPolicy{SyncMode::kBsp, 0}, hyper);
  std::vector<std::unique_ptr<ShardClient>> clients;
  for (int w = 0; w < kWorkers; ++w) clients.push_back(NewClient(w));
  // Registration from two threads at once.
  std::vector<ps::RegisterResponse> layout(kWorkers);
  std::vector<absl::Status> status = OnEveryWorker([&](int w) {
    absl::StatusOr<ps::RegisterResponse> r = clients[w]->Register(Registration(w, transport_));
    if (r.ok()) layout[w] = *r;
    return r.status();
  });
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(status[w].ok()) << status[w];
    ConnectDataPlane(clients[w].get());
    EXPECT_EQ(layout[w].offset(), 0);
    EXPECT_EQ(layout[w].size(), kNumParams);
    EXPECT_EQ(layout[w].chunk_floats(), kChunkFloats);
    EXPECT_EQ(layout[w].sync(), "bsp");
    EXPECT_EQ(clients[w]->num_chunks(), kNumChunks);
  }

  std::vector<std::vector<float>> params;
  InitialiseAndPull(clients, &params);
  const std::vector<float> p0 = InitialParams();
  std::vector<double> want(p0.begin(), p0.end());
  std::vector<double> buf(kNumParams, 0.0);
  std::vector<PushPullTiming> timings;
  for (int64_t step = 0; step < 2; ++step) {
    // BSP: v = carried + (g0 + g1), p -= lr * v, carried = mu * v.
    SgdStep(hyper, {0, 1}, step, 1.0, &want, &buf);
    StepAndCheck(clients, step, &params, want, &timings);
  }

  // The shard's record of the last step counts exactly the bytes the workers counted
  // on their side of the wire.
  absl::StatusOr<ps::ShardStats> stats = clients[1]->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->steps_completed(), 2);
  EXPECT_EQ(stats->last_step().step(), 1);
  EXPECT_EQ(stats->last_step().bytes_received(), timings[0].bytes_sent + timings[1].bytes_sent);
  EXPECT_EQ(stats->last_step().bytes_sent(),
            timings[0].bytes_received + timings[1].bytes_received);

  // A checkpoint pull of the optimizer state returns the carried momentum.
  std::vector<float> state(kNumParams);
  ASSERT_TRUE(clients[0]->Pull(2, ps::OPTIMIZER_STATE, state.data()).ok());
  ExpectNear(state, buf);

  // The evaluation barrier sums over workers.
  std::vector<std::vector<double>> sums(kWorkers);
  status = OnEveryWorker([&](int w) {
    absl::StatusOr<std::vector<double>> s = clients[w]->Barrier("eval/0", {1.0 + w, 10.0});
    if (s.ok()) sums[w] = *s;
    return s.status();
  });
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(status[w].ok()) << status[w];
    EXPECT_EQ(sums[w], (std::vector<double>{3.0, 20.0}));
  }
  ShutdownAll(clients);
}

TEST_F(PsServiceTest, RogueCallsGetTheRightCodesAndTheJobGoesOn) {
  const SgdHyper hyper = Hyper(0.5f);
  StartServer(SyncPolicy{SyncMode::kBsp, 0}, hyper);
  Rogue rogue(address_);
  using grpc::StatusCode;

  // Registrations that do not match the job. None of them fixes the layout.
  ps::RegisterRequest bad = Registration(7);
  EXPECT_EQ(rogue.Register(bad).error_code(), StatusCode::INVALID_ARGUMENT);
  bad = Registration(1);
  bad.mutable_config()->set_lr(0.5f);
  grpc::Status s = rogue.Register(bad);
  EXPECT_EQ(s.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), "configuration mismatch");  // Nothing about the shard's.
  bad = Registration(1);
  bad.set_model("resnet");
  EXPECT_EQ(rogue.Register(bad).error_code(), StatusCode::FAILED_PRECONDITION);
  bad = Registration(1);
  bad.set_num_workers(3);
  s = rogue.Register(bad);
  EXPECT_EQ(s.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), "configuration mismatch");

  std::vector<std::unique_ptr<ShardClient>> clients = RegisterAll();
  ASSERT_EQ(clients[1]->layout().size(), kNumParams);
  // From here on the rogue has the workers' sessions (a buggy worker, not a stranger).
  for (int w = 0; w < kWorkers; ++w) rogue.sessions[w] = clients[w]->layout().session();

  // Streams from a registered id with bad chunks. Each is refused on its first chunk,
  // before anything is taken.
  constexpr int64_t kFull = kChunkFloats * 4;
  EXPECT_EQ(rogue.Push({MakeChunk(1, 0, ps::GRADIENTS, kFullAt, kFull)}).error_code(),
            StatusCode::FAILED_PRECONDITION);  // Gradients before initialisation.
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, ps::GRADIENTS, kFullAt, 3)}).error_code(),
            StatusCode::INVALID_ARGUMENT);  // Payload not whole floats.
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, ps::GRADIENTS, kFullAt, kFull - 4)}).error_code(),
            StatusCode::INVALID_ARGUMENT);  // Payload short of the chunk.
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, ps::GRADIENTS, kFullAt, 2 * kFull)}).error_code(),
            StatusCode::INVALID_ARGUMENT);  // Bigger than a chunk.
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, ps::GRADIENTS, 0, kFull)}).error_code(),
            StatusCode::INVALID_ARGUMENT);  // A full chunk on the short first chunk.
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, ps::GRADIENTS, 12, kFull)}).error_code(),
            StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, ps::GRADIENTS, 1 << 30, kFull)}).error_code(),
            StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, ps::GRADIENTS, -4, kFull)}).error_code(),
            StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, ps::GRADIENTS, 4, kFull)}).error_code(),
            StatusCode::INVALID_ARGUMENT);  // Off the chunk grid.
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, -1, ps::GRADIENTS, kFullAt, kFull)}).error_code(),
            StatusCode::INVALID_ARGUMENT);  // Negative step.
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, static_cast<ps::TensorKind>(9), kFullAt, kFull)})
                .error_code(),
            StatusCode::INVALID_ARGUMENT);  // Unknown kind.
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, ps::PARAMS, kFullAt, kFull)}).error_code(),
            StatusCode::INVALID_ARGUMENT);  // PushPull takes gradients only.
  EXPECT_EQ(rogue.PushPull({MakeChunk(5, 0, ps::GRADIENTS, kFullAt, kFull)}).error_code(),
            StatusCode::INVALID_ARGUMENT);  // Unknown worker.
  EXPECT_EQ(rogue.Push({MakeChunk(1, 0, ps::PARAMS, kFullAt, kFull)}).error_code(),
            StatusCode::PERMISSION_DENIED);  // Only worker 0 initialises.
  EXPECT_EQ(rogue.Pull(1, 0, ps::GRADIENTS).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(rogue.Pull(9, 0, ps::PARAMS).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(rogue.Pull(1, -1, ps::PARAMS).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(rogue.Barrier(4, "eval/0").error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(server_->shard()->health().ok());

  // The legitimate workers train.
  std::vector<std::vector<float>> params;
  InitialiseAndPull(clients, &params);
  const std::vector<float> p0 = InitialParams();
  std::vector<double> want(p0.begin(), p0.end());
  std::vector<double> buf(kNumParams, 0.0);
  SgdStep(hyper, {0, 1}, 0, 1.0, &want, &buf);
  StepAndCheck(clients, 0, &params, want);

  // Replays of a finished step, in the middle of training.
  std::vector<float> junk(kNumParams, 100.0f);
  EXPECT_EQ(rogue.PushPull({MakeChunk(1, 0, ps::GRADIENTS, kFullAt, kFull)}).error_code(),
            StatusCode::FAILED_PRECONDITION);  // Worker 1 pushed chunk 1 of step 0 already.
  EXPECT_EQ(rogue.Push({MakeChunk(0, 0, ps::PARAMS, kFullAt, kFull)}).error_code(),
            StatusCode::FAILED_PRECONDITION);  // Initialisation after training started.
  EXPECT_EQ(rogue.Pull(1, 0, ps::PARAMS).error_code(),
            StatusCode::FAILED_PRECONDITION);  // The step-0 parameters are gone.
  EXPECT_TRUE(server_->shard()->health().ok());

  // The workers still complete a step, with exactly their own gradients applied.
  SgdStep(hyper, {0, 1}, 1, 1.0, &want, &buf);
  StepAndCheck(clients, 1, &params, want);
  ShutdownAll(clients);
}

// A stranger (no session) cannot act as a registered worker: every call is refused
// with PERMISSION_DENIED, a duplicate registration with ALREADY_EXISTS, and nothing
// changes: the statistics, the health, the shard's end, the workers' training.
TEST_F(PsServiceTest, CallsWithoutTheWorkersSessionAreRefusedAndChangeNothing) {
  const SgdHyper hyper = Hyper(0.5f);
  StartServer(SyncPolicy{SyncMode::kBsp, 0}, hyper);
  std::vector<std::unique_ptr<ShardClient>> clients = RegisterAll();
  std::vector<std::vector<float>> params;
  InitialiseAndPull(clients, &params);
  const ps::ShardStats before = server_->shard()->Stats();
  using grpc::StatusCode;
  Rogue rogue(address_);
  grpc::Status s = rogue.Register(Registration(1));
  EXPECT_EQ(s.error_code(), StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(s.error_message(), "worker id 1 is registered already");
  constexpr int64_t kFull = kChunkFloats * 4;
  const std::string denied = "call for worker 1 without its session (not the registered worker)";
  s = rogue.PushPull({MakeChunk(1, 0, ps::GRADIENTS, kFullAt, kFull)});
  EXPECT_EQ(s.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), denied);
  s = rogue.Push({MakeChunk(1, 0, ps::GRADIENTS, kFullAt, kFull)});
  EXPECT_EQ(s.error_code(), StatusCode::PERMISSION_DENIED);
  s = rogue.Pull(1, 0, ps::PARAMS);
  EXPECT_EQ(s.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), denied);
  EXPECT_EQ(rogue.Barrier(0, "eval/0").error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(rogue.Barrier(1, "end").error_code(), StatusCode::PERMISSION_DENIED);
  // Two goodbyes used to end the shard.
  EXPECT_EQ(rogue.Shutdown(0).error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(rogue.Shutdown(1).error_code(), StatusCode::PERMISSION_DENIED);
  // A guess one bit off is as wrong as none.
  rogue.sessions[1] = clients[1]->layout().session() ^ 1;
  EXPECT_EQ(rogue.Pull(1, 0, ps::PARAMS).error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(rogue.Shutdown(1).error_code(), StatusCode::PERMISSION_DENIED);

  // Nothing changed.
  const ps::ShardStats after = server_->shard()->Stats();
  EXPECT_EQ(after.bytes_in(), before.bytes_in());
  EXPECT_EQ(after.bytes_out(), before.bytes_out());
  EXPECT_EQ(after.steps_completed(), before.steps_completed());
  EXPECT_TRUE(server_->shard()->health().ok());
  auto done = std::async(std::launch::async, [&] { return server_->Wait(); });
  EXPECT_EQ(done.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  // The workers train on with exactly their own gradients, then end the shard.
  const std::vector<float> p0 = InitialParams();
  std::vector<double> want(p0.begin(), p0.end());
  std::vector<double> buf(kNumParams, 0.0);
  SgdStep(hyper, {0, 1}, 0, 1.0, &want, &buf);
  StepAndCheck(clients, 0, &params, want);
  for (auto& c : clients) ASSERT_TRUE(c->Shutdown().ok());
  ASSERT_EQ(done.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
  EXPECT_TRUE(done.get().ok());
}

// A registered worker's calls that the protocol does not allow at that point fail that
// call at once, with one clear message, blame nobody and change nothing.
TEST_F(PsServiceTest, ProtocolViolationsFailThatCallAtOnceAndTheJobGoesOn) {
  const SgdHyper hyper = Hyper(0.5f);
  StartServer(SyncPolicy{SyncMode::kBsp, 0}, hyper);
  std::vector<std::unique_ptr<ShardClient>> clients = RegisterAll();
  std::vector<std::vector<float>> params;
  InitialiseAndPull(clients, &params);
  const ps::ShardStats before = server_->shard()->Stats();
  using grpc::StatusCode;
  Rogue rogue(address_);
  for (int w = 0; w < kWorkers; ++w) rogue.sessions[w] = clients[w]->layout().session();
  const absl::Time start = absl::Now();
  // A pull of a future step (used to wait for the timeout and abort the job, blaming
  // the honest workers).
  grpc::Status s = rogue.Pull(1, 5, ps::PARAMS);
  EXPECT_EQ(s.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(),
            "worker 1 asked for the parameters of step 5 (chunk 0), but has pushed that chunk "
            "only for no step");
  // Made-up barriers (one used to abort the job a timeout later).
  s = rogue.Barrier(1, "drain");
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "worker 1: 'drain' is not a barrier of the protocol (end, eval/N, checkpoint/N)");
  s = rogue.Barrier(0, "eval/7");
  EXPECT_EQ(s.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), "worker 0 entered barrier 'eval/7', its next barrier is number 0");
  // Streams that carry no whole tensor get an error, never an OK.
  s = rogue.PushPull({});
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "push-pull without a (well-formed) gradient chunk");
  s = rogue.Push({});
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "push ended after 0 of 3 chunks (missing or malformed)");
  // A NaN gradient: refused, naming worker, step and range; nothing applied.
  ps::Chunk poisoned = MakeChunk(1, 0, ps::GRADIENTS, kFullAt, kChunkFloats * 4);
  const float values[kChunkFloats] = {0.5f, std::nanf(""), 1.0f, 2.0f};
  poisoned.set_data(reinterpret_cast<const char*>(values), sizeof(values));
  s = rogue.PushPull({poisoned});
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "worker 1 pushed a non-finite gradient in step 0: elements [2, 6) of the parameters "
            "(first at 3: nan); push refused, nothing applied");
  EXPECT_LT(absl::Now() - start, kPrompt);

  const ps::ShardStats after = server_->shard()->Stats();
  EXPECT_EQ(after.bytes_in(), before.bytes_in());
  EXPECT_EQ(after.steps_completed(), before.steps_completed());
  EXPECT_TRUE(server_->shard()->health().ok());
  // The workers train on with exactly their own gradients and pass their real barrier.
  const std::vector<float> p0 = InitialParams();
  std::vector<double> want(p0.begin(), p0.end());
  std::vector<double> buf(kNumParams, 0.0);
  SgdStep(hyper, {0, 1}, 0, 1.0, &want, &buf);
  StepAndCheck(clients, 0, &params, want);
  std::vector<absl::Status> status = OnEveryWorker(
      [&](int w) { return clients[w]->Barrier("eval/0", {1.0}).status(); });
  for (const absl::Status& b : status) EXPECT_TRUE(b.ok()) << b;
  ShutdownAll(clients);
  // Goodbye is said once.
  s = rogue.Shutdown(0);
  EXPECT_EQ(s.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), "worker 0 said goodbye already");
}

// PushPull runs on the zero-copy WireChunk codec on both ends of ShardClient; a client
// built from ps.proto alone (protobuf encoding, default fields left out) must get the
// same service.
TEST_F(PsServiceTest, ProtobufEncodedClientTrainsBesideShardClient) {
  const SgdHyper hyper = Hyper(0.5f, /*momentum=*/0.5f);
  StartServer(SyncPolicy{SyncMode::kBsp, 0}, hyper);
  std::vector<std::unique_ptr<ShardClient>> clients = RegisterAll();
  std::vector<std::vector<float>> params;
  InitialiseAndPull(clients, &params);
  const std::vector<float> p0 = InitialParams();
  std::vector<double> want(p0.begin(), p0.end());
  std::vector<double> buf(kNumParams, 0.0);
  Rogue plain(address_);  // Worker 1, through the generated stub (with its session).
  plain.sessions[1] = clients[1]->layout().session();
  for (int64_t step = 0; step < 2; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    SgdStep(hyper, {0, 1}, step, 1.0, &want, &buf);
    auto worker0 = std::async(std::launch::async, [&] {
      PushPullTiming timing;
      const std::vector<float> g = Gradient(0, step);
      return clients[0]->PushPull(step, g.data(), params[0].data(), AlwaysReady, AlwaysReady, nullptr, &timing);
    });
    const std::vector<float> g1 = Gradient(1, step);
    std::vector<ps::Chunk> push;
    for (int64_t k = 0; k < kNumChunks; ++k) {
      const Slice c = ChunkOf(kNumParams, kChunkFloats, k);
      ps::Chunk chunk;
      chunk.set_worker_id(1);
      chunk.set_step(step);
      chunk.set_kind(ps::GRADIENTS);
      chunk.set_offset(c.offset);
      chunk.set_data(reinterpret_cast<const char*>(g1.data() + c.offset), c.size * sizeof(float));
      push.push_back(chunk);
    }
    std::vector<ps::Chunk> replies;
    grpc::Status s = plain.PushPull(push, &replies);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(worker0.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
    absl::Status s0 = worker0.get();
    ASSERT_TRUE(s0.ok()) << s0;
    ExpectNear(params[0], want);
    // The replies parse as ps.proto Chunks: one per pushed chunk, each the chunk's
    // updated parameters for the next step.
    ASSERT_EQ(replies.size(), kNumChunks);
    std::vector<float> got(kNumParams, -1.0f);
    for (const ps::Chunk& r : replies) {
      EXPECT_EQ(r.kind(), ps::PARAMS);
      EXPECT_EQ(r.step(), step + 1);
      EXPECT_EQ(r.worker_id(), 1);
      const int64_t k = ChunkIndexAt(kNumParams, kChunkFloats, r.offset());
      ASSERT_GE(k, 0);
      const Slice c = ChunkOf(kNumParams, kChunkFloats, k);
      ASSERT_EQ(r.offset(), c.offset);
      ASSERT_EQ(r.data().size(), c.size * sizeof(float));
      std::memcpy(got.data() + c.offset, r.data().data(), r.data().size());
    }
    ExpectNear(got, want);
  }
  EXPECT_TRUE(server_->shard()->health().ok());
}

TEST_F(PsServiceTest, MessageOverTheReceiveCapIsRefused) {
  StartServer(SyncPolicy{SyncMode::kBsp, 0}, Hyper(0.5f));
  std::vector<std::unique_ptr<ShardClient>> clients = RegisterAll();
  Rogue rogue(address_);
  // One message larger than the server accepts (64 MiB + 4 KiB).
  grpc::Status s = rogue.Push({MakeChunk(1, 0, ps::GRADIENTS, 0, kMaxPsMessageBytes + 1)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  ExpectTheJobGoesOn(clients);
}

// A raw connection to the shard's TCP data plane that says `hello` (then no token) and
// returns the shard's answer: OK for kPsOk, else the status of its kPsError frame.
absl::Status RawHello(int port, const PsHello& hello, ScopedFd* fd) {
  const absl::Time deadline = absl::Now() + kPrompt;
  absl::StatusOr<ScopedFd> c = ConnectTcp("127.0.0.1", absl::StrCat(port), deadline);
  if (!c.ok()) return c.status();
  *fd = std::move(*c);
  if (absl::Status s = WriteAll(fd->get(), &hello, sizeof(hello), deadline); !s.ok()) return s;
  absl::StatusOr<FrameHeader> reply = ReadFrameHeader(fd->get(), deadline, "shard");
  if (!reply.ok()) return reply.status();
  return reply->tag == kPsOk ? absl::OkStatus() : absl::InternalError("unexpected frame");
}

// Hostile input at the TCP data plane: each is refused with one named error on that
// connection alone, and the job goes on as if nothing happened.
TEST_F(PsServiceTest, TcpDataPlaneRefusesStrangersAndMalformedFrames) {
  transport_ = kPsTransportTcp;
  StartServer(SyncPolicy{SyncMode::kBsp, 0}, Hyper(0.5f));
  std::vector<std::unique_ptr<ShardClient>> clients = RegisterAll();
  const int port = clients[1]->layout().data_port();
  const uint64_t session = clients[1]->layout().session();
  ScopedFd fd;
  absl::Status s = RawHello(port, {kPsHelloMagic + 1, kPsWireVersion, 1, 0, session}, &fd);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("not a ringside parameter-server data connection"));
  s = RawHello(port, {kPsHelloMagic, kPsWireVersion, 1, 0, session + 1}, &fd);
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  s = RawHello(port, {kPsHelloMagic, kPsWireVersion, 7, 0, session}, &fd);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;  // No worker 7.
  // A chunk frame whose size is not the grid's (one float short), and one that claims
  // a terabyte: refused before a float is read.
  for (const uint64_t bytes : {sizeof(ChunkRef) + 4 * ChunkOf(kNumParams, kChunkFloats, 1).size - 4,
                               uint64_t{1} << 40}) {
    ASSERT_TRUE(RawHello(port, {kPsHelloMagic, kPsWireVersion, 1, 0, session}, &fd).ok());
    const FrameHeader header = {kPsPushPull, bytes};
    const ChunkRef ref = {0, 1, ps::GRADIENTS};
    ASSERT_TRUE(WriteAll(fd.get(), &header, sizeof(header), absl::Now() + kPrompt).ok());
    ASSERT_TRUE(WriteAll(fd.get(), &ref, sizeof(ref), absl::Now() + kPrompt).ok());
    absl::StatusOr<FrameHeader> reply = ReadFrameHeader(fd.get(), absl::Now() + kPrompt, "shard");
    EXPECT_TRUE(absl::IsInvalidArgument(reply.status())) << reply.status();
    EXPECT_THAT(std::string(reply.status().message()),
                HasSubstr(absl::StrCat("sent a chunk frame of ", bytes, " bytes for chunk 1")));
  }
  // An unknown request.
  ASSERT_TRUE(RawHello(port, {kPsHelloMagic, kPsWireVersion, 1, 0, session}, &fd).ok());
  const FrameHeader unknown = {99, 0};
  ASSERT_TRUE(WriteAll(fd.get(), &unknown, sizeof(unknown), absl::Now() + kPrompt).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(
      ReadFrameHeader(fd.get(), absl::Now() + kPrompt, "shard").status()));
  fd.Reset();
  ExpectTheJobGoesOn(clients);
}

TEST_F(PsServiceTest, BrokenStreamAbortsTheJobNamingTheWorker) {
  // A long server timeout: only the broken stream can end the wait.
  StartServer(SyncPolicy{SyncMode::kBsp, 0}, Hyper(0.5f), absl::Seconds(15));
  std::vector<std::unique_ptr<ShardClient>> clients = RegisterAll();
  std::vector<std::vector<float>> params;
  InitialiseAndPull(clients, &params);

  // Worker 0 pushes its whole step and waits for worker 1.
  auto worker0 = std::async(std::launch::async, [&] {
    PushPullTiming timing;
    const std::vector<float> g = Gradient(0, 0);
    return clients[0]->PushPull(0, g.data(), params[0].data(), AlwaysReady, AlwaysReady, nullptr, &timing);
  });
  // Worker 1 pushes one chunk, then its stream breaks mid-step.
  Rogue rogue(address_);
  grpc::ClientContext context;
  Rogue::SetDeadline(&context);
  auto stream = rogue.stub()->PushPull(&context);
  ps::Chunk first = MakeChunk(1, 0, ps::GRADIENTS, 0, ChunkOf(kNumParams, kChunkFloats, 0).size * 4);
  first.set_session(clients[1]->layout().session());
  ASSERT_TRUE(stream->Write(first));
  // Chunk 0 of step 1 is ready once both pushes of it were taken: the server's stream
  // handler knows it serves worker 1. (Until worker 1's push of it is in, worker 1
  // may not ask for it: FailedPrecondition.)
  const absl::Time give_up = absl::Now() + kPrompt;
  for (;;) {
    ps::Chunk out;
    absl::StatusOr<bool> ready = server_->shard()->ServeIfReady(1, 1, ps::PARAMS, 0, &out);
    ASSERT_TRUE(ready.ok() || absl::IsFailedPrecondition(ready.status())) << ready.status();
    if (ready.ok() && *ready) break;
    ASSERT_LT(absl::Now(), give_up) << "worker 1's chunk never arrived";
    absl::SleepFor(absl::Milliseconds(2));
  }
  const absl::Time broken = absl::Now();
  context.TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);

  ASSERT_EQ(worker0.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
  absl::Status s = worker0.get();
  EXPECT_LT(absl::Now() - broken, kPrompt);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker 1 lost"));
  auto done = std::async(std::launch::async, [&] { return server_->Wait(); });
  ASSERT_EQ(done.wait_for(absl::ToChronoSeconds(kPrompt)), std::future_status::ready);
  EXPECT_EQ(done.get().code(), absl::StatusCode::kAborted);
}

TEST_F(PsServiceTest, StreamBrokenWhileWaitingForRepliesAbortsTheJob) {
  // A long server timeout: only the broken stream can end the wait.
  StartServer(SyncPolicy{SyncMode::kBsp, 0}, Hyper(0.5f), absl::Seconds(15));
  std::vector<std::unique_ptr<ShardClient>> clients = RegisterAll();
  std::vector<std::vector<float>> params;
  InitialiseAndPull(clients, &params);
  // Worker 1 pushes its whole step and half-closes; worker 0 pushes nothing, so the
  // server's handler for worker 1 waits for the step's update.
  Rogue rogue(address_);
  grpc::ClientContext context;
  Rogue::SetDeadline(&context);
  auto stream = rogue.stub()->PushPull(&context);
  const std::vector<float> g1 = Gradient(1, 0);
  for (int64_t k = kNumChunks - 1; k >= 0; --k) {
    const Slice c = ChunkOf(kNumParams, kChunkFloats, k);
    ps::Chunk chunk = MakeChunk(1, 0, ps::GRADIENTS, c.offset, c.size * 4);
    chunk.set_session(clients[1]->layout().session());
    ASSERT_TRUE(stream->Write(chunk));
  }
  ASSERT_TRUE(stream->WritesDone());
  // Let the handler read the pushes and start waiting (had it not yet, the cancel
  // below is seen on the reading side, with the same outcome).
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time broken = absl::Now();
  context.TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The shard notices at its next poll, not at its 15 s timeout.
  for (;;) {
    absl::Status health = server_->shard()->health();
    if (!health.ok()) {
      EXPECT_EQ(health.code(), absl::StatusCode::kAborted);
      EXPECT_THAT(health.message(), HasSubstr("worker 1 lost"));
      break;
    }
    ASSERT_LT(absl::Now() - broken, kPrompt) << "the broken stream was not noticed";
    absl::SleepFor(absl::Milliseconds(5));
  }
  // Worker 0 then gets the abort instead of waiting for worker 1.
  PushPullTiming timing;
  const std::vector<float> g0 = Gradient(0, 0);
  absl::Status s = clients[0]->PushPull(0, g0.data(), params[0].data(), AlwaysReady, AlwaysReady, nullptr, &timing);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
}

// The worker's backward may still read a layer's parameters when that layer's updated
// chunk comes back (its gradient went out first): the reply waits for wait_writable.
TEST_F(PsServiceTest, AnEarlyReplyWaitsUntilItsParametersAreWritable) {
  const SgdHyper hyper = Hyper(0.25f);
  std::vector<float> params;
  std::vector<std::unique_ptr<ShardClient>> clients = StartAspJob(hyper, &params);
  const std::vector<float> p0 = InitialParams();
  ASSERT_EQ(params, p0);
  for (bool allow : {true, false}) {
    SCOPED_TRACE(allow ? "released" : "cancelled");
    const int64_t step = allow ? 0 : 1;
    const std::vector<float> g = Gradient(0, step);
    const std::vector<float> before = params;
    absl::Notification arrived, release;
    auto wait_writable = [&](int64_t) {
      if (!arrived.HasBeenNotified()) arrived.Notify();
      release.WaitForNotification();
      return allow;
    };
    PushPullTiming timing;
    std::future<absl::Status> call = std::async(std::launch::async, [&] {
      return clients[0]->PushPull(step, g.data(), params.data(), AlwaysReady, wait_writable, nullptr,
                                  &timing);
    });
    ASSERT_TRUE(arrived.WaitForNotificationWithTimeout(absl::Seconds(30)));
    // The reply is here, held back: nothing was written.
    EXPECT_EQ(params, before);
    release.Notify();
    const absl::Status s = call.get();
    if (allow) {
      ASSERT_TRUE(s.ok()) << s;
      std::vector<double> want(p0.begin(), p0.end());
      std::vector<double> buf(kNumParams, 0.0);
      SgdStep(hyper, {0}, 0, kWorkers, &want, &buf);
      ExpectNear(params, want);
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
      EXPECT_EQ(params, before);
    }
  }
}

TEST_F(PsServiceTest, AspWorkerRunsAheadAlone) {
  const SgdHyper hyper = Hyper(0.25f);
  std::vector<float> params;
  std::vector<std::unique_ptr<ShardClient>> clients = StartAspJob(hyper, &params);
  const std::vector<float> p0 = InitialParams();
  ASSERT_EQ(params, p0);
  std::vector<double> want(p0.begin(), p0.end());
  std::vector<double> buf(kNumParams, 0.0);
  // Worker 1 never pushes; worker 0's pushes step with N times its gradient.
  for (int64_t step = 0; step < 3; ++step) {
    PushPullTiming timing;
    const std::vector<float> g = Gradient(0, step);
    ASSERT_TRUE(clients[0]->PushPull(step, g.data(), params.data(), AlwaysReady, AlwaysReady, nullptr, &timing).ok());
    SgdStep(hyper, {0}, step, kWorkers, &want, &buf);
    ExpectNear(params, want);
  }
  ShutdownAll(clients);
}

}  // namespace
}  // namespace ringside
