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

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/process_group_test_util.h"
#include "ddp_ring/store.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using testing_util::AlgorithmName;
using testing_util::CountMismatches;
using testing_util::Mismatches;
using testing_util::Options;
using testing_util::SumOfValues;
using testing_util::Value;

// Child exit codes.
constexpr int kExitOk = 0;
constexpr int kExitNoPort = 10;       // Never learned the store's port.
constexpr int kExitStore = 11;        // Could not start or reach the store.
constexpr int kExitGroup = 12;        // NewGlooProcessGroup failed.
constexpr int kExitOpFailed = 13;     // A collective failed that should not have.
constexpr int kExitWrongResult = 14;  // A collective returned wrong numbers.
constexpr int kExitWrongStatus = 15;  // A failure came with an unexpected status.
constexpr int kExitTooSlow = 16;      // A failure took too long to surface.
constexpr int kExitBarrierFile = 17;  // Could not write the barrier timestamps.
// The error named the other survivor rather than the dead rank (see DeadRankTest).
constexpr int kExitNamedSurvivor = 18;

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
        StoreServer::Start("127.0.0.1", 0, RpcSecurity());
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
        ConnectStore("127.0.0.1", port, RpcSecurity(), absl::Seconds(20), absl::Seconds(20));
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

// ---------------------------------------------------------------------------------
// Every collective with ranks as processes, against closed forms.
//
// One fork and one rendezvous per (world size, all-reduce algorithm); inside that one
// group each child runs, for every size in kSizes, AllReduce (sum, average), Broadcast
// (root 0, root world - 1), AllGather and ReduceScatter (sum, average), then Barrier
// rounds, and checks every output element in every rank against its closed form.

// Empty, one element, an odd count that splits evenly over neither 2 nor 3 ranks, and
// 10^7 floats (40 MB per buffer; world x that for all-gather out and reduce-scatter in).
constexpr int64_t kSizes[] = {0, 1, 7, 10000000};
constexpr int64_t kLogAtLeast = 10000000;  // Rank 0 logs the time of ops this large.
constexpr int kBarrierRounds = 2;
constexpr absl::Duration kBarrierStagger = absl::Milliseconds(100);


std::string OpName(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "average"; }

// Compares data[i] with expected(i) for all i < n (relative tolerance `tol`, 0 =
// exact). On a mismatch logs `what`, the number of wrong elements and the first one,
// and returns false.
template <typename Expected>
bool CheckAll(int rank, const std::string& what, const float* data, int64_t n,
              Expected expected, float tol) {
  const Mismatches m = CountMismatches(data, n, expected, tol);
  const int64_t bad = m.count;
  const int64_t first = m.first;
  if (bad == 0) return true;
  Log(rank, absl::StrCat(what, ": ", bad, " of ", n, " elements wrong, first [", first,
                         "] = ", data[first], ", want ", expected(first)));
  return false;
}

// Waits for `work`; logs `what` and the status if it failed. Also checks the handle's
// contract after a successful Wait: IsCompleted() and an idempotent Wait().
bool WaitOk(int rank, const std::string& what, const std::shared_ptr<Work>& work,
            int64_t n) {
  const absl::Time start = absl::Now();
  const absl::Status status = work->Wait();
  if (!status.ok()) {
    Log(rank, absl::StrCat(what, " failed: ", status.ToString()));
    return false;
  }
  if (!work->IsCompleted() || !work->Wait().ok()) {
    Log(rank, absl::StrCat(what, ": not completed after a successful Wait()"));
    return false;
  }
  if (rank == 0 && n >= kLogAtLeast) {
    Log(rank, absl::StrCat(what, " took ", absl::FormatDuration(absl::Now() - start)));
  }
  return true;
}

