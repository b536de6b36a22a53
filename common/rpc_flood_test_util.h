// Test helpers for the servers' connection limits (common/rpc_security.h's
// ServerLimits): idle TCP connections and this process's thread count.
#ifndef RINGSIDE_COMMON_RPC_FLOOD_TEST_UTIL_H_
#define RINGSIDE_COMMON_RPC_FLOOD_TEST_UTIL_H_

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace ringside {

// Threads of this process now (entries of /proc/self/task).
inline int ThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// Opens `n` TCP connections to 127.0.0.1:`port` that never send a byte; returns their
// descriptors (close them with CloseAll). Connections that fail are skipped.
inline std::vector<int> OpenIdleConnections(int port, int n) {
  std::vector<int> fds;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      continue;
    }
    fds.push_back(fd);
  }
  return fds;
}

inline void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

}  // namespace ringside

#endif  // RINGSIDE_COMMON_RPC_FLOOD_TEST_UTIL_H_
