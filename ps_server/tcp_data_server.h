// The shard's end of the parameter server's data plane on TCP (`--ps_transport=tcp`;
// tcp_wire.h's protocol): a listener and one thread per worker connection, over the
// same Shard as the gRPC service (ps_service.h), which keeps the control plane.
#ifndef RINGSIDE_PS_SERVER_TCP_DATA_SERVER_H_
#define RINGSIDE_PS_SERVER_TCP_DATA_SERVER_H_

#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/socket_io.h"
#include "common/wire_format.h"
#include "ps_server/shard.h"

namespace ringside {

// Thread-safe. Borrows the shard, which must outlive it.
class TcpDataServer {
 public:
  // Listens on `host` (a name or numeric address; port 0: the kernel picks one) for the
  // shard's workers. `token`: the job's (empty: none is checked). Push-pulls carry their
  // gradients and replies in the shard's RunConfig.compress format (pushes of parameters
  // and pulls: float32). Errors as ListenTcp's; InvalidArgument for an unknown format.
  static absl::StatusOr<std::unique_ptr<TcpDataServer>> Start(Shard* shard,
                                                               const std::string& host,
                                                               std::string token);
  // Stops: shuts the listener and every connection down (a worker blocked on this
  // shard sees it closed at once; the acceptor wakes at once), then joins the threads.
  ~TcpDataServer();

  TcpDataServer(const TcpDataServer&) = delete;
  TcpDataServer& operator=(const TcpDataServer&) = delete;

  int port() const { return port_; }

 private:
  class Connection;

  TcpDataServer(Shard* shard, TcpListener listener, int port, std::string token, WireFormat wire);
  // One connection's thread and socket (-1 once its thread is done with it).
  struct Served {
    std::thread thread;
    int fd = -1;
    bool done = false;
  };

  // Accepts connections until stopped; each gets a thread. Joins the threads of the
  // connections that ended as it goes, so a long job whose workers reconnect (elastic
  // PS) keeps only its live connections' threads.
  void AcceptLoop();
  // Joins and forgets the threads whose connections ended.
  void ReapEnded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Shard* const shard_;
  const TcpListener listener_;
  const int port_;
  const std::string token_;
  const WireFormat wire_;  // Push-pulls' values on the wire (RunConfig.compress).
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  // Every live (or not yet reaped) connection: its socket, to shut down on stop.
  std::list<std::unique_ptr<Served>> served_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_TCP_DATA_SERVER_H_
