#include "ddp_ring/job_store.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using ::testing::HasSubstr;

JobEnv Rank(int rank, int port) {
  JobEnv env;
  env.rank = rank;
  env.world_size = 2;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  return env;
}

TEST(JobStoreTest, RankZeroHostsAndEveryRankSharesIt) {
  // A port that nothing listens on: a server started on port 0, then stopped.
  absl::StatusOr<std::unique_ptr<StoreServer>> probe = StoreServer::Start("127.0.0.1", 0, RpcSecurity());
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int port = (*probe)->port();
  probe->reset();

  // Rank 1 may come first: it waits for rank 0's server.
  absl::StatusOr<std::unique_ptr<Store>> rank1 = absl::UnknownError("not joined");
  std::thread joiner([&] { rank1 = JoinJobStore(Rank(1, port), RpcSecurity(), absl::Seconds(10)); });
  absl::StatusOr<std::unique_ptr<Store>> rank0 = JoinJobStore(Rank(0, port), RpcSecurity(), absl::Seconds(10));
  joiner.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE((*rank1)->Set("from/1", "one").ok());
  absl::StatusOr<std::string> value = (*rank0)->Get("from/1", absl::Seconds(5));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "one");

  // A second job on the same address: its rank 0 cannot host, and says where.
  absl::StatusOr<std::unique_ptr<Store>> again = JoinJobStore(Rank(0, port), RpcSecurity(), absl::Seconds(1));
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("rank 0: hosting the store"));
  EXPECT_THAT(std::string(again.status().message()), HasSubstr(absl::StrCat("127.0.0.1:", port)));
}

TEST(JobStoreTest, AgentStoreThatIsNotThereIsNamed) {
  absl::StatusOr<std::unique_ptr<StoreServer>> probe = StoreServer::Start("127.0.0.1", 0, RpcSecurity());
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int port = (*probe)->port();
  probe->reset();
  JobEnv env = Rank(0, port);
  env.agent_store = true;  // torchrun's static rendezvous: rank 0 must not host.
  absl::StatusOr<std::unique_ptr<Store>> store = JoinJobStore(env, RpcSecurity(), absl::Milliseconds(300));
  ASSERT_TRUE(absl::IsUnavailable(store.status())) << store.status();
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr(absl::StrCat("rank 0: joining torchrun's agent store")));
  EXPECT_THAT(std::string(store.status().message()), HasSubstr(absl::StrCat("127.0.0.1:", port)));
}

TEST(JobStoreTest, ReachableAddressIsLoopbackForALoopbackStore) {
  unsetenv("RINGSIDE_HOSTNAME");
  EXPECT_EQ(ReachableAddress(Rank(0, 1)), "127.0.0.1");
  setenv("RINGSIDE_HOSTNAME", "10.0.0.7", 1);
  EXPECT_EQ(ReachableAddress(Rank(0, 1)), "10.0.0.7");
  unsetenv("RINGSIDE_HOSTNAME");
}

}  // namespace
}  // namespace ringside
