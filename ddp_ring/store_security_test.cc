// The store's transport security: every method refuses a call without the job's token
// (UNAUTHENTICATED, nothing changed), and a flood of idle connections and refused calls
// neither starves a real client nor leaves threads behind.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/rpc_flood_test_util.h"
#include "common/rpc_security.h"
#include "ddp_ring/store.grpc.pb.h"
#include "ddp_ring/store.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr char kToken[] = "store-test-token-0123456789abcdef";
constexpr char kWrongToken[] = "store-test-token-0123456789abcdeX";
constexpr absl::Duration kConnect = absl::Seconds(10);
constexpr absl::Duration kRpc = absl::Seconds(10);
// Bound on anything a real client must get promptly, flood or not (generous).
constexpr absl::Duration kPrompt = absl::Seconds(10);

RpcSecurity WithToken(const std::string& token) {
  RpcSecurity s;
  s.token = token;
  return s;
}

// A server holding kToken, and a client with the same token.
class StoreSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<StoreServer>> server =
        StoreServer::Start("127.0.0.1", 0, WithToken(kToken), 4);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    good_ = ClientWith(WithToken(kToken));
    ASSERT_NE(good_, nullptr);
  }

  // A client of the server that connects with `security`.
  std::unique_ptr<Store> ClientWith(const RpcSecurity& security) {
    absl::StatusOr<std::unique_ptr<Store>> client =
        ConnectStore("127.0.0.1", server_->port(), security, kConnect, kRpc);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::string target() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<Store> good_;
};

void ExpectRefused(const absl::Status& s, absl::string_view what) {
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << what << ": " << s;
  EXPECT_FALSE(absl::StrContains(s.message(), "\n")) << s;
  EXPECT_FALSE(absl::StrContains(s.message(), kToken)) << "leaks the token: " << s;
}

TEST_F(StoreSecurityTest, RefusedCallsChangeNothing) {
  ASSERT_TRUE(good_->Set("k", "v").ok());
  ASSERT_TRUE(good_->Add("n", 5).ok());
  for (const RpcSecurity& bad : {RpcSecurity(), WithToken(kWrongToken)}) {
    std::unique_ptr<Store> rogue = ClientWith(bad);
    ASSERT_NE(rogue, nullptr);
    ExpectRefused(rogue->Set("k", "forged"), "Set");
    ExpectRefused(rogue->Set("new", "x"), "Set new");
    ExpectRefused(rogue->Add("n", 100).status(), "Add");
    ExpectRefused(rogue->Get("k", absl::Seconds(1)).status(), "Get");
    ExpectRefused(rogue->Wait({"k"}, absl::Seconds(1)), "Wait");
    const absl::Time start = absl::Now();
    // A refused blocking call returns at once, not after its timeout.
    ExpectRefused(rogue->Get("never", absl::Seconds(30)).status(), "Get never");
    EXPECT_LT(absl::Now() - start, kPrompt);
  }
  // Nothing changed.
  EXPECT_EQ(good_->Get("k", absl::ZeroDuration()).value_or(""), "v");
  EXPECT_TRUE(absl::IsDeadlineExceeded(good_->Get("new", absl::ZeroDuration()).status()));
  EXPECT_EQ(good_->Add("n", 0).value_or(-1), 5);
}

// Every method of the service, called with nothing but an empty message through a raw
// channel without a token, is refused: a method added later without the check fails
// here (the count below names how many there are).
TEST_F(StoreSecurityTest, EveryMethodChecksTheToken) {
  const google::protobuf::ServiceDescriptor* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("ringside.StoreService");
  ASSERT_EQ(service->method_count(), 4) << "a new method: check its token and list it here";
  auto stub = StoreService::NewStub(grpc::CreateChannel(target(), grpc::InsecureChannelCredentials()));
  auto deadline = [] { return absl::ToChronoTime(absl::Now() + kRpc); };
  grpc::ClientContext c1, c2, c3, c4;
  for (grpc::ClientContext* c : {&c1, &c2, &c3, &c4}) c->set_deadline(deadline());
  StoreSetResponse set;
  StoreGetResponse get;
  StoreWaitResponse wait;
  StoreAddResponse add;
  EXPECT_EQ(stub->Set(&c1, StoreSetRequest(), &set).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub->Get(&c2, StoreGetRequest(), &get).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub->Wait(&c3, StoreWaitRequest(), &wait).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub->Add(&c4, StoreAddRequest(), &add).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// A burst of idle TCP connections (no handshake) and of rogue HTTP/2 connections with
// blocking calls (refused at once) neither starves a real client nor leaves threads.
TEST_F(StoreSecurityTest, FloodDoesNotStarveOrLeakThreads) {
  constexpr int kIdle = 300;
  constexpr int kRogue = 100;
  ASSERT_TRUE(good_->Set("warm", "1").ok());
  const int baseline = ThreadCount();
  std::vector<int> idle = OpenIdleConnections(server_->port(), kIdle);
  EXPECT_GE(static_cast<int>(idle.size()), kIdle / 2);
  std::vector<std::unique_ptr<Store>> rogues;
  std::vector<std::thread> callers;
  for (int i = 0; i < kRogue; ++i) rogues.push_back(ClientWith(RpcSecurity()));
  for (auto& rogue : rogues) {
    callers.emplace_back([&rogue] { rogue->Get("never", absl::InfiniteDuration()).IgnoreError(); });
  }
  // The real client is served promptly meanwhile.
  const absl::Time start = absl::Now();
  ASSERT_TRUE(good_->Set("real", "1").ok());
  ASSERT_TRUE(good_->Get("real", kPrompt).ok());
  EXPECT_LT(absl::Now() - start, kPrompt);
  for (std::thread& t : callers) t.join();  // Refused at once: none waits for a key.
  const int during = ThreadCount();
  CloseAll(&idle);
  callers.clear();
  rogues.clear();
  // After they closed: still served, and the threads back near the baseline (the
  // server's pool is capped; nothing grows with the number of connections).
  absl::SleepFor(absl::Seconds(1));
  const int after = ThreadCount();
  EXPECT_TRUE(good_->Get("real", kPrompt).ok());
  EXPECT_LE(after, baseline + 16) << "baseline " << baseline << ", during " << during;
  EXPECT_LE(during, baseline + LimitsForClients(4, 8).max_threads + 16);
}

TEST(StoreWithoutToken, ServesClientsWithOrWithoutOne) {
  absl::StatusOr<std::unique_ptr<StoreServer>> server =
      StoreServer::Start("127.0.0.1", 0, RpcSecurity());
  ASSERT_TRUE(server.ok()) << server.status();
  // A client with a token: still served.
  absl::StatusOr<std::unique_ptr<Store>> client =
      ConnectStore("127.0.0.1", (*server)->port(), WithToken(kToken), kConnect, kRpc);
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE((*client)->Set("a", "b").ok());
}

}  // namespace
}  // namespace ringside
