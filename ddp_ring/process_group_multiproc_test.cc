// The Gloo process group with its ranks as separate processes, as in a real job: rank 0
// hosts the gRPC store, every rank connects to it, and the collectives run over TCP.
//
// The parent forks the ranks before it creates any gRPC or Gloo object (it never
// creates one at all) and only watches their exit statuses, each bounded in time. The
// children report through their exit codes (kExit*) and explain themselves on stderr.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ddp_ring/process_group.h"
#include "ddp_ring/store.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// Child exit codes.
constexpr int kExitOk = 0;
constexpr int kExitNoPort = 10;       // Never learned the store's port.
constexpr int kExitStore = 11;        // Could not start or reach the store.
constexpr int kExitGroup = 12;        // NewGlooProcessGroup failed.
constexpr int kExitOpFailed = 13;     // A collective failed that should not have.
constexpr int kExitWrongResult = 14;  // A collective returned wrong numbers.
constexpr int kExitWrongStatus = 15;  // A failure came with an unexpected status.
constexpr int kExitTooSlow = 16;      // A failure took too long to surface.

// What one rank does once its store is up. Returns the exit code.
using RankBody = std::function<int(int rank, Store* store)>;

void Log(int rank, const std::string& text) {
  std::fprintf(stderr, "[rank %d, pid %d] %s\n", rank, static_cast<int>(getpid()),
               text.c_str());
}

bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = read(fd, p, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    size -= got;
  }
  return true;
}

// The child's life: learn the port (rank 0 starts the server and tells the others
// through pipes), connect, run `body`, then say "done" in the store; rank 0 keeps the
// server up until every rank in `finishers` said so. Never returns.
[[noreturn]] void RunChild(int rank, int world, std::vector<std::vector<int>>& pipes,
                           const RankBody& body, const std::vector<int>& finishers) {
  int port = -1;
  std::unique_ptr<StoreServer> server;
  if (rank == 0) {
    absl::StatusOr<std::unique_ptr<StoreServer>> started =
        StoreServer::Start("127.0.0.1", 0);
    if (!started.ok()) {
      Log(rank, started.status().ToString());
      _exit(kExitStore);
    }
    server = std::move(*started);
    port = server->port();
    for (int r = 1; r < world; ++r) {
      if (write(pipes[r][1], &port, sizeof(port)) != sizeof(port)) _exit(kExitNoPort);
    }
  } else if (!ReadAll(pipes[rank][0], &port, sizeof(port))) {
    Log(rank, "rank 0 never sent the store's port");
    _exit(kExitNoPort);
  }
  for (auto& fds : pipes) {
    close(fds[0]);
    close(fds[1]);
  }

  int code = kExitOk;
  {
    absl::StatusOr<std::unique_ptr<Store>> client =
        ConnectStore("127.0.0.1", port, absl::Seconds(20), absl::Seconds(20));
    if (!client.ok()) {
      Log(rank, client.status().ToString());
      _exit(kExitStore);
    }
    code = body(rank, client->get());
    // Shutdown: rank 0 must not take the store down while others still use it.
    (*client)->Set(absl::StrCat("done/", rank), "1").IgnoreError();
    if (rank == 0) {
      std::vector<std::string> keys;
      for (int r : finishers) keys.push_back(absl::StrCat("done/", r));
      const absl::Status all_done = (*client)->Wait(keys, absl::Seconds(30));
      if (!all_done.ok()) Log(rank, all_done.ToString());
    }
  }
  if (server != nullptr) server->Shutdown();
  _exit(code);
}

// How each child ended: exit code, or -signal.
using Outcomes = std::vector<int>;