// AllReduce: data[i] = op over ranks r of Value(r, i).
int CheckAllReduce(ProcessGroup& pg, int64_t n, ReduceOp op, const std::string& alg) {
  const int rank = pg.rank();
  const int world = pg.world_size();
  const std::string what =
      absl::StrCat("all_reduce ", OpName(op), " (", alg, ") n=", n, " on rank ", rank);
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = Value(rank, i);
  if (!WaitOk(rank, what, pg.AllReduce(data.data(), n, op), n)) return kExitOpFailed;
  const bool ok =
      op == ReduceOp::kSum
          ? CheckAll(
                rank, what, data.data(), n,
                [&](int64_t i) { return SumOfValues(world, i); }, 0)
          : CheckAll(
                rank, what, data.data(), n,
                [&](int64_t i) { return SumOfValues(world, i) / world; }, 1e-6f);
  return ok ? kExitOk : kExitWrongResult;
}

// Broadcast: every rank ends with the root's Value(root, i); the others start at -1.
int CheckBroadcast(ProcessGroup& pg, int64_t n, int root) {
  const int rank = pg.rank();
  const std::string what =
      absl::StrCat("broadcast from root ", root, " n=", n, " on rank ", rank);
  std::vector<float> data(n, -1.0f);
  if (rank == root) {
    for (int64_t i = 0; i < n; ++i) data[i] = Value(root, i);
  }
  if (!WaitOk(rank, what, pg.Broadcast(data.data(), n, root), n)) return kExitOpFailed;
  return CheckAll(
             rank, what, data.data(), n, [&](int64_t i) { return Value(root, i); }, 0)
             ? kExitOk
             : kExitWrongResult;
}

// AllGather: out[j] = Value(j / n, j % n), rank order; `in` is left as it was.
int CheckAllGather(ProcessGroup& pg, int64_t n) {
  const int rank = pg.rank();
  const int world = pg.world_size();
  const std::string what = absl::StrCat("all_gather n=", n, " on rank ", rank);
  std::vector<float> in(n);
  for (int64_t i = 0; i < n; ++i) in[i] = Value(rank, i);
  std::vector<float> out(n * world, -1.0f);
  if (!WaitOk(rank, what, pg.AllGather(in.data(), n, out.data()), n)) {
    return kExitOpFailed;
  }
  const bool ok =
      CheckAll(
          rank, what, out.data(), n * world,
          [&](int64_t j) { return Value(static_cast<int>(j / n), j % n); }, 0) &&
      CheckAll(
          rank, absl::StrCat(what, ", input"), in.data(), n,
          [&](int64_t i) { return Value(rank, i); }, 0);
  return ok ? kExitOk : kExitWrongResult;
}

// ReduceScatter: with in[j] = Value(r, j) on rank r (j < world * n), rank r's
// out[i] = op over ranks of in[r * n + i]; `in` is left as it was.
int CheckReduceScatter(ProcessGroup& pg, int64_t n, ReduceOp op) {
  const int rank = pg.rank();
  const int world = pg.world_size();
  const std::string what =
      absl::StrCat("reduce_scatter ", OpName(op), " n=", n, " on rank ", rank);
  std::vector<float> in(n * world);
  for (int64_t j = 0; j < n * world; ++j) in[j] = Value(rank, j);
  std::vector<float> out(n, -1.0f);
  if (!WaitOk(rank, what, pg.ReduceScatter(in.data(), out.data(), n, op), n)) {
    return kExitOpFailed;
  }
  const int64_t offset = rank * n;
  const bool ok =
      (op == ReduceOp::kSum
           ? CheckAll(
                 rank, what, out.data(), n,
                 [&](int64_t i) { return SumOfValues(world, offset + i); }, 0)
           : CheckAll(
                 rank, what, out.data(), n,
                 [&](int64_t i) { return SumOfValues(world, offset + i) / world; },
                 1e-6f)) &&
      CheckAll(
          rank, absl::StrCat(what, ", input"), in.data(), n * world,
          [&](int64_t j) { return Value(rank, j); }, 0);
  return ok ? kExitOk : kExitWrongResult;
}

