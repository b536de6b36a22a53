#include "experiments/sys/process_info.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace ringside {
namespace {

// A TCP socket bound to 127.0.0.1:`port` (0: any), with SO_REUSEADDR as gRPC's
// listeners set it when `reuse`; -1 if bind fails. `*bound` gets the port.
int BindLoopback(int port, bool reuse, int* bound = nullptr) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  const int one = 1;
  if (reuse) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  if (bound != nullptr) *bound = ntohs(addr.sin_port);
  return fd;
}

// The protocol the launchers rely on: while held, the port goes to no bind of port 0
// and to no socket without SO_REUSEADDR, yet a server with it listens there and is
// reached.
TEST(ReserveFreePortTest, HoldsThePortForTheServerAlone) {
  absl::StatusOr<ReservedPort> reserved = ReserveFreePort();
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  const int port = reserved->port();
  ASSERT_GT(port, 0);

  for (int i = 0; i < 2000; ++i) {
    int other = 0;
    const int fd = BindLoopback(0, /*reuse=*/i % 2 == 0, &other);
    ASSERT_GE(fd, 0);
    close(fd);
    ASSERT_NE(other, port) << "bind to port 0 was handed the reserved port";
  }
  const int plain = BindLoopback(port, /*reuse=*/false);
  EXPECT_LT(plain, 0) << "a socket without SO_REUSEADDR bound the reserved port";
  if (plain >= 0) close(plain);

  const int server = BindLoopback(port, /*reuse=*/true);
  ASSERT_GE(server, 0) << "the server could not bind the reserved port";
  ASSERT_EQ(listen(server, 1), 0);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const int accepted = accept(server, nullptr, nullptr);
  EXPECT_GE(accepted, 0);
  close(accepted);
  close(client);
  close(server);
}

TEST(ReserveFreePortTest, ReleasingGivesThePortBack) {
  absl::StatusOr<ReservedPort> reserved = ReserveFreePort();
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  const int port = reserved->port();
  { ReservedPort released = *std::move(reserved); }
  const int after = BindLoopback(port, /*reuse=*/false);
  EXPECT_GE(after, 0) << "the port stayed taken after the reservation was released";
  close(after);
}

TEST(ReserveFreePortTest, HeldReservationsAreDistinctAndMoveKeepsThePort) {
  std::vector<ReservedPort> held;
  std::set<int> ports;
  for (int i = 0; i < 32; ++i) {
    absl::StatusOr<ReservedPort> r = ReserveFreePort();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(ports.insert(r->port()).second) << "port " << r->port() << " reserved twice";
    held.push_back(*std::move(r));
  }
  const int first = held[0].port();
  ReservedPort moved = std::move(held[0]);
  EXPECT_EQ(moved.port(), first);
  const int plain = BindLoopback(first, /*reuse=*/false);
  EXPECT_LT(plain, 0) << "moving the reservation released the port";
  if (plain >= 0) close(plain);
}

}  // namespace
}  // namespace ringside
