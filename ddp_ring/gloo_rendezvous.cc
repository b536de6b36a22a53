#include "ddp_ring/gloo_rendezvous.h"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "ddp_ring/allreduce_algorithm.h"
#include "ddp_ring/gloo_errors.h"
#include "ddp_ring/gloo_store_adapter.h"

namespace ringside {
namespace {

// Gloo's TCP device dereferences an empty lookup result when the hostname does not
// resolve (Debian's 2022 Gloo crashes), so the name is resolved here first.
absl::Status CheckResolvable(const std::string& hostname, int rank) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(hostname.c_str(), nullptr, &hints, &result);
  if (result != nullptr) freeaddrinfo(result);
  if (rc != 0 || result == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": cannot resolve the Gloo hostname '", hostname,
                     "': ", rc != 0 ? gai_strerror(rc) : "no address"));
  }
  return absl::OkStatus();
}

std::string JoinKey(int rank) { return absl::StrCat("gloo_joined/", rank); }

// Step 1, once every join key exists: checks that every rank runs with this world size.
absl::Status CheckWorldSizes(Store* store, const ProcessGroupOptions& options) {
  const int rank = options.rank;
  for (int r = 0; r < options.world_size; ++r) {
    absl::StatusOr<std::string> theirs = store->Get(JoinKey(r), options.timeout);
    if (!theirs.ok()) {
      return absl::Status(
          theirs.status().code(),
          absl::StrCat("rank ", rank, ": rendezvous: ", theirs.status().message()));
    }
    if (*theirs != absl::StrCat(options.world_size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, ": rendezvous: rank ", r, " runs with world size ",
                       *theirs, ", this rank with ", options.world_size));
    }
  }
  return absl::OkStatus();
}

// Step 1: announce this rank and wait for all others. DeadlineExceeded names the ranks
// whose keys never appeared.
absl::Status Join(Store* store, const ProcessGroupOptions& options) {
  const int rank = options.rank;
  absl::Status status = store->Set(JoinKey(rank), absl::StrCat(options.world_size));
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("rank ", rank,
                                                    ": rendezvous: cannot announce "
                                                    "this rank in the store: ",
                                                    status.message()));
  }
  std::vector<std::string> keys;
  for (int r = 0; r < options.world_size; ++r) keys.push_back(JoinKey(r));
  status = store->Wait(keys, options.timeout);
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    // Find out who is missing (the keys that still do not exist).
    std::vector<int> missing;
    for (int r = 0; r < options.world_size; ++r) {
      if (!store->Get(JoinKey(r), absl::Milliseconds(1)).ok()) missing.push_back(r);
    }
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", rank, ": rendezvous timed out after ",
                     absl::FormatDuration(options.timeout), ": rank(s) ",
                     missing.empty() ? "?" : absl::StrJoin(missing, ", "), " of ",
                     options.world_size, " never joined"));
  }
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("rank ", rank,
                                                    ": rendezvous: waiting for the "
                                                    "other ranks failed: ",
                                                    status.message()));
  }
  return CheckWorldSizes(store, options);
}

// Step 2: the TCP device, listening on options.hostname.
absl::StatusOr<std::shared_ptr<gloo::transport::Device>> CreateDevice(
    const ProcessGroupOptions& options) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (...) {
    const absl::Status status = StatusFromException(
        std::current_exception(), options.rank,
        absl::StrCat("creating the TCP device on '", options.hostname, "'"), options.timeout);
    // A bad address is the caller's, not the network's.
    return absl::Status(status.code() == absl::StatusCode::kInternal
                            ? absl::StatusCode::kInvalidArgument
                            : status.code(),
                        status.message());
  }
}