// Barrier: after an aligning barrier, rank r sleeps ((r + round) % world) x 100 ms (a
// different rank arrives last in each round), then notes when it entered and left the
// barrier, as Unix microseconds, one "round enter leave" line per round in `path`. The
// parent checks that no rank left before the last one entered.
int CheckBarrier(ProcessGroup& pg, const std::string& path) {
  const int rank = pg.rank();
  const int world = pg.world_size();
  if (!WaitOk(rank, "aligning barrier", pg.Barrier(), 0)) return kExitOpFailed;
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    Log(rank, absl::StrCat("cannot write ", path));
    return kExitBarrierFile;
  }
  int code = kExitOk;
  for (int round = 0; round < kBarrierRounds && code == kExitOk; ++round) {
    absl::SleepFor(((rank + round) % world) * kBarrierStagger);
    const int64_t enter = absl::ToUnixMicros(absl::Now());
    if (!WaitOk(rank, absl::StrCat("barrier round ", round, " on rank ", rank),
                pg.Barrier(), 0)) {
      code = kExitOpFailed;
      break;
    }
    const int64_t leave = absl::ToUnixMicros(absl::Now());
    if (std::fprintf(file, "%d %lld %lld\n", round, static_cast<long long>(enter),
                     static_cast<long long>(leave)) < 0) {
      code = kExitBarrierFile;
    }
  }
  if (std::fclose(file) != 0 && code == kExitOk) code = kExitBarrierFile;
  return code;
}

std::string BarrierPath(int world, AllReduceAlgorithm algorithm, int rank) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/barrier_world", world, "_",
                      AlgorithmName(algorithm), "_rank", rank, ".txt");
}

using CollectivesParam = std::tuple<int, AllReduceAlgorithm>;

class MultiProcessCollectivesTest : public testing::TestWithParam<CollectivesParam> {};

TEST_P(MultiProcessCollectivesTest, EveryCollectiveMatchesClosedForm) {
  const auto [world, algorithm] = GetParam();
  for (int rank = 0; rank < world; ++rank) {
    std::remove(BarrierPath(world, algorithm, rank).c_str());  // Stale from a rerun.
  }
  const RankBody body = [world = world, algorithm = algorithm](int rank, Store* base) {
    std::unique_ptr<Store> store = NewPrefixStore("collectives", base);
    auto pg = NewGlooProcessGroup(store.get(),
                                  Options(rank, world, algorithm, absl::Seconds(30)));
    if (!pg.ok()) {
      Log(rank, pg.status().ToString());
      return kExitGroup;
    }
    ProcessGroup& group = **pg;
    const std::string alg = AlgorithmName(algorithm);
    for (int64_t n : kSizes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        if (int code = CheckAllReduce(group, n, op, alg); code != kExitOk) return code;
      }
      for (int root : {0, world - 1}) {
        if (int code = CheckBroadcast(group, n, root); code != kExitOk) return code;
      }
      if (int code = CheckAllGather(group, n); code != kExitOk) return code;
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        if (int code = CheckReduceScatter(group, n, op); code != kExitOk) return code;
      }
    }
    return CheckBarrier(group, BarrierPath(world, algorithm, rank));
  };
  const absl::Time start = absl::Now();
  const Outcomes outcomes = RunRanks(world, body, AllRanks(world), absl::Seconds(60));
  std::printf("world %d %s: every collective at every size took %s\n", world,
              AlgorithmName(algorithm).c_str(),
              absl::FormatDuration(absl::Now() - start).c_str());
  bool all_ok = true;
  for (int rank = 0; rank < world; ++rank) {
    EXPECT_EQ(outcomes[rank], kExitOk) << "rank " << rank << " (see its stderr above)";
    all_ok = all_ok && outcomes[rank] == kExitOk;
  }
  if (!all_ok) return;

  // Barrier contract: in every round, max over ranks of enter <= min of leave.
  std::vector<std::vector<int64_t>> enter(kBarrierRounds,
                                          std::vector<int64_t>(world, -1));
  std::vector<std::vector<int64_t>> leave(kBarrierRounds,
                                          std::vector<int64_t>(world, -1));
  for (int rank = 0; rank < world; ++rank) {
    const std::string path = BarrierPath(world, algorithm, rank);
    std::FILE* file = std::fopen(path.c_str(), "r");
    ASSERT_NE(file, nullptr) << path;
    int round = 0;
    long long in = 0;
    long long out = 0;
    while (std::fscanf(file, "%d %lld %lld", &round, &in, &out) == 3) {
      ASSERT_TRUE(round >= 0 && round < kBarrierRounds) << path;
      enter[round][rank] = in;
      leave[round][rank] = out;
    }
    std::fclose(file);
  }
  for (int round = 0; round < kBarrierRounds; ++round) {
    for (int rank = 0; rank < world; ++rank) {
      ASSERT_GE(enter[round][rank], 0)
          << "round " << round << ": rank " << rank << " wrote no timestamps";
    }
    const int64_t first_in = *std::min_element(enter[round].begin(), enter[round].end());
    const int64_t last_in = *std::max_element(enter[round].begin(), enter[round].end());
    const int64_t first_out = *std::min_element(leave[round].begin(), leave[round].end());
    EXPECT_LE(last_in, first_out)
        << "round " << round << ": a rank left the barrier " << (last_in - first_out)
        << " us before the last entered";
    // The stagger made the ranks arrive at least ~100 ms apart: the check above was not
    // passed trivially by ranks that happened to arrive together.
    EXPECT_GE(last_in - first_in, absl::ToInt64Microseconds(kBarrierStagger) / 2)
        << "round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Gloo, MultiProcessCollectivesTest,
    testing::Combine(testing::Values(2, 3),
                     testing::Values(AllReduceAlgorithm::kRing,
                                     AllReduceAlgorithm::kHalvingDoubling)),
    [](const testing::TestParamInfo<CollectivesParam>& info) {
      return absl::StrCat("World", std::get<0>(info.param),
                          AlgorithmName(std::get<1>(info.param)));
    });

