#include "ddp_ring/store.h"

#include <sys/wait.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kConnectTimeout = absl::Seconds(3);
constexpr absl::Duration kRpcTimeout = absl::Seconds(2);
// Bounds for anything that should be prompt: generous, so that a loaded CI machine
// does not flake, yet far below "hangs".
constexpr absl::Duration kPrompt = absl::Seconds(5);

enum class Backend { kInMemory, kGrpc, kTorch };

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  switch (info.param) {
    case Backend::kInMemory: return "InMemory";
    case Backend::kGrpc: return "Grpc";
    case Backend::kTorch: return "Torch";
  }
  return "?";
}

// A real torch 1.13 c10d TCPStore server (python3-torch) on a loopback port picked by
// the kernel. It publishes "interop/from_torch" = "hi", and exits once the key "done"
// exists: with status 0 if "interop/from_ringside" is then "hello" or absent, 3 if it
// is something else. It gives up after 120 s (status 1), so it never outlives a
// broken test for long.
constexpr char kTorchServer[] = R"(/usr/bin/python3 -c '
import datetime, os, sys
try:
    import torch.distributed as d
except Exception as e:
    print("missing:", e, flush=True); os._exit(0)
s = d.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=120), wait_for_workers=False)
s.set("interop/from_torch", "hi")
print(s.port, flush=True)
s.wait(["done"])
s.set_timeout(datetime.timedelta(seconds=1))
try:
    ok = s.get("interop/from_ringside") == b"hello"
except RuntimeError:
    ok = True
print("interop", ok, flush=True)
os._exit(0 if ok else 3)
' 2>&1)";

// Runs the Store contract against every implementation: the in-process map, a gRPC
// client talking to a StoreServer on a loopback port picked by the kernel, and the
// torch client talking to torch's own server (one per suite: python3 takes seconds to
// start; each test works under a key prefix of its own).
class StoreTest : public ::testing::TestWithParam<Backend> {
 public:
  static void SetUpTestSuite() {
    torch_server_ = popen(kTorchServer, "r");
    char line[256] = {0};
    if (torch_server_ == nullptr || fgets(line, sizeof(line), torch_server_) == nullptr ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &torch_port_)) {
      torch_skip_ = absl::StrCat("no torch TCPStore server (python3-torch, installed by "
                                 "scripts/setup.sh): ", line);
    }
  }
  static void TearDownTestSuite() {
    if (torch_server_ == nullptr) return;
    if (torch_port_ > 0) {
      absl::StatusOr<std::unique_ptr<Store>> client =
          ConnectTorchStore("127.0.0.1", torch_port_, kConnectTimeout, kRpcTimeout);
      ASSERT_TRUE(client.ok()) << client.status();
      ASSERT_TRUE((*client)->Set("done", "1").ok());
    }
    std::string output;  // Read to the end, so that the server never writes into a closed pipe.
    char chunk[256];
    while (fgets(chunk, sizeof(chunk), torch_server_) != nullptr) output += chunk;
    const int status = pclose(torch_server_);
    torch_server_ = nullptr;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "the torch server failed or saw a wrong value (status " << status << "): " << output;
  }

 protected:
  void SetUp() override {
    if (GetParam() == Backend::kInMemory) {
      store_ = NewInMemoryStore();
      return;
    }
    if (GetParam() == Backend::kTorch) {
      if (!torch_skip_.empty()) GTEST_SKIP() << torch_skip_;
      absl::StatusOr<std::unique_ptr<Store>> client =
          ConnectTorchStore("127.0.0.1", torch_port_, kConnectTimeout, kRpcTimeout);
      ASSERT_TRUE(client.ok()) << client.status();
      torch_client_ = *std::move(client);
      store_ = NewPrefixStore(
          ::testing::UnitTest::GetInstance()->current_test_info()->name(), torch_client_.get());
      return;
    }
    absl::StatusOr<std::unique_ptr<StoreServer>> server =
        StoreServer::Start("127.0.0.1", 0, RpcSecurity());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
    absl::StatusOr<std::unique_ptr<Store>> client =
        ConnectStore("127.0.0.1", server_->port(), RpcSecurity(), kConnectTimeout, kRpcTimeout);
    ASSERT_TRUE(client.ok()) << client.status();
    store_ = *std::move(client);
  }

  static FILE* torch_server_;
  static int torch_port_;
  static std::string torch_skip_;  // Why the torch cases skip; empty if they run.
  std::unique_ptr<StoreServer> server_;  // Only for Backend::kGrpc.
  std::unique_ptr<Store> torch_client_;  // Only for Backend::kTorch.
  std::unique_ptr<Store> store_;         // Destroyed before server_ and torch_client_.
};

