// The algorithms of collective_algorithms.h as pure functions: ranks as threads over an
// in-memory Transfer (no sockets, no Gloo), checked against the closed forms of
// process_group_test_util.h, byte counts included. The same algorithms over Gloo are
// checked by process_group_test and collectives_test.
#include "ddp_ring/collective_algorithms.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/wire_format.h"
#include "ddp_ring/process_group_test_util.h"
#include "ddp_ring/ring_schedule.h"
#include "ddp_ring/transfer.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

using testing_util::ExpectedAllReduceBytes;
using testing_util::SumOfValues;
using testing_util::Value;

// Messages between the ranks of one test, by (from, to, slot or tag), in send order.
class Hub {
 public:
  using Key = std::tuple<int, int, uint64_t>;

  void Put(const Key& key, const void* data, size_t bytes) {
    absl::MutexLock lock(&mu_);
    const char* p = static_cast<const char*>(data);
    queues_[key].emplace_back(p, p + bytes);
  }

  // The oldest message under `key`, waiting up to 10 s for one.
  absl::Status Take(const Key& key, void* data, size_t bytes) {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queues_[key].empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(10))) {
      return absl::DeadlineExceededError("no message");
    }
    std::vector<char> message = std::move(queues_[key].front());
    queues_[key].erase(queues_[key].begin());
    if (message.size() != bytes) return absl::InternalError("size mismatch");
    std::memcpy(data, message.data(), bytes);
    return absl::OkStatus();
  }

 private:
  absl::Mutex mu_;
  std::map<Key, std::vector<std::vector<char>>> queues_ ABSL_GUARDED_BY(mu_);
};

constexpr uint64_t kExchangeBit = uint64_t{1} << 63;

// Sends are copied at post time; a receive is filled when waited for.
class HubTransfer : public Transfer {
 public:
  HubTransfer(Hub* hub, int rank) : hub_(hub), rank_(rank) {}

  absl::StatusOr<std::unique_ptr<TransferBuffer>> Register(void* data, size_t) override {
    return std::unique_ptr<TransferBuffer>(new Buffer(this, static_cast<char*>(data)));
  }
  uint64_t Slot(uint8_t prefix, uint32_t tag) const override {
    return (uint64_t{prefix} << 32) | tag;
  }
  absl::Status Exchange(int peer, uint64_t tag, const void* send, size_t send_bytes, void* recv,
                        size_t recv_bytes,
                        absl::FunctionRef<void(size_t, size_t)> progress) override {
    if (send_bytes > 0) hub_->Put({rank_, peer, tag | kExchangeBit}, send, send_bytes);
    bytes_.sent += send_bytes;
    if (recv_bytes > 0) {
      if (absl::Status s = hub_->Take({peer, rank_, tag | kExchangeBit}, recv, recv_bytes);
          !s.ok()) {
        return s;
      }
    }
    bytes_.received += recv_bytes;
    progress(send_bytes, recv_bytes);
    return absl::OkStatus();
  }
  CollectiveBytes bytes() const override { return bytes_; }

 private:
  struct Recv {
    int peer;
    uint64_t slot;
    size_t offset, bytes;
  };
  class Buffer : public TransferBuffer {
   public:
    Buffer(HubTransfer* owner, char* data) : owner_(owner), data_(data) {}
    absl::Status PostSend(int peer, uint64_t slot, size_t offset, size_t bytes) override {
      owner_->hub_->Put({owner_->rank_, peer, slot}, data_ + offset, bytes);
      sends_.push_back(bytes);
      return absl::OkStatus();
    }
    absl::Status PostRecv(int peer, uint64_t slot, size_t offset, size_t bytes) override {
      recvs_.push_back({peer, slot, offset, bytes});
      return absl::OkStatus();
    }
    absl::Status WaitSend() override {
      owner_->bytes_.sent += sends_.front();
      sends_.erase(sends_.begin());
      return absl::OkStatus();
    }
    absl::Status WaitRecv() override {
      const Recv r = recvs_.front();
      recvs_.erase(recvs_.begin());
      if (absl::Status s = owner_->hub_->Take({r.peer, owner_->rank_, r.slot}, data_ + r.offset,
                                              r.bytes);
          !s.ok()) {
        return s;
      }
      owner_->bytes_.received += r.bytes;
      return absl::OkStatus();
    }

