#include "experiments/bench/allreduce_bench.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/common.h"
#include "ddp_ring/ddp_worker.h"
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/job_store.h"
#include "ddp_ring/store.h"

namespace ringside {

absl::Status RunAllReduceBench(const AllReduceBenchOptions& o) {
  RINGSIDE_ASSIGN_OR_RETURN(JobEnv env, ReadJobEnv());
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, JoinJobStore(env, o.timeout));
  std::unique_ptr<Store> job = NewPrefixStore(absl::StrCat("bench/", env.run_id), store.get());
  ProcessGroupOptions po;
  po.rank = env.rank;
  po.world_size = env.world_size;
  po.timeout = o.timeout;
  po.algorithm = o.algorithm;
  po.hostname = ReachableAddress(env);
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> group,
                            NewGlooProcessGroup(job.get(), po));
  const int n = env.world_size;
  if (env.rank == 0) {
    // kAuto picks by size (allreduce_algorithm.h); name what it runs at both ends.
    const char* small = AllReduceAlgorithmName(ResolveAllReduceAlgorithm(o.algorithm, n, 0));
    const char* large =
        AllReduceAlgorithmName(ResolveAllReduceAlgorithm(o.algorithm, n, int64_t{1} << 40));
    const std::string name = std::string(small) == large
                                 ? std::string(small)
                                 : absl::StrCat("auto: ", small, " below ",
                                                kAutoRecursiveDoublingBelowBytes >> 20, " MiB, ",
                                                large, " from there");
    absl::PrintF("# all-reduce (sum, float32), %s, %s, %d ranks, %d us idle before each\n",
                 group->backend(), name, n, absl::ToInt64Microseconds(o.gap));
    absl::PrintF("# %12s %12s %10s %10s %10s %8s\n", "bytes", "floats", "time(us)",
                 "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  std::vector<float> data(o.max_bytes / sizeof(float));
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    const int64_t count = bytes / static_cast<int64_t>(sizeof(float));
    const int iters = bytes >= (16 << 20) ? std::max(5, o.iters / 4) : o.iters;
    std::vector<double> times;
    int64_t wrong = 0;
    for (int it = 0; it < o.warmup + iters; ++it) {
      // data[i] = rank + 1 + (i % 7): the sum over ranks is n (n + 1) / 2 + n (i % 7),
      // exact in float for these small integers.
      for (int64_t i = 0; i < count; ++i) data[i] = static_cast<float>(env.rank + 1 + i % 7);
      // Start together, so that the time is the collective's, not the stragglers'.
      RINGSIDE_RETURN_IF_ERROR(group->Barrier()->Wait());
      if (o.gap > absl::ZeroDuration()) absl::SleepFor(o.gap);
      const int64_t t0 = NowMicros();
      RINGSIDE_RETURN_IF_ERROR(group->AllReduce(data.data(), count, ReduceOp::kSum)->Wait());
      const int64_t t1 = NowMicros();
      if (it < o.warmup) continue;
      times.push_back(static_cast<double>(t1 - t0));
      for (int64_t i = 0; i < count; ++i) {
        const float want = static_cast<float>(n * (n + 1) / 2 + n * (i % 7));
        wrong += data[i] != want;
      }
    }
    // The slowest rank's median defines the collective's time.
    std::sort(times.begin(), times.end());
    float median = static_cast<float>(times[times.size() / 2]);
    float wrong_total = static_cast<float>(wrong);
    RINGSIDE_RETURN_IF_ERROR(group->AllReduce(&wrong_total, 1, ReduceOp::kSum)->Wait());
    std::vector<float> medians(n);
    RINGSIDE_RETURN_IF_ERROR(group->AllGather(&median, 1, medians.data())->Wait());
    const double us = *std::max_element(medians.begin(), medians.end());
    const double algbw = bytes / (us * 1e3);  // GB/s
    const double busbw = algbw * 2.0 * (n - 1) / n;
    if (env.rank == 0) {
      absl::PrintF("  %12d %12d %10.1f %10.3f %10.3f %8d\n", bytes, count, us, algbw, busbw,
                   static_cast<int64_t>(wrong_total));
    }
  }
  return group->Barrier()->Wait();
}

}  // namespace ringside
