#include "experiments/launch/node_rendezvous.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

constexpr absl::Duration kRpcTimeout = absl::Seconds(10);
// How long node 0 keeps serving for the others to read the outcome and leave.
constexpr absl::Duration kLeaveGrace = absl::Seconds(10);
// A published failure: "<kind>:<message>".
constexpr char kRestart[] = "restart:";
constexpr char kStop[] = "stop:";

std::vector<std::string> NodeKeys(const std::string& prefix, int nnodes) {
  std::vector<std::string> keys;
  for (int n = 0; n < nnodes; ++n) keys.push_back(absl::StrCat(prefix, n));
  return keys;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeRendezvous>> NodeRendezvous::Join(
    const std::string& host, int port, int nnodes, int node_rank, const std::string& run_id,
    const RpcSecurity& security, absl::Duration timeout) {
  std::unique_ptr<NodeRendezvous> r(new NodeRendezvous(nnodes, node_rank, timeout));
  if (node_rank == 0) {
    absl::StatusOr<std::unique_ptr<StoreServer>> server = StoreServer::Start(host, port, security, nnodes);
    if (!server.ok()) return Annotate(server.status(), "launch: hosting the nodes' rendezvous");
    r->server_ = std::move(*server);
  }
  absl::StatusOr<std::unique_ptr<Store>> connection = ConnectStore(host, port, security, timeout, kRpcTimeout);
  if (!connection.ok()) return Annotate(connection.status(), "launch: joining the nodes' rendezvous");
  r->connection_ = std::move(*connection);
  r->store_ = NewPrefixStore(absl::StrCat("launch/", run_id), r->connection_.get());
  return r;
}

NodeRendezvous::~NodeRendezvous() {
  if (store_ == nullptr) return;  // Join failed before connecting.
  store_->Set(absl::StrCat("left/", node_rank_), "1").IgnoreError();  // Best effort.
  if (server_ == nullptr) return;
  std::vector<std::string> left;  // Of the nodes that ever joined.
  for (int n = 0; n < nnodes_; ++n) {
    if (store_->Get(absl::StrCat("0/joined/", n), absl::ZeroDuration()).ok()) {
      left.push_back(absl::StrCat("left/", n));
    }
  }
  store_->Wait(left, kLeaveGrace).IgnoreError();
  server_->Shutdown();
}

absl::Status NodeRendezvous::WaitForKeys(int round, const std::vector<std::string>& keys,
                                         const std::function<bool()>& interrupted) {
  const absl::Time deadline = absl::Now() + timeout_;
  while (true) {
    if (interrupted()) {
      PublishFailure(round, {absl::StrCat("node ", node_rank_, ": interrupted"), false});
      return absl::CancelledError(absl::StrCat("launch: interrupted in round ", round));
    }
    if (std::optional<RoundFailure> f = Failure(round); f.has_value()) {
      return absl::AbortedError(f->message);
    }
    absl::Status s = store_->Wait(keys, absl::Milliseconds(200));
    if (!absl::IsDeadlineExceeded(s)) return s;
    if (absl::Now() >= deadline) return s;
  }
}

absl::StatusOr<int> NodeRendezvous::BeginRound(int round, const std::function<bool()>& interrupted) {
  const std::string r = absl::StrCat(round, "/");
  RINGSIDE_RETURN_IF_ERROR(store_->Set(absl::StrCat(r, "joined/", node_rank_), "1"));
  if (node_rank_ == 0) {
    absl::Status joined = WaitForKeys(round, NodeKeys(r + "joined/", nnodes_), interrupted);
    if (absl::IsDeadlineExceeded(joined)) {
      std::vector<int> missing;
      for (int n = 0; n < nnodes_; ++n) {
        if (!store_->Get(absl::StrCat(r, "joined/", n), absl::ZeroDuration()).ok()) missing.push_back(n);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "launch: node(s) ", absl::StrJoin(missing, ", "), " did not join round ", round,
          " within ", absl::FormatDuration(timeout_)));
    }
    RINGSIDE_RETURN_IF_ERROR(joined);
    // Held until the next round: nothing else takes it before rank 0 binds it.
    RINGSIDE_ASSIGN_OR_RETURN(round_port_, ReserveFreePort());
    const int port = round_port_->port();
    RINGSIDE_RETURN_IF_ERROR(store_->Set(r + "port", absl::StrCat(port)));
    return port;
  }
  absl::Status published = WaitForKeys(round, {r + "port"}, interrupted);
  if (!published.ok()) return Annotate(published, absl::StrCat("launch: waiting for round ", round));
  RINGSIDE_ASSIGN_OR_RETURN(const std::string port_text, store_->Get(r + "port", kRpcTimeout));
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port)) {
    return absl::DataLossError(absl::StrCat("launch: round ", round, ": bad port '", port_text, "'"));
  }
  return port;
}

std::optional<RoundFailure> NodeRendezvous::Failure(int round) {
  absl::StatusOr<std::string> value = store_->Get(absl::StrCat(round, "/failed"), absl::ZeroDuration());
  if (absl::IsDeadlineExceeded(value.status())) return std::nullopt;  // Nobody failed.
  if (!value.ok()) {
    return RoundFailure{absl::StrCat("lost the nodes' rendezvous (node 0's launcher): ",
                                     value.status().message()),
                        false};
  }
  absl::string_view text = *value;
  const bool restartable = absl::ConsumePrefix(&text, kRestart);
  if (!restartable) absl::ConsumePrefix(&text, kStop);
  return RoundFailure{std::string(text), restartable};
}

void NodeRendezvous::PublishFailure(int round, const RoundFailure& failure) {
  const std::string r = absl::StrCat(round, "/");
  absl::StatusOr<int64_t> order = store_->Add(r + "failures", 1);
  if (!order.ok() || *order != 1) return;  // Someone else's came first (or node 0 is gone).
  store_->Set(r + "failed", absl::StrCat(failure.restartable ? kRestart : kStop, failure.message))
      .IgnoreError();
}

absl::Status NodeRendezvous::FinishRound(int round, const std::function<bool()>& interrupted) {
  const std::string r = absl::StrCat(round, "/");
  RINGSIDE_RETURN_IF_ERROR(store_->Set(absl::StrCat(r, "done/", node_rank_), "1"));
  absl::Status done = WaitForKeys(round, NodeKeys(r + "done/", nnodes_), interrupted);
  if (absl::IsDeadlineExceeded(done)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "launch: the other nodes did not finish round ", round, " within ",
        absl::FormatDuration(timeout_)));
  }
  return done;
}

}  // namespace ringside