   private:
    HubTransfer* const owner_;
    char* const data_;
    std::vector<size_t> sends_;
    std::vector<Recv> recvs_;
  };

  Hub* const hub_;
  const int rank_;
  CollectiveBytes bytes_;
};

// Runs `run(context, rank)` on `world` threads; returns each rank's bytes moved.
std::vector<CollectiveBytes> RunRanks(
    int world, const std::function<absl::Status(const CollectiveContext&)>& run) {
  Hub hub;
  std::vector<CollectiveBytes> bytes(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      HubTransfer transfer(&hub, r);
      std::vector<float> scratch;
      std::vector<uint16_t> wire_scratch;
      const absl::Status status = run({r, world, /*tag=*/7, &transfer, &scratch, &wire_scratch});
      EXPECT_TRUE(status.ok()) << "rank " << r << ": " << status;
      bytes[r] = transfer.bytes();
    });
  }
  for (std::thread& t : threads) t.join();
  return bytes;
}

using AllReduceFn = absl::Status (*)(const CollectiveContext&, float*, int64_t);

void CheckAllReduce(AllReduceFn fn, AllReduceAlgorithm algorithm, int world, int64_t n) {
  std::vector<std::vector<float>> data(world, std::vector<float>(n));
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; ++i) data[r][i] = Value(r, i);
  }
  const std::vector<CollectiveBytes> bytes =
      RunRanks(world, [&](const CollectiveContext& c) { return fn(c, data[c.rank].data(), n); });
  for (int r = 0; r < world; ++r) {
    const testing_util::Mismatches m = testing_util::CountMismatches(
        data[r].data(), n, [&](int64_t i) { return SumOfValues(world, i); }, 0);
    EXPECT_EQ(m.count, 0) << "w=" << world << " n=" << n << " rank " << r << " first " << m.first;
    EXPECT_EQ(bytes[r], ExpectedAllReduceBytes(algorithm, world, r, n))
        << "w=" << world << " n=" << n << " rank " << r;
  }
}

TEST(CollectiveAlgorithmsTest, AllReducesMatchTheClosedForms) {
  for (int world = 2; world <= 7; ++world) {
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{1000}, int64_t{4096}}) {
      CheckAllReduce(RingAllReduce, AllReduceAlgorithm::kRing, world, n);
      CheckAllReduce(RecursiveDoublingAllReduce, AllReduceAlgorithm::kRecursiveDoubling, world, n);
      if (n % testing_util::PowerOfTwoRanks(world) == 0) {
        CheckAllReduce(HalvingDoublingAllReduce, AllReduceAlgorithm::kHalvingDoubling, world, n);
      }
    }
  }
}

// Several segments per chunk: the pipelined path with a transfer in flight.
TEST(CollectiveAlgorithmsTest, RingPipelinesLargeVectors) {
  CheckAllReduce(RingAllReduce, AllReduceAlgorithm::kRing, 3, 3 * (int64_t{1} << 19) + 7);
}

// The compressed ring against its closed form, hop by hop: chunk c's running sum starts
// at rank c and picks up ranks c + 1, ..., c + w - 1 in turn, each adding its own value
// to the decoded code it received; the result is the decoded code of the last sum, on
// every rank alike. Half the fp32 ring's bytes on every rank.
void CheckCompressedRing(WireFormat format, int world, int64_t n) {
  auto x = [](int r, int64_t i) { return 0.37f * (r + 1) - 0.0013f * static_cast<float>(i % 997); };
  auto round = [format](float v) {
    return format == WireFormat::kFp16 ? HalfToFloat(FloatToHalf(v)) : Bfloat16ToFloat(FloatToBfloat16(v));
  };
  std::vector<std::vector<float>> data(world, std::vector<float>(n));
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; ++i) data[r][i] = x(r, i);
  }
  const std::vector<CollectiveBytes> bytes = RunRanks(world, [&](const CollectiveContext& c) {
    return CompressedRingAllReduce(c, data[c.rank].data(), n, format);
  });
  for (int r = 0; r < world; ++r) {
    const testing_util::Mismatches m = testing_util::CountMismatches(
        data[r].data(), n,
        [&](int64_t i) {
          int c = 0;
          while (RingChunkOf(n, world, c).begin + RingChunkOf(n, world, c).count <= i) ++c;
          float sum = x(c, i);
          for (int k = 1; k < world; ++k) sum = x((c + k) % world, i) + round(sum);
          return round(sum);
        },
        0);
    EXPECT_EQ(m.count, 0) << WireFormatName(format) << " w=" << world << " n=" << n << " rank " << r
                          << " first " << m.first;
    const CollectiveBytes fp32 = ExpectedAllReduceBytes(AllReduceAlgorithm::kRing, world, r, n);
    EXPECT_EQ(bytes[r].sent * 2, fp32.sent) << "w=" << world << " n=" << n << " rank " << r;
    EXPECT_EQ(bytes[r].received * 2, fp32.received) << "w=" << world << " n=" << n << " rank " << r;
  }
}