FILE* StoreTest::torch_server_ = nullptr;
int StoreTest::torch_port_ = 0;
std::string StoreTest::torch_skip_;

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest,
                         ::testing::Values(Backend::kInMemory, Backend::kGrpc, Backend::kTorch),
                         BackendName);

TEST_P(StoreTest, TorchsOwnClientsSeeTheSameKeys) {
  if (GetParam() != Backend::kTorch) GTEST_SKIP() << "torch only";
  absl::StatusOr<std::string> value = torch_client_->Get("interop/from_torch", absl::Seconds(5));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "hi");
  // The server checks this one when the suite ends (TearDownTestSuite).
  ASSERT_TRUE(torch_client_->Set("interop/from_ringside", "hello").ok());
}

TEST_P(StoreTest, SetThenGetRoundTrips) {
  ASSERT_TRUE(store_->Set("rank/0", "10.0.0.1:29500").ok());
  absl::StatusOr<std::string> value = store_->Get("rank/0", absl::Seconds(1));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "10.0.0.1:29500");
}

TEST_P(StoreTest, SetOverwrites) {
  ASSERT_TRUE(store_->Set("k", "first").ok());
  ASSERT_TRUE(store_->Set("k", "second").ok());
  absl::StatusOr<std::string> value = store_->Get("k", absl::ZeroDuration());
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "second");
}

TEST_P(StoreTest, BinaryAndEmptyValuesSurvive) {
  const std::string binary("nccl\0id\xff\x80\0", 11);
  ASSERT_TRUE(store_->Set("uid", binary).ok());
  ASSERT_TRUE(store_->Set("empty", "").ok());
  absl::StatusOr<std::string> value = store_->Get("uid", absl::Seconds(1));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, binary);
  value = store_->Get("empty", absl::Seconds(1));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "");
}

TEST_P(StoreTest, GetBlocksUntilAnotherThreadSets) {
  const absl::Time start = absl::Now();
  std::thread setter([this] {
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_TRUE(store_->Set("late", "value").ok());
  });
  absl::StatusOr<std::string> value = store_->Get("late", absl::Seconds(10));
  const absl::Duration waited = absl::Now() - start;
  setter.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "value");
  EXPECT_GE(waited, absl::Milliseconds(250));
  EXPECT_LT(waited, kPrompt);
}

TEST_P(StoreTest, GetTimesOutNamingTheKey) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> value = store_->Get("rank/3", absl::Milliseconds(200));
  const absl::Duration waited = absl::Now() - start;
  ASSERT_TRUE(absl::IsDeadlineExceeded(value.status())) << value.status();
  EXPECT_THAT(std::string(value.status().message()), HasSubstr("rank/3"));
  EXPECT_THAT(std::string(value.status().message()), HasSubstr("200ms"));
  EXPECT_GE(waited, absl::Milliseconds(150));
  EXPECT_LT(waited, kPrompt);
}

TEST_P(StoreTest, GetWithZeroTimeoutDoesNotBlock) {
  ASSERT_TRUE(store_->Set("here", "1").ok());
  EXPECT_TRUE(store_->Get("here", absl::ZeroDuration()).ok());
  EXPECT_TRUE(
      absl::IsDeadlineExceeded(store_->Get("absent", absl::ZeroDuration()).status()));
}

TEST_P(StoreTest, WaitReturnsOnceEveryKeyExists) {
  const std::vector<std::string> keys = {"a/0", "a/1", "a/2"};
  std::thread setter([this, &keys] {
    for (const std::string& key : keys) {
      absl::SleepFor(absl::Milliseconds(50));
      EXPECT_TRUE(store_->Set(key, "x").ok());
    }
  });
  const absl::Time start = absl::Now();
  absl::Status status = store_->Wait(keys, absl::Seconds(10));
  const absl::Duration waited = absl::Now() - start;
  setter.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_GE(waited, absl::Milliseconds(100));
  EXPECT_LT(waited, kPrompt);
}

