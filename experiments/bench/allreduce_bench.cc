#include "experiments/bench/allreduce_bench.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/common.h"
#include "ddp_ring/ddp_worker.h"
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/process_group_factory.h"
#include "ddp_ring/job_store.h"
#include "ddp_ring/store.h"
#include "experiments/sys/median.h"

namespace ringside {

absl::Status RunAllReduceBench(const AllReduceBenchOptions& o) {
  RINGSIDE_RETURN_IF_ERROR(CheckProcessGroupBackend(o.backend));
  RINGSIDE_ASSIGN_OR_RETURN(JobEnv env, ReadJobEnv());
  ProcessGroupOptions po;
  po.rank = env.rank;
  po.world_size = env.world_size;
  po.timeout = o.timeout;
  po.algorithm = o.algorithm;
  po.hostname = ReachableAddress(env);
  std::string placement;
  const bool nccl = o.backend == "nccl";
  if (nccl) {
    const int gpus = DetectDevices().gpu_count;
    if (gpus > 0) {
      po.cuda_device = CudaDeviceFor(/*requested_index=*/-1, env.local_rank, gpus);
      if (env.local_world_size > gpus) {
        po.nccl_host_id = absl::StrCat("ringside-", env.run_id, "-rank", env.rank);
        placement = absl::StrCat("emulated: ", env.local_world_size, " ranks on ", gpus,
                                 " GPU(s), NCCL over sockets (NCCL_HOSTID per rank)");
      }
    }
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops,
                            NewOps(nccl ? "cuda" : "cpu", nccl ? po.cuda_device : 0, 0));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, JoinJobStore(env, o.security, o.timeout));
  std::unique_ptr<Store> job = NewPrefixStore(absl::StrCat("bench/", env.run_id), store.get());
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> group,
                            NewProcessGroup(o.backend, job.get(), po));
  if (env.rank == 0) {
    AllReduceBenchResult header;
    header.backend = group->backend();
    header.algorithm = nccl ? "NCCL's choice" : AllReduceAlgorithmDescription(o.algorithm, env.world_size);
    header.ranks = env.world_size;
    header.placement = placement;
    header.gap = o.gap;
    PrintAllReduceHeader(header, stdout);
  }
  // Rank 0 prints each row as its size finishes.
  return MeasureAllReduce(group.get(), ops.get(), o,
                          [](const AllReduceRow& row) { PrintAllReduceRow(row, stdout); })
      .status();
}

std::string AllReduceAlgorithmDescription(AllReduceAlgorithm algorithm, int ranks) {
  // kAuto picks by size (allreduce_algorithm.h); name what it runs at both ends.
  const char* small = AllReduceAlgorithmName(ResolveAllReduceAlgorithm(algorithm, ranks, 0));
  const char* large =
      AllReduceAlgorithmName(ResolveAllReduceAlgorithm(algorithm, ranks, int64_t{1} << 40));
  if (std::string(small) == large) return small;
  return absl::StrCat("auto: ", small, " below ", kAutoRecursiveDoublingBelowBytes >> 20, " MiB, ",
                      large, " from there");
}