TEST(CollectiveAlgorithmsTest, CompressedRingMatchesItsClosedForm) {
  for (WireFormat format : {WireFormat::kFp16, WireFormat::kBf16}) {
    for (int world = 2; world <= 5; ++world) {
      for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{1000}}) CheckCompressedRing(format, world, n);
    }
    CheckCompressedRing(format, 3, 3 * (int64_t{1} << 19) + 7);  // Pipelined: several segments a chunk.
  }
}

TEST(CollectiveAlgorithmsTest, RootedAndGatheringCollectives) {
  const int world = 5;
  const int64_t n = 37;
  const int root = 3;
  std::vector<std::vector<float>> bcast(world, std::vector<float>(n));
  std::vector<std::vector<float>> reduce(world, std::vector<float>(n));
  std::vector<std::vector<float>> slices(world, std::vector<float>(world * n));
  std::vector<std::vector<float>> gathered(world, std::vector<float>(world * n));
  std::vector<std::vector<float>> scattered(world, std::vector<float>(n));
  std::vector<std::vector<float>> transposed(world, std::vector<float>(world * n));
  std::vector<std::vector<float>> reduced_slice(world, std::vector<float>(n));
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; ++i) bcast[r][i] = reduce[r][i] = Value(r, i);
    for (int64_t i = 0; i < world * n; ++i) slices[r][i] = Value(r, i);
  }
  RunRanks(world, [&](const CollectiveContext& c) -> absl::Status {
    const int r = c.rank;
    if (absl::Status s = BinomialBroadcast(c, bcast[r].data(), n, root); !s.ok()) return s;
    CollectiveContext next = c;
    next.tag = c.tag + 1;
    if (absl::Status s = BinomialReduce(next, reduce[r].data(), n, root); !s.ok()) return s;
    next.tag = c.tag + 2;
    std::copy(bcast[r].begin(), bcast[r].end(), gathered[r].begin() + r * n);
    if (absl::Status s = RingAllGather(next, gathered[r].data(), n); !s.ok()) return s;
    next.tag = c.tag + 3;
    if (absl::Status s = FlatScatter(next, slices[r].data(), scattered[r].data(), n, root);
        !s.ok()) {
      return s;
    }
    next.tag = c.tag + 4;
    if (absl::Status s = PairwiseAllToAll(next, slices[r].data(), transposed[r].data(), n);
        !s.ok()) {
      return s;
    }
    next.tag = c.tag + 5;
    return RingReduceScatter(next, slices[r].data(), reduced_slice[r].data(), n);
  });
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(bcast[r][i], Value(root, i));
      if (r == root) {
        ASSERT_EQ(reduce[r][i], SumOfValues(world, i));
      } else {
        ASSERT_EQ(reduce[r][i], Value(r, i)) << "a non-root's buffer is untouched";
      }
      ASSERT_EQ(scattered[r][i], Value(root, r * n + i));
      float sum = 0;
      for (int s = 0; s < world; ++s) sum += Value(s, r * n + i);
      ASSERT_EQ(reduced_slice[r][i], sum);
      for (int s = 0; s < world; ++s) {
        ASSERT_EQ(gathered[r][s * n + i], Value(root, i));
        ASSERT_EQ(transposed[r][s * n + i], Value(s, r * n + i));
      }
    }
  }
}

}  // namespace
}  // namespace ringside
