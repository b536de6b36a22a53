// The NCCL process group. Without a GPU only the refusal paths run; the collectives
// (all of them: all-reduce, broadcast, all-gather, reduce-scatter, barrier, reduce,
// scatter, gather, all-to-all) are skipped (GTEST_SKIP) and run for real on a machine
// with one (world 1) or two (world 2, ranks as threads) GPUs.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/cpu_ops.h"
#include "common/cuda_ops.h"
#include "common/device.h"
#include "ddp_ring/nccl_process_group.h"
#include "ddp_ring/store.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

ProcessGroupOptions Options(int rank, int world) {
  ProcessGroupOptions options;
  options.rank = rank;
  options.world_size = world;
  options.timeout = absl::Seconds(60);
  options.cuda_device = rank;
  return options;
}

float Value(int rank, int64_t i) {
  return static_cast<float>(rank + 1) + static_cast<float>(i % 1024) * 0.25f;
}

float SumOfValues(int world, int64_t i) {
  return 0.5f * world * (world + 1) + world * (static_cast<float>(i % 1024) * 0.25f);
}

// A device buffer of n floats, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(float)),
              cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  float* get() { return ptr_; }

  void Upload(const std::vector<float>& host) {
    ASSERT_EQ(cudaMemcpy(ptr_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<float> Download() {
    std::vector<float> host(n_);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, n_ * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

 private:
  const int64_t n_;
  float* ptr_ = nullptr;
};

TEST(NcclProcessGroupTest, WithoutGpuIsUnavailable) {
  const DeviceInfo devices = DetectDevices();
  if (devices.gpu_count > 0) GTEST_SKIP() << "this machine has a GPU";
  std::unique_ptr<Store> store = NewInMemoryStore();
  absl::StatusOr<std::unique_ptr<ProcessGroup>> pg =
      NewNcclProcessGroup(store.get(), Options(0, 1));
  EXPECT_EQ(pg.status().code(), absl::StatusCode::kUnavailable) << pg.status();
  EXPECT_NE(pg.status().message().find("no GPU"), std::string::npos) << pg.status();
}

TEST(NcclProcessGroupTest, InvalidOptionsAreRefused) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  EXPECT_EQ(NewNcclProcessGroup(store.get(), Options(1, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewNcclProcessGroup(nullptr, Options(0, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NcclProcessGroupTest, WorldOfOneOnDeviceMemory) {
  if (DetectDevices().gpu_count == 0) GTEST_SKIP() << "no GPU";
  std::unique_ptr<Store> store = NewInMemoryStore();
  absl::StatusOr<std::unique_ptr<ProcessGroup>> pg =
      NewNcclProcessGroup(store.get(), Options(0, 1));
  ASSERT_TRUE(pg.ok()) << pg.status();
  EXPECT_EQ((*pg)->backend(), "nccl");
  const int64_t n = 1000003;
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) host[i] = Value(0, i);

  DeviceBuffer data(n);
  data.Upload(host);
  ASSERT_TRUE((*pg)->AllReduce(data.get(), n, ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ(data.Download(), host);  // Sum over one rank.
  ASSERT_TRUE((*pg)->AllReduce(data.get(), n, ReduceOp::kAverage)->Wait().ok());
  EXPECT_EQ(data.Download(), host);
  ASSERT_TRUE((*pg)->Broadcast(data.get(), n, 0)->Wait().ok());
  EXPECT_EQ(data.Download(), host);

  DeviceBuffer out(n);
  ASSERT_TRUE((*pg)->AllGather(data.get(), n, out.get())->Wait().ok());
  EXPECT_EQ(out.Download(), host);
  out.Upload(std::vector<float>(n, 0.0f));
  ASSERT_TRUE(
      (*pg)->ReduceScatter(data.get(), out.get(), n, ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ(out.Download(), host);
  ASSERT_TRUE((*pg)->Barrier()->Wait().ok());
  EXPECT_TRUE((*pg)->AllReduce(nullptr, 0, ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ((*pg)->Broadcast(data.get(), n, 1)->Wait().code(),
            absl::StatusCode::kInvalidArgument);

  // The newer collectives over one rank: copies (scatter, gather and all-to-all are
  // grouped sends and receives to itself), no bytes counted.
  std::shared_ptr<Work> work = (*pg)->Reduce(data.get(), n, ReduceOp::kSum, 0);
  ASSERT_TRUE(work->Wait().ok()) << work->Wait();
  EXPECT_EQ(data.Download(), host);
  EXPECT_EQ(work->bytes(), CollectiveBytes{});
  for (auto issue : {+[](ProcessGroup& g, float* in, float* out, int64_t n) {
                       return g.Scatter(in, out, n, 0);
                     },
                     +[](ProcessGroup& g, float* in, float* out, int64_t n) {
                       return g.Gather(in, n, out, 0);
                     },
                     +[](ProcessGroup& g, float* in, float* out, int64_t n) {
                       return g.AllToAll(in, out, n);
                     }}) {
    out.Upload(std::vector<float>(n, 0.0f));
    work = issue(**pg, data.get(), out.get(), n);
    ASSERT_TRUE(work->Wait().ok()) << work->Wait();
    EXPECT_EQ(out.Download(), host);
    EXPECT_EQ(work->bytes(), CollectiveBytes{});
  }
  EXPECT_EQ((*pg)->Reduce(data.get(), n, ReduceOp::kSum, 1)->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*pg)->Scatter(nullptr, out.get(), n, 0)->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*pg)->Gather(data.get(), n, nullptr, 0)->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*pg)->AllToAll(data.get(), nullptr, n)->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*pg)->AllToAll(nullptr, nullptr, 0)->Wait().ok());
}

// The stream contract (process_group.h) with real CUDA ops: the collective runs on the
// group's stream, after the ops enqueued before it and before those enqueued after
// Work::OrderBefore, with no host wait in between. The ops stream is kept busy with
// GEMMs before the input is written, so a collective that did not wait for it would
// read the old input (1 -> 2 after the scale), and a consumer that did not wait for
// the collective would scale the old output (0, then overwritten with 3).
TEST(NcclProcessGroupTest, CollectivesRunBetweenTheOpsTheyAreOrderedWith) {
  if (DetectDevices().gpu_count == 0) GTEST_SKIP() << "no GPU: the stream contract needs one";
  absl::StatusOr<std::unique_ptr<Ops>> ops = NewCudaOps(0, GemmPrecision::kFp32);
  ASSERT_TRUE(ops.ok()) << ops.status();
  std::unique_ptr<Store> store = NewInMemoryStore();
  absl::StatusOr<std::unique_ptr<ProcessGroup>> pg =
      NewNcclProcessGroup(store.get(), Options(0, 1));
  ASSERT_TRUE(pg.ok()) << pg.status();
  std::unique_ptr<Ops> cpu = NewCpuOps(1);
  EXPECT_EQ((*pg)->OrderAfter(cpu.get()).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*pg)->OrderAfter(ops->get()).ok());

  const int64_t n = int64_t{1} << 24;  // 64 MiB.
  const int dim = 2048;
  absl::StatusOr<DeviceArray<float>> data = DeviceArray<float>::Create(ops->get(), n);
  absl::StatusOr<DeviceArray<float>> out = DeviceArray<float>::Create(ops->get(), n);
  absl::StatusOr<DeviceArray<float>> a = DeviceArray<float>::Create(ops->get(), dim * dim);
  absl::StatusOr<DeviceArray<float>> c = DeviceArray<float>::Create(ops->get(), dim * dim);
  ASSERT_TRUE(data.ok() && out.ok() && a.ok() && c.ok());
  Ops& o = **ops;
  o.Fill(data->data(), n, 1.0f);
  o.Fill(out->data(), n, 0.0f);
  o.Fill(a->data(), dim * dim, 1e-3f);
  ASSERT_TRUE(o.Synchronize().ok());
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20; ++i) {
      o.Gemm(false, false, dim, dim, dim, 1.0f, a->data(), a->data(), 0.0f, c->data());
    }
    o.Fill(data->data(), n, 3.0f + round);
    std::shared_ptr<Work> work = (*pg)->AllGather(data->data(), n, out->data());
    ASSERT_TRUE(work->OrderBefore(ops->get()).ok());
    o.Scale(out->data(), n, 2.0f);
    ASSERT_TRUE(work->Wait().ok());
    std::vector<float> host(n);
    ASSERT_TRUE(o.CopyToHost(host.data(), out->data(), n * sizeof(float)).ok());
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += host[i] != 2.0f * (3.0f + round);
    EXPECT_EQ(bad, 0) << "round " << round << ": first element " << host[0];
  }
  EXPECT_EQ((*pg)->AllReduce(data->data(), n, ReduceOp::kSum)->OrderBefore(cpu.get()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*pg)->emulated());
}

TEST(NcclProcessGroupTest, TwoRanksAsThreadsOnTwoGpus) {
  if (DetectDevices().gpu_count < 2) GTEST_SKIP() << "needs two GPUs";
  std::unique_ptr<Store> store = NewInMemoryStore();
  const int world = 2;
  const int64_t n = 1000003;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      ASSERT_EQ(cudaSetDevice(rank), cudaSuccess);
      absl::StatusOr<std::unique_ptr<ProcessGroup>> pg =
          NewNcclProcessGroup(store.get(), Options(rank, world));
      ASSERT_TRUE(pg.ok()) << pg.status();
      std::vector<float> host(n);
      for (int64_t i = 0; i < n; ++i) host[i] = Value(rank, i);
      DeviceBuffer data(n);
      data.Upload(host);
      ASSERT_TRUE((*pg)->AllReduce(data.get(), n, ReduceOp::kSum)->Wait().ok());
      std::vector<float> got = data.Download();
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += got[i] != SumOfValues(world, i);
      EXPECT_EQ(bad, 0) << "rank " << rank;

      if (rank == 1) data.Upload(host);
      ASSERT_TRUE((*pg)->Broadcast(data.get(), n, 1)->Wait().ok());
      got = data.Download();
      bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += got[i] != Value(1, i);
      EXPECT_EQ(bad, 0) << "rank " << rank;

      // The newer collectives against their closed forms (byte counts: the sends and
      // receives are exact; reduce is NCCL's chain 0 -> 1 estimate).
      const int64_t b = n * static_cast<int64_t>(sizeof(float));
      data.Upload(host);
      std::shared_ptr<Work> work = (*pg)->Reduce(data.get(), n, ReduceOp::kSum, 1);
      ASSERT_TRUE(work->Wait().ok()) << work->Wait();
      got = data.Download();
      bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += got[i] != (rank == 1 ? SumOfValues(world, i) : host[i]);
      EXPECT_EQ(bad, 0) << "reduce, rank " << rank;
      EXPECT_EQ(work->bytes(), (CollectiveBytes{rank == 1 ? 0 : b, rank == 1 ? b : 0}));

      // Scatter from rank 0 of Value(0, j), j < 2n.
      std::vector<float> whole(2 * n);
      for (int64_t j = 0; j < 2 * n; ++j) whole[j] = Value(0, j);
      DeviceBuffer two(2 * n);
      two.Upload(whole);
      work = (*pg)->Scatter(rank == 0 ? two.get() : nullptr, data.get(), n, 0);
      ASSERT_TRUE(work->Wait().ok()) << work->Wait();
      got = data.Download();
      bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += got[i] != Value(0, rank * n + i);
      EXPECT_EQ(bad, 0) << "scatter, rank " << rank;
      EXPECT_EQ(work->bytes(), (CollectiveBytes{rank == 0 ? b : 0, rank == 0 ? 0 : b}));

      // Gather at rank 1.
      data.Upload(host);
      work = (*pg)->Gather(data.get(), n, rank == 1 ? two.get() : nullptr, 1);
      ASSERT_TRUE(work->Wait().ok()) << work->Wait();
      if (rank == 1) {
        got = two.Download();
        bad = 0;
        for (int64_t j = 0; j < 2 * n; ++j) bad += got[j] != Value(static_cast<int>(j / n), j % n);
        EXPECT_EQ(bad, 0) << "gather";
      }
      EXPECT_EQ(work->bytes(), (CollectiveBytes{rank == 1 ? 0 : b, rank == 1 ? b : 0}));

      // All-to-all of Value(rank, j), j < 2n: out [s n + i] = Value(s, rank n + i).
      for (int64_t j = 0; j < 2 * n; ++j) whole[j] = Value(rank, j);
      two.Upload(whole);
      DeviceBuffer two_out(2 * n);
      work = (*pg)->AllToAll(two.get(), two_out.get(), n);
      ASSERT_TRUE(work->Wait().ok()) << work->Wait();
      got = two_out.Download();
      bad = 0;
      for (int64_t j = 0; j < 2 * n; ++j) {
        bad += got[j] != Value(static_cast<int>(j / n), rank * n + j % n);
      }
      EXPECT_EQ(bad, 0) << "all-to-all, rank " << rank;
      EXPECT_EQ(work->bytes(), (CollectiveBytes{b, b}));
      EXPECT_TRUE((*pg)->Barrier()->Wait().ok());
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace
}  // namespace ringside