TEST_P(StoreTest, WaitTimesOutNamingOnlyTheMissingKeys) {
  ASSERT_TRUE(store_->Set("present", "x").ok());
  const absl::Time start = absl::Now();
  absl::Status status =
      store_->Wait({"present", "missing/1", "missing/2"}, absl::Milliseconds(200));
  const absl::Duration waited = absl::Now() - start;
  ASSERT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  const std::string message(status.message());
  EXPECT_THAT(message, HasSubstr("missing/1"));
  EXPECT_THAT(message, HasSubstr("missing/2"));
  EXPECT_THAT(message, Not(HasSubstr("present")));
  EXPECT_GE(waited, absl::Milliseconds(150));
  EXPECT_LT(waited, kPrompt);
}

TEST_P(StoreTest, AddStartsMissingKeysAtZero) {
  absl::StatusOr<int64_t> value = store_->Add("counter", 5);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 5);
  value = store_->Add("counter", -7);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, -2);
  absl::StatusOr<std::string> stored = store_->Get("counter", absl::ZeroDuration());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, "-2");
}

TEST_P(StoreTest, AddIsAtomicAcrossThreads) {
  constexpr int kThreads = 8;
  constexpr int kIncrements = 100;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &seen] {
      for (int i = 0; i < kIncrements; ++i) {
        absl::StatusOr<int64_t> value = store_->Add("barrier", 1);
        ASSERT_TRUE(value.ok()) << value.status();
        seen[t].push_back(*value);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  // Every increment saw a distinct intermediate value: none was lost or duplicated.
  std::set<int64_t> all;
  for (const std::vector<int64_t>& values : seen)
    all.insert(values.begin(), values.end());
  EXPECT_EQ(all.size(), kThreads * kIncrements);
  absl::StatusOr<int64_t> total = store_->Add("barrier", 0);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, kThreads * kIncrements);
}

TEST_P(StoreTest, AddOnNonIntegerIsInvalidArgument) {
  ASSERT_TRUE(store_->Set("addr", "10.0.0.1").ok());
  absl::StatusOr<int64_t> value = store_->Add("addr", 1);
  EXPECT_TRUE(absl::IsInvalidArgument(value.status())) << value.status();
  EXPECT_THAT(std::string(value.status().message()), HasSubstr("addr"));
  // The value is left alone.
  absl::StatusOr<std::string> stored = store_->Get("addr", absl::ZeroDuration());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, "10.0.0.1");
}

TEST_P(StoreTest, PrefixStoresAreIsolated) {
  std::unique_ptr<Store> job1 = NewPrefixStore("job1", store_.get());
  std::unique_ptr<Store> job2 = NewPrefixStore("job2", store_.get());
  ASSERT_TRUE(job1->Set("rank/0", "one").ok());
  ASSERT_TRUE(job2->Set("rank/0", "two").ok());
  ASSERT_TRUE(job1->Set("only-in-job1", "x").ok());

  absl::StatusOr<std::string> value = job1->Get("rank/0", absl::ZeroDuration());
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "one");
  value = job2->Get("rank/0", absl::ZeroDuration());
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "two");
  // The base store sees the qualified keys.
  value = store_->Get("job1/rank/0", absl::ZeroDuration());
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "one");

  EXPECT_TRUE(absl::IsDeadlineExceeded(
      job2->Get("only-in-job1", absl::Milliseconds(50)).status()));
  EXPECT_TRUE(job1->Wait({"rank/0", "only-in-job1"}, absl::Milliseconds(50)).ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      job2->Wait({"rank/0", "only-in-job1"}, absl::Milliseconds(50))));

  ASSERT_TRUE(job1->Add("count", 3).ok());
  absl::StatusOr<int64_t> count = job2->Add("count", 1);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 1);
}

TEST_P(StoreTest, PrefixStoreErrorsNameTheCallersKeys) {
  std::unique_ptr<Store> job = NewPrefixStore("job7", store_.get());
  absl::Status status = job->Wait({"rank/3"}, absl::Milliseconds(50));
  ASSERT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  const std::string message(status.message());
  EXPECT_THAT(message, HasSubstr("keys: rank/3"));
  EXPECT_THAT(message, Not(HasSubstr("job7/rank/3")));
  EXPECT_THAT(message, HasSubstr("job7"));  // The prefix is still mentioned.
}

