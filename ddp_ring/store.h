// The rendezvous store: a small key-value service with blocking reads, like PyTorch's
// TCPStore. Rank 0 hosts it (StoreServer, gRPC) at MASTER_ADDR:MASTER_PORT; every rank
// talks to it through a client. Under torchrun's static rendezvous the store is
// torchrun's own TCPStore instead, reached through ConnectTorchStore (job_store.h
// picks). Gloo's rendezvous and NCCL's unique-id exchange go
// through it, and so does the check that all ranks run the same configuration.
// An in-process twin (NewInMemoryStore) serves tests that run ranks as threads.
#ifndef RINGSIDE_DDP_RING_STORE_H_
#define RINGSIDE_DDP_RING_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc_security.h"

namespace ringside {

// Thread-safe: any number of threads may call any method concurrently.
class Store {
 public:
  virtual ~Store() = default;

  // Sets `key` to `value`, replacing any earlier value, and wakes waiters.
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` exists, then returns its value. DeadlineExceeded naming the key
  // after `timeout`; Unavailable if the store cannot be reached.
  virtual absl::StatusOr<std::string> Get(const std::string& key,
                                          absl::Duration timeout) = 0;
  // Blocks until every key exists. DeadlineExceeded names the missing keys.
  virtual absl::Status Wait(const std::vector<std::string>& keys,
                            absl::Duration timeout) = 0;
  // Atomically adds `delta` to the decimal integer stored at `key` (a missing key
  // counts as 0) and returns the new value. InvalidArgument if the value is not an
  // integer.
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
};

// The in-process store: a hash map under a mutex, with condition-variable waits.
std::unique_ptr<Store> NewInMemoryStore();

// A view of `base` that prefixes every key with "<prefix>/", so that two jobs (or two
// process groups of one job) can share one store. `base` must outlive the view.
std::unique_ptr<Store> NewPrefixStore(const std::string& prefix, Store* base);

// Hosts an in-memory store over gRPC. Thread-safe.
class StoreServer {
 public:
  virtual ~StoreServer() = default;
  // Listens on host:port (port 0 picks a free port; see port()) only: pass the
  // address the clients dial (127.0.0.1 for one machine), not a wildcard, unless told.
  // FailedPrecondition naming the address if it cannot bind (e.g. the port is in use).
  // `security` is the security this server listens with (common/rpc_security.h; a copy
  // is kept): with a token, every call without it is refused with UNAUTHENTICATED and
  // changes nothing; empty token: unauthenticated. Its threads are capped for
  // `max_clients` client processes (each with a few blocking calls at once); calls
  // past the cap are refused with RESOURCE_EXHAUSTED.
  static absl::StatusOr<std::unique_ptr<StoreServer>> Start(const std::string& host, int port,
                                                            const RpcSecurity& security,
                                                            int max_clients = 64);
  virtual int port() const = 0;
  // Stops serving: pending blocking calls fail with Unavailable. Idempotent.
  virtual void Shutdown() = 0;
};

// Connects to a StoreServer. Waits up to `connect_timeout` for the server to come up
// (it may start after the clients), then fails with Unavailable naming host:port.
// Every RPC of the returned store carries a deadline (the call's timeout plus a small
// margin for blocking calls, `rpc_timeout` for the others). `security` is the security
// this client connects with (its token on every call, TLS if set; empty token:
// unauthenticated); a refused call is Unauthenticated, one line.
absl::StatusOr<std::unique_ptr<Store>> ConnectStore(const std::string& host, int port,
                                                    const RpcSecurity& security,
                                                    absl::Duration connect_timeout,
                                                    absl::Duration rpc_timeout);

// Connects to a PyTorch c10d TCPStore server (torch 1.13's protocol; the one
// torchrun's agent hosts), as the same Store: keys are those torch's own clients see.
// Waits up to `connect_timeout` for the server to come up, then fails with
// Unavailable naming host:port. Each call is bounded: blocking ones by their timeout,
// the others by `rpc_timeout`. Concurrent calls use separate connections.
absl::StatusOr<std::unique_ptr<Store>> ConnectTorchStore(const std::string& host, int port,
                                                         absl::Duration connect_timeout,
                                                         absl::Duration rpc_timeout);

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_STORE_H_