absl::StatusOr<AllReduceBenchResult> MeasureAllReduce(
    ProcessGroup* group, Ops* ops, const AllReduceBenchOptions& o,
    const std::function<void(const AllReduceRow&)>& on_row) {
  const int n = group->world_size();
  const int rank = group->rank();
  AllReduceBenchResult result;
  result.backend = group->backend();
  result.algorithm = AllReduceAlgorithmDescription(o.algorithm, n);
  result.ranks = n;
  result.gap = o.gap;
  const int64_t max_count = o.max_bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> host(max_count);
  RINGSIDE_ASSIGN_OR_RETURN(DeviceArray<float> data, DeviceArray<float>::Create(ops, max_count));
  // One float per rank: the reductions of the results (wrong counts, medians).
  RINGSIDE_ASSIGN_OR_RETURN(DeviceArray<float> one, DeviceArray<float>::Create(ops, 1));
  RINGSIDE_ASSIGN_OR_RETURN(DeviceArray<float> all, DeviceArray<float>::Create(ops, n));
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    const int64_t count = bytes / static_cast<int64_t>(sizeof(float));
    const int iters = bytes >= (16 << 20) ? std::max(5, o.iters / 4) : o.iters;
    std::vector<double> times, cpu_times;
    int64_t wrong = 0;
    for (int it = 0; it < o.warmup + iters; ++it) {
      // data[i] = rank + 1 + (i % 7): the sum over ranks is n (n + 1) / 2 + n (i % 7),
      // exact in float for these small integers.
      for (int64_t i = 0; i < count; ++i) host[i] = static_cast<float>(rank + 1 + i % 7);
      RINGSIDE_RETURN_IF_ERROR(ops->CopyToDevice(data.data(), host.data(), bytes));
      // Start together, so that the time is the collective's, not the stragglers'.
      RINGSIDE_RETURN_IF_ERROR(group->Barrier()->Wait());
      if (o.gap > absl::ZeroDuration()) absl::SleepFor(o.gap);
      // The CPU clock brackets the wall clock, so its reads stay out of the timed span.
      const int64_t cpu0 = ProcessCpuMicros();
      const int64_t t0 = NowMicros();
      RINGSIDE_RETURN_IF_ERROR(group->AllReduce(data.data(), count, ReduceOp::kSum)->Wait());
      const int64_t t1 = NowMicros();
      const int64_t cpu1 = ProcessCpuMicros();
      if (it < o.warmup) continue;
      times.push_back(static_cast<double>(t1 - t0));
      cpu_times.push_back(static_cast<double>(cpu1 - cpu0));
      RINGSIDE_RETURN_IF_ERROR(ops->CopyToHost(host.data(), data.data(), bytes));
      for (int64_t i = 0; i < count; ++i) {
        const float want = static_cast<float>(n * (n + 1) / 2 + n * (i % 7));
        wrong += host[i] != want;
      }
    }
    // The slowest rank's median defines the collective's time.
    std::sort(times.begin(), times.end());
    const float median = static_cast<float>(times[times.size() / 2]);
    float wrong_total = static_cast<float>(wrong);
    RINGSIDE_RETURN_IF_ERROR(ops->CopyToDevice(one.data(), &wrong_total, sizeof(float)));
    RINGSIDE_RETURN_IF_ERROR(group->AllReduce(one.data(), 1, ReduceOp::kSum)->Wait());
    RINGSIDE_RETURN_IF_ERROR(ops->CopyToHost(&wrong_total, one.data(), sizeof(float)));
    RINGSIDE_RETURN_IF_ERROR(ops->CopyToDevice(one.data(), &median, sizeof(float)));
    std::vector<float> medians(n);
    RINGSIDE_RETURN_IF_ERROR(group->AllGather(one.data(), 1, all.data())->Wait());
    RINGSIDE_RETURN_IF_ERROR(ops->CopyToHost(medians.data(), all.data(), n * sizeof(float)));
    AllReduceRow row;
    row.bytes = bytes;
    row.floats = count;
    row.us = *std::max_element(medians.begin(), medians.end());
    row.algbw_gbps = bytes / (row.us * 1e3);
    row.busbw_gbps = row.algbw_gbps * 2.0 * (n - 1) / n;
    row.wrong = static_cast<int64_t>(wrong_total);
    row.process_cpu_us = Median(std::move(cpu_times));
    result.rows.push_back(row);
    if (rank == 0 && on_row) on_row(row);
  }
  RINGSIDE_RETURN_IF_ERROR(group->Barrier()->Wait());
  return result;
}

absl::StatusOr<AllReduceBenchResult> MeasureAllReduceInProcess(int ranks,
                                                               const AllReduceBenchOptions& o) {
  if (ranks < 2) return absl::InvalidArgumentError("an all-reduce sweep needs at least 2 ranks");
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<absl::StatusOr<AllReduceBenchResult>> results(ranks, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      ProcessGroupOptions po;
      po.rank = rank;
      po.world_size = ranks;
      po.timeout = o.timeout;
      po.algorithm = o.algorithm;
      absl::StatusOr<std::unique_ptr<ProcessGroup>> group = NewGlooProcessGroup(store.get(), po);
      // Host memory; 0 threads: OpenBLAS's setting is left alone.
      std::unique_ptr<Ops> ops = NewCpuOps(/*blas_threads=*/0);
      // A rank that fails breaks the group, so the others fail within the timeout.
      results[rank] = group.ok() ? MeasureAllReduce(group->get(), ops.get(), o) : group.status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::StatusOr<AllReduceBenchResult>& r : results) {
    if (!r.ok()) return r.status();
  }
  return std::move(results[0]);
}

void PrintAllReduceHeader(const AllReduceBenchResult& r, FILE* out) {
  absl::FPrintF(out, "# all-reduce (sum, float32), %s, %s, %d ranks%s, %d us idle before each\n",
                r.backend, r.algorithm, r.ranks,
                r.placement.empty() ? "" : absl::StrCat(" (", r.placement, ")"),
                absl::ToInt64Microseconds(r.gap));
  absl::FPrintF(out, "# %12s %12s %10s %10s %10s %8s\n", "bytes", "floats", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}

void PrintAllReduceRow(const AllReduceRow& row, FILE* out) {
  absl::FPrintF(out, "  %12d %12d %10.1f %10.3f %10.3f %8d\n", row.bytes, row.floats, row.us,
                row.algbw_gbps, row.busbw_gbps, row.wrong);
  fflush(out);
}

}  // namespace ringside