// Forks `world` ranks running `body`, waits for all of them at most `limit` (then kills
// the rest and fails). `finishers`: the ranks expected to get to the end.
Outcomes RunRanks(int world, const RankBody& body, const std::vector<int>& finishers,
                  absl::Duration limit) {
  // pipes[r]: rank 0 -> rank r, carrying the store's port.
  std::vector<std::vector<int>> pipes(world, std::vector<int>(2, -1));
  for (int r = 1; r < world; ++r) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pipes[r] = {fds[0], fds[1]};
  }
  std::fflush(nullptr);  // Nothing buffered may be written twice.
  std::vector<pid_t> pids(world, -1);
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) RunChild(rank, world, pipes, body, finishers);
    EXPECT_GT(pid, 0) << "fork failed";
    pids[rank] = pid;
  }
  for (auto& fds : pipes) {
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
  }

  Outcomes outcomes(world, 0);
  int running = world;
  const absl::Time deadline = absl::Now() + limit;
  while (running > 0 && absl::Now() < deadline) {
    for (int rank = 0; rank < world; ++rank) {
      if (pids[rank] <= 0) continue;
      int status = 0;
      if (waitpid(pids[rank], &status, WNOHANG) == pids[rank]) {
        outcomes[rank] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        pids[rank] = -1;
        --running;
      }
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  for (int rank = 0; rank < world; ++rank) {
    if (pids[rank] <= 0) continue;
    ADD_FAILURE() << "rank " << rank << " still running after " << limit << ": killed";
    kill(pids[rank], SIGKILL);
    waitpid(pids[rank], nullptr, 0);
    outcomes[rank] = -SIGKILL;
  }
  return outcomes;
}

std::vector<int> AllRanks(int world) {
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(r);
  return ranks;
}

ProcessGroupOptions Options(int rank, int world, AllReduceAlgorithm algorithm,
                            absl::Duration timeout) {
  ProcessGroupOptions options;
  options.rank = rank;
  options.world_size = world;
  options.algorithm = algorithm;
  options.timeout = timeout;
  options.hostname = "127.0.0.1";
  return options;
}

// Rank r's i-th input, multiples of 1/4: sums over a few ranks are exact in float.
float Value(int rank, int64_t i) {
  return static_cast<float>(rank + 1) + static_cast<float>(i % 1024) * 0.25f;
}

float SumOfValues(int world, int64_t i) {
  return 0.5f * world * (world + 1) + world * (static_cast<float>(i % 1024) * 0.25f);
}

using Param = std::tuple<int, int64_t, AllReduceAlgorithm>;

class MultiProcessAllReduceTest : public testing::TestWithParam<Param> {};

TEST_P(MultiProcessAllReduceTest, SumAndAverageMatchClosedForm) {
  const auto [world, n, algorithm] = GetParam();
  const RankBody body = [world = world, n = n, algorithm = algorithm](int rank,
                                                                      Store* base) {
    std::unique_ptr<Store> store = NewPrefixStore("allreduce", base);
    auto pg = NewGlooProcessGroup(store.get(),
                                  Options(rank, world, algorithm, absl::Seconds(30)));
    if (!pg.ok()) {
      Log(rank, pg.status().ToString());
      return kExitGroup;
    }
    std::vector<float> data(n);
    for (int64_t i = 0; i < n; ++i) data[i] = Value(rank, i);
    const absl::Time start = absl::Now();
    absl::Status status = (*pg)->AllReduce(data.data(), n, ReduceOp::kSum)->Wait();
    const absl::Duration took = absl::Now() - start;
    if (!status.ok()) {
      Log(rank, status.ToString());
      return kExitOpFailed;
    }
    for (int64_t i = 0; i < n; ++i) {
      if (data[i] != SumOfValues(world, i)) {
        Log(rank,
            absl::StrCat("sum[", i, "] = ", data[i], ", want ", SumOfValues(world, i)));
        return kExitWrongResult;
      }
    }
    for (int64_t i = 0; i < n; ++i) data[i] = Value(rank, i);
    status = (*pg)->AllReduce(data.data(), n, ReduceOp::kAverage)->Wait();
    if (!status.ok()) {
      Log(rank, status.ToString());
      return kExitOpFailed;
    }
    for (int64_t i = 0; i < n; ++i) {
      const float want = SumOfValues(world, i) / world;
      if (std::fabs(data[i] - want) > 1e-6f * std::fabs(want)) {
        Log(rank, absl::StrCat("average[", i, "] = ", data[i], ", want ", want));
        return kExitWrongResult;
      }
    }
    if (rank == 0)
      Log(rank,
          absl::StrCat("sum all-reduce of ", n, " floats: ", absl::FormatDuration(took)));
    return kExitOk;
  };
  const Outcomes outcomes = RunRanks(world, body, AllRanks(world), absl::Seconds(60));
  for (int rank = 0; rank < world; ++rank) {
    EXPECT_EQ(outcomes[rank], kExitOk) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Gloo, MultiProcessAllReduceTest,
    testing::Combine(testing::Values(2, 3), testing::Values(1000, 1000000),
                     testing::Values(AllReduceAlgorithm::kRing,
                                     AllReduceAlgorithm::kHalvingDoubling)),
    [](const testing::TestParamInfo<Param>& info) {
      return absl::StrCat("World", std::get<0>(info.param), "N", std::get<1>(info.param),
                          std::get<2>(info.param) == AllReduceAlgorithm::kRing
                              ? "Ring"
                              : "HalvingDoubling");
    });

constexpr absl::Duration kTimeout = absl::Seconds(3);

class DeadRankTest : public testing::TestWithParam<AllReduceAlgorithm> {};

// Three ranks rendezvous and pass a barrier, then rank 2 is SIGKILLed. Ranks 0 and 1
// all-reduce anyway: each must get Unavailable or DeadlineExceeded, naming the
// all-reduce, within twice the 3 s timeout.
TEST_P(DeadRankTest, SurvivorsGetAnErrorWithinTwiceTheTimeout) {
  const AllReduceAlgorithm algorithm = GetParam();
  const RankBody body = [algorithm](int rank, Store* base) {
    std::unique_ptr<Store> store = NewPrefixStore("dead_rank", base);
    auto pg = NewGlooProcessGroup(store.get(), Options(rank, 3, algorithm, kTimeout));
    if (!pg.ok()) {
      Log(rank, pg.status().ToString());
      return kExitGroup;
    }
    if (absl::Status status = (*pg)->Barrier()->Wait(); !status.ok()) {
      Log(rank, status.ToString());
      return kExitOpFailed;
    }
    if (rank == 2) {
      Log(rank, "killing myself");
      raise(SIGKILL);
    }
    std::vector<float> data(1000000, 1.0f);
    const absl::Time start = absl::Now();
    const absl::Status status =
        (*pg)->AllReduce(data.data(), 1000000, ReduceOp::kSum)->Wait();
    const absl::Duration took = absl::Now() - start;
    Log(rank, absl::StrCat("failure surfaced after ", absl::FormatDuration(took), ": ",
                           status.ToString()));
    if (status.ok()) return kExitWrongStatus;
    if (!absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status)) {
      return kExitWrongStatus;
    }
    if (status.message().find(absl::StrCat("rank ", rank, ": all_reduce")) ==
        std::string::npos) {
      return kExitWrongStatus;
    }
    // The error names the rank that went away (rank 2 killed itself).
    if (status.message().find("peer rank 2") == std::string::npos) return kExitWrongStatus;
    if (took > 2 * kTimeout) return kExitTooSlow;
    return kExitOk;
  };
  const absl::Time start = absl::Now();
  const Outcomes outcomes = RunRanks(3, body, {0, 1}, absl::Seconds(60));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(outcomes[0], kExitOk);
  EXPECT_EQ(outcomes[1], kExitOk);
  EXPECT_EQ(outcomes[2], -SIGKILL);
  // Start-up, rendezvous and at most 2 x 3 s of failure detection.
  EXPECT_LE(took, absl::Seconds(20));
}

INSTANTIATE_TEST_SUITE_P(Gloo, DeadRankTest,
                         testing::Values(AllReduceAlgorithm::kRing,
                                         AllReduceAlgorithm::kHalvingDoubling),
                         [](const testing::TestParamInfo<AllReduceAlgorithm>& info) {
                           return info.param == AllReduceAlgorithm::kRing
                                      ? "Ring"
                                      : "HalvingDoubling";
                         });

}  // namespace
}  // namespace ringside
