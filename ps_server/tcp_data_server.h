// The shard's end of the parameter server's data plane on TCP (`--ps_transport=tcp`;
// tcp_wire.h's protocol): a listener and one thread per worker connection, over the
// same Shard as the gRPC service (ps_service.h), which keeps the control plane.
#ifndef RINGSIDE_PS_SERVER_TCP_DATA_SERVER_H_
#define RINGSIDE_PS_SERVER_TCP_DATA_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/socket_io.h"
#include "ps_server/shard.h"

namespace ringside {

// Thread-safe. Borrows the shard, which must outlive it.
class TcpDataServer {
 public:
  // Listens on `host` (a name or numeric address; port 0: the kernel picks one) for the
  // shard's workers. `token`: the job's (empty: none is checked). Errors as ListenTcp's.
  static absl::StatusOr<std::unique_ptr<TcpDataServer>> Start(Shard* shard,
                                                               const std::string& host,
                                                               std::string token);
  // Stops: closes the listener and shuts every connection down (a worker blocked on
  // this shard sees it closed at once), then joins the threads.
  ~TcpDataServer();

  TcpDataServer(const TcpDataServer&) = delete;
  TcpDataServer& operator=(const TcpDataServer&) = delete;

  int port() const { return port_; }

 private:
  class Connection;

  TcpDataServer(Shard* shard, TcpListener listener, int port, std::string token);
  // Accepts connections until stopped; each gets a thread.
  void AcceptLoop();

  Shard* const shard_;
  const TcpListener listener_;
  const int port_;
  const std::string token_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  // Every connection's socket (to shut down on stop) and thread.
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_TCP_DATA_SERVER_H_
