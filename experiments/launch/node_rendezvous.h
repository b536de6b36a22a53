// The launchers' own rendezvous, for restarts across nodes (`ringside launch
// --nnodes=N --max_restarts=K`): node 0's launcher hosts a store (ddp_ring/store.h) at
// the job's endpoint, and through it every launcher agrees on each round of the job,
// as torchrun's agents do:
//   1. every node joins round R ("R/joined/<node>"); node 0, once all have, picks a
//      free port for rank 0's own store in this round and publishes it ("R/port"), so
//      that ranks of a new round never reach a dead round's store;
//   2. while the groups run, a node whose rank failed publishes why ("R/failed"); every
//      node polls for it and stops its own group, and all move to round R+1 together
//      (or all give up together: they count restarts alike);
//   3. a node whose group succeeded waits for every node's ("R/done/<node>").
// Node 0 keeps the store up until every node has left ("left/<node>"), bounded.
#ifndef RINGSIDE_EXPERIMENTS_LAUNCH_NODE_RENDEZVOUS_H_
#define RINGSIDE_EXPERIMENTS_LAUNCH_NODE_RENDEZVOUS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc_security.h"
#include "experiments/sys/sys.h"
#include "ddp_ring/store.h"

namespace ringside {

// A failure one node published for a round.
struct RoundFailure {
  std::string message;  // "node 1: rank 3 failed: ..."
  bool restartable = true;  // False: interrupted or unstartable; nobody restarts.
};

// Not thread-safe: one launcher's main loop owns it.
class NodeRendezvous {
 public:
  // Node 0 hosts the store at `host`:`port` and connects to it; the other nodes connect,
  // waiting up to `timeout` for it to come up. Every key lives under "launch/<run_id>/".
  // `security` is the security node 0's store listens with and every node connects
  // with (empty token: unauthenticated).
  static absl::StatusOr<std::unique_ptr<NodeRendezvous>> Join(const std::string& host, int port,
                                                              int nnodes, int node_rank,
                                                              const std::string& run_id,
                                                              const RpcSecurity& security,
                                                              absl::Duration timeout);
  // Publishes that this node left; node 0 first waits (up to 10 s) for every other
  // node that joined to leave, then stops serving.
  ~NodeRendezvous();
  NodeRendezvous(const NodeRendezvous&) = delete;
  NodeRendezvous& operator=(const NodeRendezvous&) = delete;

  // Step 1. Blocks until every node joined `round`; returns rank 0's port for it.
  // DeadlineExceeded naming the missing nodes after the timeout. Every blocking call
  // here checks `interrupted` every 200 ms: then it publishes a failure nobody
  // restarts from and returns Cancelled; a failure another node published for the
  // round ends the wait too (Aborted with its message).
  absl::StatusOr<int> BeginRound(int round, const std::function<bool()>& interrupted);
  // Step 2. Non-blocking (one short RPC): the failure some node published for `round`.
  // A lost store (node 0 gone) is a failure that is not restartable.
  std::optional<RoundFailure> Failure(int round);
  // Step 2. Publishes this node's failure for `round` (the first one published wins).
  void PublishFailure(int round, const RoundFailure& failure);
  // Step 3. Blocks until every node's group finished `round` (OK) or some node
  // published a failure for it (Aborted with its message), up to the timeout.
  absl::Status FinishRound(int round, const std::function<bool()>& interrupted);

 private:
  // Blocks until all `keys` exist (OK), as BeginRound describes.
  absl::Status WaitForKeys(int round, const std::vector<std::string>& keys,
                           const std::function<bool()>& interrupted);

  NodeRendezvous(int nnodes, int node_rank, absl::Duration timeout)
      : nnodes_(nnodes), node_rank_(node_rank), timeout_(timeout) {}

  const int nnodes_;
  const int node_rank_;
  const absl::Duration timeout_;
  std::unique_ptr<StoreServer> server_;  // Node 0 only.
  std::unique_ptr<Store> connection_;
  std::unique_ptr<Store> store_;  // connection_ under the job's prefix.
  std::optional<ReservedPort> round_port_;  // Node 0: the last round's port, until the next.
};

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LAUNCH_NODE_RENDEZVOUS_H_
