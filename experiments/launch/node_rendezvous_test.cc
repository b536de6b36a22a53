// The nodes' rendezvous with launchers as threads: every node gets the same port for a
// round, a failure published by one reaches the others (and only the first counts),
// rounds finish together, and an interrupt ends a wait at once.
#include "experiments/launch/node_rendezvous.h"

#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "experiments/sys/sys.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

const std::function<bool()> kNever = [] { return false; };

// The launchers of one job; they leave node 0 last, as it hosts the store.
struct Nodes {
  std::vector<std::unique_ptr<NodeRendezvous>> v;
  ~Nodes() {
    while (!v.empty()) v.pop_back();
  }
  int size() const { return static_cast<int>(v.size()); }
  NodeRendezvous* operator[](int n) { return v[n].get(); }
};

// Joins `nnodes` launchers to a rendezvous on a free port (node 0 first, as it hosts).
void JoinAll(int nnodes, absl::Duration timeout, Nodes* nodes) {
  absl::StatusOr<ReservedPort> port = ReserveFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  for (int n = 0; n < nnodes; ++n) {
    absl::StatusOr<std::unique_ptr<NodeRendezvous>> r =
        NodeRendezvous::Join("127.0.0.1", port->port(), nnodes, n, "test", RpcSecurity(), timeout);
    ASSERT_TRUE(r.ok()) << r.status();
    nodes->v.push_back(std::move(*r));
  }
}

// Runs f(node) for every node on its own thread and waits for all.
template <typename F>
void OnEveryNode(int nnodes, F f) {
  std::vector<std::thread> threads;
  for (int n = 0; n < nnodes; ++n) threads.emplace_back([&f, n] { f(n); });
  for (std::thread& t : threads) t.join();
}

TEST(NodeRendezvousTest, EveryNodeGetsTheSamePortEachRoundAndFinishesTogether) {
  constexpr int kNodes = 3;
  Nodes nodes;
  JoinAll(kNodes, absl::Seconds(20), &nodes);
  ASSERT_EQ(nodes.size(), kNodes);
  for (int round = 0; round < 2; ++round) {
    std::vector<int> ports(kNodes, -1);
    OnEveryNode(kNodes, [&](int n) {
      absl::StatusOr<int> port = nodes[n]->BeginRound(round, kNever);
      ASSERT_TRUE(port.ok()) << port.status();
      ports[n] = *port;
    });
    EXPECT_GT(ports[0], 0);
    EXPECT_EQ(ports[1], ports[0]);
    EXPECT_EQ(ports[2], ports[0]);
    EXPECT_FALSE(nodes[1]->Failure(round).has_value());
    OnEveryNode(kNodes, [&](int n) { EXPECT_TRUE(nodes[n]->FinishRound(round, kNever).ok()); });
  }
}

TEST(NodeRendezvousTest, TheFirstPublishedFailureReachesEveryNode) {
  Nodes nodes;
  JoinAll(2, absl::Seconds(20), &nodes);
  ASSERT_EQ(nodes.size(), 2);
  nodes[1]->PublishFailure(0, {"node 1: rank 3 failed", true});
  nodes[0]->PublishFailure(0, {"node 0: rank 1 failed", false});  // Second: ignored.
  for (int n = 0; n < 2; ++n) {
    std::optional<RoundFailure> f = nodes[n]->Failure(0);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->message, "node 1: rank 3 failed");
    EXPECT_TRUE(f->restartable);
  }
  EXPECT_FALSE(nodes[0]->Failure(1).has_value());  // Rounds are apart.
  // A node whose group succeeded learns that the round failed elsewhere.
  absl::Status finished = nodes[0]->FinishRound(0, kNever);
  EXPECT_TRUE(absl::IsAborted(finished)) << finished;
  EXPECT_EQ(finished.message(), "node 1: rank 3 failed");
}

TEST(NodeRendezvousTest, AnInterruptEndsTheWaitAndStopsTheOthers) {
  Nodes nodes;
  JoinAll(2, absl::Seconds(60), &nodes);
  ASSERT_EQ(nodes.size(), 2);
  const absl::Time start = absl::Now();
  // Node 0 waits for node 1 to join; the interrupt ends that wait, not the timeout.
  absl::StatusOr<int> port = nodes[0]->BeginRound(0, [] { return true; });
  EXPECT_TRUE(absl::IsCancelled(port.status())) << port.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  // Node 1 then finds a failure nobody restarts from.
  absl::StatusOr<int> other = nodes[1]->BeginRound(0, kNever);
  EXPECT_TRUE(absl::IsAborted(other.status())) << other.status();
  std::optional<RoundFailure> f = nodes[1]->Failure(0);
  ASSERT_TRUE(f.has_value());
  EXPECT_FALSE(f->restartable);
}

TEST(NodeRendezvousTest, AMissingNodeIsNamedAfterTheTimeout) {
  absl::StatusOr<ReservedPort> free = ReserveFreePort();
  ASSERT_TRUE(free.ok());
  auto node0 = NodeRendezvous::Join("127.0.0.1", free->port(), 3, 0, "test", RpcSecurity(), absl::Milliseconds(500));
  ASSERT_TRUE(node0.ok()) << node0.status();
  auto node2 = NodeRendezvous::Join("127.0.0.1", free->port(), 3, 2, "test", RpcSecurity(), absl::Milliseconds(500));
  ASSERT_TRUE(node2.ok()) << node2.status();
  EXPECT_FALSE((*node2)->Failure(0).has_value());
  std::thread joiner([&] { (*node2)->BeginRound(0, kNever).IgnoreError(); });
  absl::StatusOr<int> port = (*node0)->BeginRound(0, kNever);
  joiner.join();
  node2->reset();  // Leaves before node 0, which hosts the store.
  EXPECT_TRUE(absl::IsDeadlineExceeded(port.status())) << port.status();
  EXPECT_NE(port.status().message().find("node(s) 1 did not join round 0"), std::string::npos)
      << port.status();
}

TEST(NodeRendezvousTest, ANodeWithoutItsRendezvousFailsCleanly) {
  // Nothing listens on the port: node 1 gives up after its timeout, naming the store.
  absl::StatusOr<ReservedPort> free = ReserveFreePort();
  ASSERT_TRUE(free.ok());
  auto node1 = NodeRendezvous::Join("127.0.0.1", free->port(), 2, 1, "test", RpcSecurity(), absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsUnavailable(node1.status())) << node1.status();
  EXPECT_NE(node1.status().message().find("joining the nodes' rendezvous"), std::string::npos)
      << node1.status();
}

}  // namespace
}  // namespace ringside
