#include "ddp_ring/tcp_pairs.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "ddp_ring/store.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(20);

// Runs body(rank, pairs) on `world` threads, each with its own connected TcpPairs.
void RunRanks(int world, const std::function<void(int, TcpPairs&)>& body) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      absl::StatusOr<std::unique_ptr<TcpPairs>> pairs =
          TcpPairs::Connect(store.get(), rank, world, "127.0.0.1", kTimeout);
      ASSERT_TRUE(pairs.ok()) << pairs.status();
      body(rank, **pairs);
    });
  }
  for (auto& t : threads) t.join();
}

// Bytes rank `from` sends rank `to`: a pattern that differs per pair and per byte.
std::vector<uint8_t> Pattern(int from, int to, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + from * 7 + to * 3);
  return v;
}

// Every pair of 3 ranks swaps messages of unequal sizes (including none and 40 MB,
// far above the socket buffers, so both ends must drain while they fill); each end
// receives exactly the peer's bytes and sees monotone progress that ends complete.
TEST(TcpPairsTest, EveryPairSwapsUnequalMessagesBothWays) {
  // size[from][to]: bytes rank `from` sends rank `to`.
  const size_t size[3][3] = {{0, 40 << 20, 0}, {13, 0, 13}, {40 << 20, 0, 0}};
  RunRanks(3, [&](int rank, TcpPairs& pairs) {
    EXPECT_EQ(pairs.world_size(), 3);
    EXPECT_EQ(pairs.rank(), rank);
    // Rounds in an order every rank agrees on: (0,1), (0,2), (1,2).
    for (int a = 0; a < 3; ++a) {
      for (int b = a + 1; b < 3; ++b) {
        if (rank != a && rank != b) continue;
        const int peer = rank == a ? b : a;
        const size_t out_n = size[rank][peer];
        const size_t in_n = size[peer][rank];
        std::vector<uint8_t> out = Pattern(rank, peer, out_n);
        std::vector<uint8_t> in(in_n, 0);
        size_t last_sent = 0, last_received = 0;
        bool monotone = true;
        const absl::Status status = pairs.Exchange(
            peer, a * 3 + b, out.data(), out_n, in.data(), in_n, absl::Now() + kTimeout,
            [&](size_t sent, size_t received) {
              monotone = monotone && sent >= last_sent && received >= last_received &&
                         sent <= out_n && received <= in_n;
              last_sent = sent;
              last_received = received;
            });
        SCOPED_TRACE(absl::StrCat("rank ", rank, " with ", peer));
        ASSERT_TRUE(status.ok()) << status;
        EXPECT_TRUE(monotone);
        if (out_n + in_n > 0) {
          EXPECT_EQ(last_sent, out_n);
          EXPECT_EQ(last_received, in_n);
        }
        EXPECT_TRUE(in == Pattern(peer, rank, in_n));
      }
    }
  });
}

// Peers that disagree on the size or on the exchange get Internal, not each other's
// bytes. The receiving rank keeps its connection open until the sender is done (closing
// a socket with unread bytes resets it, which would fail the sender's writes instead).
TEST(TcpPairsTest, DisagreeingPeersGetInternal) {
  absl::Notification sent;
  RunRanks(2, [&](int rank, TcpPairs& pairs) {
    std::vector<uint8_t> buffer(400, 1);
    auto ignore = [](size_t, size_t) {};
    const absl::Time deadline = absl::Now() + kTimeout;
    if (rank == 1) {
      // Sends 200 bytes of exchange 7, then 100 bytes of exchange 8.
      EXPECT_TRUE(pairs.Exchange(0, 7, buffer.data(), 200, nullptr, 0, deadline, ignore).ok());
      EXPECT_TRUE(pairs.Exchange(0, 8, buffer.data(), 100, nullptr, 0, deadline, ignore).ok());
      sent.Notify();
      return;
    }
    absl::Status status = pairs.Exchange(1, 7, nullptr, 0, buffer.data(), 100, deadline, ignore);
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
    EXPECT_NE(status.message().find("disagree"), std::string::npos) << status;
    sent.WaitForNotificationWithTimeout(kTimeout);
  });
  absl::Notification sent_again;
  RunRanks(2, [&](int rank, TcpPairs& pairs) {
    std::vector<uint8_t> buffer(100, 1);
    auto ignore = [](size_t, size_t) {};
    const absl::Time deadline = absl::Now() + kTimeout;
    if (rank == 1) {
      EXPECT_TRUE(pairs.Exchange(0, 8, buffer.data(), 100, nullptr, 0, deadline, ignore).ok());
      sent_again.Notify();
      return;
    }
    absl::Status status = pairs.Exchange(1, 7, nullptr, 0, buffer.data(), 100, deadline, ignore);
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
    EXPECT_NE(status.message().find("exchange 8"), std::string::npos) << status;
    sent_again.WaitForNotificationWithTimeout(kTimeout);
  });
}