TEST_P(StoreTest, ManyConcurrentBlockingGetsAllComplete) {
  constexpr int kThreads = 16;
  std::vector<absl::StatusOr<std::string>> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([this, i, &results] {
      results[i] = store_->Get(absl::StrCat("peer/", i), absl::Seconds(10));
    });
  }
  absl::SleepFor(absl::Milliseconds(200));  // Let every Get block.
  const absl::Time start = absl::Now();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(store_->Set(absl::StrCat("peer/", i), absl::StrCat("addr-", i)).ok());
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LT(absl::Now() - start, kPrompt);
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    EXPECT_EQ(*results[i], absl::StrCat("addr-", i));
  }
}

// Returns a loopback port that was free a moment ago (nothing listens on it now).
int FreePort() {
  absl::StatusOr<std::unique_ptr<StoreServer>> server =
      StoreServer::Start("127.0.0.1", 0, RpcSecurity());
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? (*server)->port() : 0;
}

TEST(StoreGrpcTest, ClientConnectingBeforeTheServerStartsSucceeds) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  absl::StatusOr<std::unique_ptr<Store>> client =
      absl::UnavailableError("not connected yet");
  std::thread connector([port, &client] {
    client = ConnectStore("127.0.0.1", port, RpcSecurity(), absl::Seconds(3), kRpcTimeout);
  });
  absl::SleepFor(absl::Milliseconds(300));
  absl::StatusOr<std::unique_ptr<StoreServer>> server =
      StoreServer::Start("127.0.0.1", port, RpcSecurity());
  connector.join();
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("hello", "world").ok());
  absl::StatusOr<std::string> value = (*client)->Get("hello", absl::Seconds(1));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "world");
}

TEST(StoreTorchTest, ConnectingToNothingIsUnavailableWithinTheTimeout) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Store>> client =
      ConnectTorchStore("127.0.0.1", port, absl::Milliseconds(500), kRpcTimeout);
  ASSERT_TRUE(absl::IsUnavailable(client.status())) << client.status();
  EXPECT_THAT(std::string(client.status().message()),
              HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_LT(absl::Now() - start, kPrompt);
}

TEST(StoreGrpcTest, ConnectingToNothingIsUnavailableWithinTheTimeout) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Store>> client =
      ConnectStore("127.0.0.1", port, RpcSecurity(), absl::Milliseconds(500), kRpcTimeout);
  const absl::Duration waited = absl::Now() - start;
  ASSERT_TRUE(absl::IsUnavailable(client.status())) << client.status();
  EXPECT_THAT(std::string(client.status().message()),
              HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_GE(waited, absl::Milliseconds(400));
  EXPECT_LT(waited, kPrompt);
}

TEST(StoreGrpcTest, StartOnAPortInUseFails) {
  absl::StatusOr<std::unique_ptr<StoreServer>> first = StoreServer::Start("127.0.0.1", 0, RpcSecurity());
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  absl::StatusOr<std::unique_ptr<StoreServer>> second =
      StoreServer::Start("127.0.0.1", port, RpcSecurity());
  ASSERT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat("127.0.0.1:", port)));
}

TEST(StoreGrpcTest, ShutdownFailsABlockedGetPromptly) {
  absl::StatusOr<std::unique_ptr<StoreServer>> server =
      StoreServer::Start("127.0.0.1", 0, RpcSecurity());
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<Store>> client =
      ConnectStore("127.0.0.1", (*server)->port(), RpcSecurity(), kConnectTimeout, kRpcTimeout);
  ASSERT_TRUE(client.ok()) << client.status();

  absl::StatusOr<std::string> value;
  absl::Time returned_at;
  std::thread getter([&] {
    value = (*client)->Get("never", absl::Seconds(30));
    returned_at = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(200));  // Let the Get reach the server.
  const absl::Time shutdown_at = absl::Now();
  (*server)->Shutdown();
  const absl::Duration shutdown_took = absl::Now() - shutdown_at;
  getter.join();
  EXPECT_TRUE(absl::IsUnavailable(value.status())) << value.status();
  EXPECT_LT(returned_at - shutdown_at, kPrompt);
  EXPECT_LT(shutdown_took, kPrompt);

  // Later calls fail fast too, and Shutdown is idempotent.
  EXPECT_TRUE(absl::IsUnavailable((*client)->Set("k", "v")));
  (*server)->Shutdown();
}

}  // namespace
}  // namespace ringside