constexpr absl::Duration kTimeout = absl::Seconds(3);

class DeadRankTest : public testing::TestWithParam<AllReduceAlgorithm> {};

// Three ranks rendezvous and pass a barrier, then rank 2 is SIGKILLed. Ranks 0 and 1
// all-reduce anyway: each must get Unavailable or DeadlineExceeded, naming the
// all-reduce and the peer whose connection broke, within twice the 3 s timeout.
//
// Which peer that is may differ between the survivors: a rank whose collective fails
// closes all its connections at once (gloo_process_group.cc, RunOp), so the survivor
// that notices rank 2's death first can break the other survivor's all-reduce before
// that one notices rank 2 itself. The first to fail can only have seen rank 2 go,
// though: at least one survivor names rank 2, and each names rank 2 or the other.
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
    if (took > 2 * kTimeout) return kExitTooSlow;
    // The error names the rank that went away (rank 2 killed itself), or the other
    // survivor, which closed its connections after its own all-reduce failed.
    if (status.message().find("peer rank 2") != std::string::npos) return kExitOk;
    if (status.message().find(absl::StrCat("peer rank ", 1 - rank)) !=
        std::string::npos) {
      return kExitNamedSurvivor;
    }
    return kExitWrongStatus;
  };
  const absl::Time start = absl::Now();
  const Outcomes outcomes = RunRanks(3, body, {0, 1}, absl::Seconds(60));
  const absl::Duration took = absl::Now() - start;
  for (int rank : {0, 1}) {
    EXPECT_TRUE(outcomes[rank] == kExitOk || outcomes[rank] == kExitNamedSurvivor)
        << "rank " << rank << " exited with " << outcomes[rank];
  }
  EXPECT_TRUE(outcomes[0] == kExitOk || outcomes[1] == kExitOk)
      << "no survivor named rank 2: " << outcomes[0] << ", " << outcomes[1];
  EXPECT_EQ(outcomes[2], -SIGKILL);
  // Start-up, rendezvous and at most 2 x 3 s of failure detection.
  EXPECT_LE(took, absl::Seconds(20));
}

INSTANTIATE_TEST_SUITE_P(Gloo, DeadRankTest,
                         testing::Values(AllReduceAlgorithm::kRing,
                                         AllReduceAlgorithm::kHalvingDoubling,
                                         AllReduceAlgorithm::kRecursiveDoubling),
                         [](const testing::TestParamInfo<AllReduceAlgorithm>& info) {
                           return AlgorithmName(info.param);
                         });

}  // namespace
}  // namespace ringside