// A peer that stays connected but silent: DeadlineExceeded at the deadline.
TEST(TcpPairsTest, SilentPeerGivesDeadlineExceeded) {
  absl::Notification done;
  RunRanks(2, [&](int rank, TcpPairs& pairs) {
    if (rank == 1) {
      done.WaitForNotification();
      return;
    }
    std::vector<uint8_t> buffer(1000);
    const absl::Time start = absl::Now();
    const absl::Status status = pairs.Exchange(1, 1, buffer.data(), 1000, buffer.data(), 1000,
                                               start + absl::Milliseconds(300),
                                               [](size_t, size_t) {});
    const absl::Duration took = absl::Now() - start;
    done.Notify();
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status;
    EXPECT_GE(took, absl::Milliseconds(290));
    EXPECT_LE(took, absl::Seconds(3));
  });
}

// A peer that closes its end: Unavailable long before the deadline, for a receiver
// and for a sender whose bytes no longer fit in the socket buffers.
TEST(TcpPairsTest, ClosedPeerGivesUnavailableAtOnce) {
  for (const bool sending : {false, true}) {
    absl::Notification closed;
    RunRanks(2, [&](int rank, TcpPairs& pairs) {
      if (rank == 1) {
        pairs.Close();
        closed.Notify();
        return;
      }
      closed.WaitForNotification();
      std::vector<uint8_t> buffer(64 << 20);
      const absl::Time start = absl::Now();
      const absl::Status status =
          sending ? pairs.Exchange(1, 1, buffer.data(), buffer.size(), nullptr, 0,
                                   start + kTimeout, [](size_t, size_t) {})
                  : pairs.Exchange(1, 1, nullptr, 0, buffer.data(), buffer.size(),
                                   start + kTimeout, [](size_t, size_t) {});
      EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
      EXPECT_LE(absl::Now() - start, absl::Seconds(3));
    });
  }
}

// A rank that never arrives: Connect fails within the timeout naming it, on both
// sides of the missing connection.
TEST(TcpPairsTest, MissingRankGivesDeadlineExceeded) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  const absl::Time start = absl::Now();
  // Rank 0 of 2 alone: rank 1 never connects.
  absl::StatusOr<std::unique_ptr<TcpPairs>> alone =
      TcpPairs::Connect(store.get(), 0, 2, "127.0.0.1", absl::Milliseconds(300));
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kDeadlineExceeded) << alone.status();
  EXPECT_NE(alone.status().message().find("rank(s) 1 did not connect"), std::string::npos)
      << alone.status();
  // Rank 2 of 3 in a fresh store: rank 0 and 1 never publish their addresses.
  std::unique_ptr<Store> empty = NewInMemoryStore();
  absl::StatusOr<std::unique_ptr<TcpPairs>> late =
      TcpPairs::Connect(empty.get(), 2, 3, "127.0.0.1", absl::Milliseconds(300));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_NE(late.status().message().find("rank 0 never published"), std::string::npos)
      << late.status();
  EXPECT_LE(absl::Now() - start, absl::Seconds(5));
}