// Step 2: the full mesh.
absl::StatusOr<std::shared_ptr<gloo::rendezvous::Context>> ConnectFullMesh(
    Store* store, const ProcessGroupOptions& options,
    std::shared_ptr<gloo::transport::Device>& device) {
  GlooStoreAdapter adapter(store, options.timeout);
  try {
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    // Bounds the store waits and TCP connects of connectFullMesh, and is the default
    // timeout of every operation on the pairs.
    context->setTimeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(options.timeout)));
    context->connectFullMesh(adapter, device);
    return context;
  } catch (...) {
    const absl::Status store_error = adapter.first_error();
    if (!store_error.ok()) {
      return absl::Status(
          store_error.code(),
          absl::StrCat("rank ", options.rank, ": rendezvous (connect full mesh) failed: ",
                       store_error.message()));
    }
    return StatusFromException(std::current_exception(), options.rank,
                               "rendezvous (connect full mesh)", options.timeout);
  }
}

// Step 2, continued: publishes this rank's end of each connection and reads the peers'.
absl::StatusOr<std::vector<std::pair<std::string, int>>> ExchangePairAddresses(
    Store* store, const ProcessGroupOptions& options, gloo::rendezvous::Context& context) {
  const int rank = options.rank;
  std::vector<std::pair<std::string, int>> peer_addresses;
  try {
    for (int peer = 0; peer < options.world_size; ++peer) {
      if (peer == rank) continue;
      RINGSIDE_RETURN_IF_ERROR(store->Set(absl::StrCat("pair_address/", rank, "/", peer),
                                          context.getPair(peer)->address().str()));
    }
    for (int peer = 0; peer < options.world_size; ++peer) {
      if (peer == rank) continue;
      absl::StatusOr<std::string> address =
          store->Get(absl::StrCat("pair_address/", peer, "/", rank), options.timeout);
      if (!address.ok()) {
        return absl::Status(address.status().code(),
                            absl::StrCat("rank ", rank, ": rendezvous (pair addresses) failed: ",
                                         address.status().message()));
      }
      peer_addresses.emplace_back(*address, peer);
    }
  } catch (...) {
    return StatusFromException(std::current_exception(), rank, "rendezvous (pair addresses)",
                               options.timeout);
  }
  return peer_addresses;
}

// Step 3: the doublings' own connections, only if one of them may run (else null).
absl::StatusOr<std::unique_ptr<TcpPairs>> ConnectPairsIfNeeded(
    Store* store, const ProcessGroupOptions& options) {
  if (!MayRunRecursiveDoubling(options.algorithm, options.world_size) &&
      options.algorithm != AllReduceAlgorithm::kHalvingDoubling) {
    return std::unique_ptr<TcpPairs>();
  }
  absl::StatusOr<std::unique_ptr<TcpPairs>> connected = TcpPairs::Connect(
      store, options.rank, options.world_size, options.hostname, options.timeout);
  if (!connected.ok()) {
    return absl::Status(connected.status().code(),
                        absl::StrCat("rank ", options.rank,
                                     ": rendezvous (direct TCP pairs) failed: ",
                                     connected.status().message()));
  }
  return connected;
}

}  // namespace

absl::StatusOr<GlooConnection> ConnectGloo(Store* store, const ProcessGroupOptions& options) {
  RINGSIDE_RETURN_IF_ERROR(CheckResolvable(options.hostname, options.rank));
  RINGSIDE_RETURN_IF_ERROR(Join(store, options));
  // The device's event-loop thread inherits this thread's mask.
  ScopedSigpipeBlock no_sigpipe;
  GlooConnection connection;
  RINGSIDE_ASSIGN_OR_RETURN(connection.device, CreateDevice(options));
  RINGSIDE_ASSIGN_OR_RETURN(connection.context,
                            ConnectFullMesh(store, options, connection.device));
  RINGSIDE_ASSIGN_OR_RETURN(connection.peer_addresses,
                            ExchangePairAddresses(store, options, *connection.context));
  RINGSIDE_ASSIGN_OR_RETURN(connection.pairs, ConnectPairsIfNeeded(store, options));
  return connection;
}

}  // namespace ringside
