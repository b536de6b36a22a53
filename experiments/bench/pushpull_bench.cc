#include "experiments/bench/pushpull_bench.h"

#include <signal.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/common.h"
#include "common/status_macros.h"
#include "experiments/bench/cpu_pinning.h"
#include "experiments/sys/sys.h"
#include "ps_server/ps_server.h"
#include "ps_worker/shard_client.h"

namespace ringside {
namespace {

// Both halves derive the same configuration, so registration's hash check passes.
RunConfig BenchConfig(const PushPullBenchOptions& o) {
  RunConfig c;
  c.set_strategy("ps");
  c.set_model(absl::StrCat("flat:", o.bytes / 4));
  c.set_lr(0.01f);
  c.set_momentum(0.9f);
  c.set_world_size(1);
  c.set_ps_shards(1);
  c.set_ps_sync("bsp");
  c.set_ps_chunk_bytes(o.chunk_bytes);
  return c;
}

constexpr absl::Duration kTimeout = absl::Seconds(120);

}  // namespace

absl::Status RunPushPullBenchServer(const PushPullBenchOptions& o, const std::string& listen) {
  // Before HostShard: gRPC's threads inherit the pinning.
  if (o.server_cpu >= 0) RINGSIDE_RETURN_IF_ERROR(PinCallingThread(o.server_cpu));
  RINGSIDE_ASSIGN_OR_RETURN(HostedShard hosted, HostShard(BenchConfig(o), 0, listen, kTimeout, ""));
  absl::Status s = hosted.server->Wait();
  hosted.server->Shutdown(absl::Seconds(1));
  return s;
}

absl::Status RunPushPullBenchWorker(const PushPullBenchOptions& o) {
  const RunConfig config = BenchConfig(o);
  const int64_t n = o.bytes / 4;
  ShardClient client(NewPsChannel(o.server), absl::StrCat("shard 0 at ", o.server), 0, kTimeout);
  ps::RegisterRequest request;
  request.set_worker_id(0);
  request.set_num_workers(1);
  *request.mutable_config() = config;
  request.set_model(config.model());
  request.set_num_params(n);
  RINGSIDE_RETURN_IF_ERROR(client.Register(request).status());
  std::vector<float> params(n, 0.5f);
  std::vector<float> grads(n, 1e-3f);
  RINGSIDE_RETURN_IF_ERROR(client.Push(0, ps::PARAMS, params.data()));
  RINGSIDE_RETURN_IF_ERROR(client.Pull(0, ps::PARAMS, params.data()));
  // The baseline: the same bytes one way on a plain gRPC client stream in chunks of
  // the same size (ps.proto's Push of ps::Chunk, protobuf's copies included, the
  // call's end awaited), re-sending the initial parameters, which the shard accepts
  // until the first gradient.
  std::vector<double> plain_ms;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    const absl::Time t0 = absl::Now();
    RINGSIDE_RETURN_IF_ERROR(client.Push(0, ps::PARAMS, params.data()));
    if (i >= o.warmup) plain_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
  }
  std::vector<double> ms;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    PushPullTiming timing;
    const absl::Time t0 = absl::Now();
    RINGSIDE_RETURN_IF_ERROR(client.PushPull(
        i, grads.data(), params.data(), [](int64_t) { return true; }, [](int64_t) { return true; },
        nullptr, &timing));
    if (i >= o.warmup) ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
  }
  // The reference: the shard's SGD (the same kernel, from the same configuration)
  // stepped here as many times with the same constant gradient. Every parameter the
  // shard returned must equal it.
  RINGSIDE_ASSIGN_OR_RETURN(PsShardOptions shard_options, ShardOptionsFor(config, 0, kTimeout));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 1));
  constexpr int64_t kReferenceSize = 1024;
  RINGSIDE_ASSIGN_OR_RETURN(Sgd sgd, Sgd::Create(shard_options.hyper, kReferenceSize, ops.get()));
  std::vector<float> reference(kReferenceSize, 0.5f);
  for (int s = 0; s < o.warmup + o.iters; ++s) {
    std::vector<float> g(kReferenceSize, 1e-3f);
    sgd.Step(reference.data(), g.data());
  }
  const float want = reference[kReferenceSize / 2];
  for (int64_t i = 0; i < n; ++i) {
    if (params[i] != want) {
      return absl::InternalError(absl::StrFormat("push-pull returned %.9g at parameter %d, the reference SGD %.9g",
                                                 params[i], i, want));
    }
  }
  std::sort(ms.begin(), ms.end());
  std::sort(plain_ms.begin(), plain_ms.end());
  const double median = ms[ms.size() / 2];
  const double plain = plain_ms[plain_ms.size() / 2];
  if (o.print_header) {
    absl::PrintF("%12s %10s %12s %12s %10s %12s %10s\n", "model bytes", "chunks", "median ms", "min ms",
                 "GB/s", "plain ms", "plain GB/s");
  }
  const int64_t chunks = (o.bytes + o.chunk_bytes - 1) / o.chunk_bytes;
  absl::PrintF("%12d %10d %12.3f %12.3f %10.3f %12.3f %10.3f\n", o.bytes, chunks, median, ms.front(),
               2.0 * o.bytes / (median * 1e6), plain, o.bytes / (plain * 1e6));
  return client.Shutdown();
}

absl::Status RunPushPullSweep(PushPullBenchOptions o, const std::vector<int64_t>& sizes) {
  if (o.worker_cpu >= 0) RINGSIDE_RETURN_IF_ERROR(PinCallingThread(o.worker_cpu));
  o.print_header = true;
  for (int64_t bytes : sizes) {
    o.bytes = bytes;
    RINGSIDE_ASSIGN_OR_RETURN(int port, PickFreePort());
    o.server = absl::StrCat("127.0.0.1:", port);
    RINGSIDE_ASSIGN_OR_RETURN(std::string self, SelfExePath());
    std::vector<std::string> args = {self, "bench", "pushpull-server",
                                     absl::StrCat("--listen=", o.server),
                                     absl::StrCat("--size_bytes=", bytes),
                                     absl::StrCat("--ps_chunk_kb=", o.chunk_bytes / 1024)};
    if (o.server_cpu >= 0) args.push_back(absl::StrCat("--pin_cpu=", o.server_cpu));
    // The shard's process (a spawn, not a fork: this process may run gRPC threads).
    SpawnOptions so;
    so.argv = std::move(args);
    RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> server, Subprocess::Spawn(so));
    absl::Status s = RunPushPullBenchWorker(o);
    if (!s.ok()) server->Signal(SIGKILL);
    server->Wait();
    RINGSIDE_RETURN_IF_ERROR(s);
    if (!server->succeeded()) {
      return absl::InternalError(absl::StrCat("bench server for ", bytes, " bytes ",
                                              server->ExitDescription()));
    }
    o.print_header = false;
  }
  return absl::OkStatus();
}

}  // namespace ringside