TEST(TcpPairsTest, BadHostnameGivesInvalidArgument) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  absl::StatusOr<std::unique_ptr<TcpPairs>> pairs =
      TcpPairs::Connect(store.get(), 0, 2, "no-such-host.invalid", absl::Seconds(1));
  EXPECT_EQ(pairs.status().code(), absl::StatusCode::kInvalidArgument) << pairs.status();
}

// The payload counters against the kernel: across exchanges of several sizes (none,
// one byte, odd, far above the socket buffers), what TCP_INFO says each rank's sockets
// carried (written, read) grew by exactly the payload counted plus one 16-byte header
// per direction that moved payload.
// Ranks as threads meet here: a reusable barrier outside the sockets, so that the
// kernel's counters are read while the peer sends nothing.
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int n) : n_(n) {}
  // Blocks until all n threads called it (again, for each reuse).
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;          // Guarded by mu_.
  int64_t generation_ = 0;   // Guarded by mu_.
};

TEST(TcpPairsTest, PayloadCountersMatchWhatTheKernelCarried) {
  const size_t sizes[] = {0, 1, 4097, size_t{24} << 20};
  ThreadBarrier barrier(2);
  RunRanks(2, [&](int rank, TcpPairs& pairs) {
    const int peer = 1 - rank;
    // Both idle: nothing of this test is on the wire yet.
    barrier.Wait();
    absl::StatusOr<std::pair<int64_t, int64_t>> kernel_before = pairs.KernelTraffic();
    ASSERT_TRUE(kernel_before.ok()) << kernel_before.status();
    const int64_t sent_before = pairs.payload_sent();
    const int64_t received_before = pairs.payload_received();
    barrier.Wait();
    int64_t headers_out = 0, headers_in = 0, payload_out = 0, payload_in = 0;
    uint64_t tag = 0;
    for (size_t out_n : sizes) {
      for (size_t in_n : sizes) {
        // Rank 0 sends out_n and receives in_n; rank 1 the mirror.
        const size_t mine = rank == 0 ? out_n : in_n;
        const size_t theirs = rank == 0 ? in_n : out_n;
        std::vector<uint8_t> out = Pattern(rank, peer, mine);
        std::vector<uint8_t> in(theirs);
        ASSERT_TRUE(pairs.Exchange(peer, tag++, out.data(), mine, in.data(), theirs,
                                   absl::Now() + kTimeout, [](size_t, size_t) {}).ok());
        payload_out += mine;
        payload_in += theirs;
        headers_out += mine > 0 ? 16 : 0;
        headers_in += theirs > 0 ? 16 : 0;
      }
    }
    EXPECT_EQ(pairs.payload_sent() - sent_before, payload_out);
    EXPECT_EQ(pairs.payload_received() - received_before, payload_in);
    // Both done: every byte either sent was read by the other, so only the peer's
    // acknowledgements may still be on their way. Wait for them, boundedly.
    barrier.Wait();
    absl::StatusOr<std::pair<int64_t, int64_t>> kernel_after = pairs.KernelTraffic();
    const absl::Time deadline = absl::Now() + kTimeout;
    while (kernel_after.ok() && kernel_after->first - kernel_before->first != payload_out + headers_out &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
      kernel_after = pairs.KernelTraffic();
    }
    ASSERT_TRUE(kernel_after.ok()) << kernel_after.status();
    EXPECT_EQ(kernel_after->first - kernel_before->first, payload_out + headers_out)
        << "rank " << rank << ": written";
    EXPECT_EQ(kernel_after->second - kernel_before->second, payload_in + headers_in)
        << "rank " << rank << ": read";
    // Keeps the sockets open until both measured (a FIN would count as a byte).
    barrier.Wait();
  });
}

}  // namespace
}  // namespace ringside
