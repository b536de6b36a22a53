#include "common/frame_io.h"

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/socket_io.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(20);

// Two ends of one loopback TCP connection, made through socket_io's listen, connect and
// accept (port 0: the kernel picks it).
struct Connection {
  ScopedFd client;
  ScopedFd server;
};

Connection Connect() {
  const absl::Time deadline = absl::Now() + kTimeout;
  absl::StatusOr<TcpListener> listener = ListenTcp("127.0.0.1", 1);
  EXPECT_TRUE(listener.ok()) << listener.status();
  std::vector<std::string> host_port = absl::StrSplit(listener->endpoint, ' ');
  EXPECT_EQ(host_port.size(), 2u);
  absl::StatusOr<ScopedFd> client = ConnectTcp(host_port[0], host_port[1], deadline);
  EXPECT_TRUE(client.ok()) << client.status();
  absl::StatusOr<ScopedFd> server = AcceptTcp(listener->fd.get(), deadline);
  EXPECT_TRUE(server.ok()) << server.status();
  return {std::move(*client), std::move(*server)};
}

void Nothing(size_t, size_t) {}

std::vector<uint8_t> Pattern(int seed, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed * 7);
  return v;
}

// Both ends swap unequal payloads (8 MB and 5 bytes: far above the socket buffers in
// one direction, so each end must drain while it fills); each receives exactly the
// other's bytes, the counts are the payloads, and the kernel's counts grow by the
// payload plus one 16-byte header each way.
TEST(FrameIoTest, BothEndsSwapUnequalPayloads) {
  Connection c = Connect();
  const std::vector<uint8_t> a = Pattern(1, 8 << 20), b = Pattern(2, 5);
  std::vector<uint8_t> got_a(a.size()), got_b(b.size());
  FrameCounts client_counts, server_counts;
  // The kernel's counts before (a connection's start may count its SYN).
  absl::StatusOr<std::pair<int64_t, int64_t>> before = KernelSocketTraffic(c.client.get());
  ASSERT_TRUE(before.ok()) << before.status();
  std::thread server([&] {
    size_t last_received = 0;
    absl::Status s = ExchangeFrames(
        c.server.get(), 7, b.data(), b.size(), got_a.data(), got_a.size(),
        absl::Now() + kTimeout, "client", "test connection",
        [&](size_t, size_t received) {
          EXPECT_GE(received, last_received);  // Progress is monotone.
          last_received = received;
        },
        &server_counts);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(last_received, a.size());
  });
  absl::Status s = ExchangeFrames(c.client.get(), 7, a.data(), a.size(), got_b.data(),
                                  got_b.size(), absl::Now() + kTimeout, "server",
                                  "test connection", Nothing, &client_counts);
  server.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got_a, a);
  EXPECT_EQ(got_b, b);
  EXPECT_EQ(client_counts.sent, static_cast<int64_t>(a.size()));
  EXPECT_EQ(client_counts.received, static_cast<int64_t>(b.size()));
  EXPECT_EQ(server_counts.sent, static_cast<int64_t>(b.size()));
  absl::StatusOr<std::pair<int64_t, int64_t>> kernel = KernelSocketTraffic(c.client.get());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->first - before->first, static_cast<int64_t>(a.size() + kFrameHeaderBytes));
  EXPECT_EQ(kernel->second - before->second, static_cast<int64_t>(b.size() + kFrameHeaderBytes));
}

// A peer at another exchange (tag) or with another size is named, not obeyed; the
// receiver never reads past its buffer.
TEST(FrameIoTest, AHeaderThatDisagreesIsAnError) {
  for (const FrameHeader& wrong : {FrameHeader{8, 4}, FrameHeader{7, 5}, FrameHeader{7, 1u << 30}}) {
    Connection c = Connect();
    ASSERT_TRUE(WriteAll(c.client.get(), &wrong, sizeof(wrong), absl::Now() + kTimeout).ok());
    uint8_t buffer[4] = {};
    FrameCounts counts;
    absl::Status s = ExchangeFrames(c.server.get(), 7, nullptr, 0, buffer, sizeof(buffer),
                                    absl::Now() + kTimeout, "the client", "test connection",
                                    Nothing, &counts);
    EXPECT_TRUE(absl::IsInternal(s)) << s;
    EXPECT_EQ(s.message(), absl::StrCat("the client sent ", wrong.bytes, " bytes for exchange ",
                                        wrong.tag, " where this end expects 4 bytes for exchange 7"));
    EXPECT_EQ(counts.received, 0);
  }
}

TEST(FrameIoTest, CheckFrameHeaderAcceptsOnlyTheExpected) {
  EXPECT_TRUE(CheckFrameHeader({3, 10}, 3, 10, "p").ok());
  EXPECT_TRUE(absl::IsInternal(CheckFrameHeader({3, 11}, 3, 10, "p")));
  EXPECT_TRUE(absl::IsInternal(CheckFrameHeader({4, 10}, 3, 10, "p")));
}

// A peer that closes mid-frame (a truncated frame) is Unavailable, saying how far the
// exchange got; a silent peer is DeadlineExceeded at the deadline, not a hang.
TEST(FrameIoTest, ATruncatedFrameOrASilentPeerEndsTheExchange) {
  {
    Connection c = Connect();
    const FrameHeader header = {7, 100};
    const uint8_t half[50] = {};
    ASSERT_TRUE(WriteAll(c.client.get(), &header, sizeof(header), absl::Now() + kTimeout).ok());
    ASSERT_TRUE(WriteAll(c.client.get(), half, sizeof(half), absl::Now() + kTimeout).ok());
    c.client.Reset();
    std::vector<uint8_t> buffer(100);
    FrameCounts counts;
    absl::Status s = ExchangeFrames(c.server.get(), 7, nullptr, 0, buffer.data(), buffer.size(),
                                    absl::Now() + kTimeout, "client", "test connection",
                                    Nothing, &counts);
    EXPECT_TRUE(absl::IsUnavailable(s)) << s;
    EXPECT_NE(s.message().find("received 50 of 100"), absl::string_view::npos) << s;
    EXPECT_EQ(counts.received, 50);
  }
  {
    Connection c = Connect();
    uint8_t buffer[4];
    FrameCounts counts;
    const absl::Time start = absl::Now();
    absl::Status s = ExchangeFrames(c.server.get(), 7, nullptr, 0, buffer, sizeof(buffer),
                                    start + absl::Milliseconds(200), "client",
                                    "test connection", Nothing, &counts);
    EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  }
}

TEST(SocketIoTest, AcceptWithoutAConnectionTimesOut) {
  absl::StatusOr<TcpListener> listener = ListenTcp("127.0.0.1", 1);
  ASSERT_TRUE(listener.ok()) << listener.status();
  absl::StatusOr<ScopedFd> fd = AcceptTcp(listener->fd.get(), absl::Now() + absl::Milliseconds(50));
  EXPECT_TRUE(absl::IsDeadlineExceeded(fd.status())) << fd.status();
  EXPECT_TRUE(absl::IsInvalidArgument(ListenTcp("no-such-host.invalid", 1).status()));
}

}  // namespace
}  // namespace ringside
