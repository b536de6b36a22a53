#include "experiments/bench/pushpull_bench.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/common.h"
#include "common/socket_io.h"
#include "common/status_macros.h"
#include "common/task_thread.h"
#include "experiments/bench/cpu_pinning.h"
#include "experiments/bench/raw_tcp_bench.h"
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
  SetPsTransport(o.transport, &c);
  return c;
}

constexpr absl::Duration kTimeout = absl::Seconds(120);

// Registers worker 0 of 1 with the shard at o.server through `client` (and connects
// the TCP data plane where the shard has one), then seeds the shard's parameters with
// `params`: o.bytes / 4 floats of 0.5.
absl::Status RegisterBenchWorker(const PushPullBenchOptions& o, ShardClient* client,
                                 std::vector<float>* params) {
  const RunConfig config = BenchConfig(o);
  const int64_t n = o.bytes / 4;
  ps::RegisterRequest request;
  request.set_worker_id(0);
  request.set_num_workers(1);
  *request.mutable_config() = config;
  request.set_model(config.model());
  request.set_num_params(n);
  RINGSIDE_RETURN_IF_ERROR(client->Register(request).status());
  if (client->layout().data_port() != 0) {
    RINGSIDE_RETURN_IF_ERROR(client->ConnectDataPlane(HostOf(o.server), o.security.token));
  }
  params->assign(n, 0.5f);
  RINGSIDE_RETURN_IF_ERROR(client->Push(0, ps::PARAMS, params->data()));
  return client->Pull(0, ps::PARAMS, params->data());
}

}  // namespace

absl::Status RunPushPullBenchServer(const PushPullBenchOptions& o, const std::string& listen) {
  // Before HostShard: gRPC's threads inherit the pinning.
  if (o.server_cpu >= 0) RINGSIDE_RETURN_IF_ERROR(PinCallingThread(o.server_cpu));
  RINGSIDE_ASSIGN_OR_RETURN(HostedShard hosted, HostShard(BenchConfig(o), 0, listen, kTimeout, "",
                                                          /*resuming=*/false, o.security));
  absl::Status s = hosted.server->Wait();
  hosted.server->Shutdown(absl::Seconds(1));
  return s;
}

absl::StatusOr<PushPullRow> MeasurePushPull(const PushPullBenchOptions& o) {
  const RunConfig config = BenchConfig(o);
  const int64_t n = o.bytes / 4;
  ShardClient client(NewPsChannel(o.server, o.security, kTimeout),
                     absl::StrCat("shard 0 at ", o.server), 0, kTimeout);
  std::vector<float> params;
  RINGSIDE_RETURN_IF_ERROR(RegisterBenchWorker(o, &client, &params));
  std::vector<float> grads(n, 1e-3f);
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
  PushPullRow row;
  row.bytes = o.bytes;
  row.chunks = (o.bytes + o.chunk_bytes - 1) / o.chunk_bytes;
  row.median_ms = ms[ms.size() / 2];
  row.min_ms = ms.front();
  row.gbps = 2.0 * o.bytes / (row.median_ms * 1e6);
  row.plain_ms = plain_ms[plain_ms.size() / 2];
  row.plain_gbps = o.bytes / (row.plain_ms * 1e6);
  RINGSIDE_RETURN_IF_ERROR(client.Shutdown());
  return row;
}

void PrintPushPullHeader(FILE* out) {
  absl::FPrintF(out, "%12s %10s %12s %12s %10s %12s %10s %12s %10s\n", "model bytes", "chunks", "median ms",
                "min ms", "GB/s", "plain ms", "plain GB/s", "raw TCP GB/s", "plain/raw");
}

void PrintPushPullRow(const PushPullRow& r, FILE* out) {
  absl::FPrintF(out, "%12d %10d %12.3f %12.3f %10.3f %12.3f %10.3f", r.bytes, r.chunks, r.median_ms, r.min_ms,
                r.gbps, r.plain_ms, r.plain_gbps);
  if (r.raw_gbps > 0) {
    absl::FPrintF(out, " %12.3f %9.0f%%\n", r.raw_gbps, 100 * r.plain_gbps / r.raw_gbps);
  } else {
    absl::FPrintF(out, " %12s %10s\n", "-", "-");
  }
  fflush(out);
}

namespace {

// One size against a shard in a child process (`ringside bench pushpull-server`).
absl::StatusOr<PushPullRow> MeasureWithShardChild(PushPullBenchOptions o) {
  RINGSIDE_ASSIGN_OR_RETURN(ReservedPort port, ReserveFreePort());  // Held until it listens.
  o.server = absl::StrCat("127.0.0.1:", port.port());
  RINGSIDE_ASSIGN_OR_RETURN(std::string self, SelfExePath());
  std::vector<std::string> args = {self, "bench", "pushpull-server",
                                   absl::StrCat("--listen=", o.server),
                                   absl::StrCat("--size_bytes=", o.bytes),
                                   absl::StrCat("--ps_chunk_kb=", o.chunk_bytes / 1024),
                                   absl::StrCat("--ps_transport=", o.transport)};
  if (o.server_cpu >= 0) args.push_back(absl::StrCat("--pin_cpu=", o.server_cpu));
  // The shard's process (a spawn, not a fork: this process may run gRPC threads).
  SpawnOptions so;
  so.argv = std::move(args);
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> server, Subprocess::Spawn(so));
  absl::StatusOr<PushPullRow> row = MeasurePushPull(o);
  if (!row.ok()) server->Signal(SIGKILL);
  server->Wait();
  if (!row.ok()) return row.status();
  if (!server->succeeded()) {
    return absl::InternalError(absl::StrCat("bench server for ", o.bytes, " bytes ",
                                            server->ExitDescription()));
  }
  return row;
}

// One size against a shard served by gRPC threads of this process.
absl::StatusOr<PushPullRow> MeasureWithShardHere(PushPullBenchOptions o) {
  RINGSIDE_ASSIGN_OR_RETURN(ReservedPort port, ReserveFreePort());  // Held until it listens.
  o.server = absl::StrCat("127.0.0.1:", port.port());
  RINGSIDE_ASSIGN_OR_RETURN(HostedShard hosted, HostShard(BenchConfig(o), 0, o.server, kTimeout, "",
                                                          /*resuming=*/false, o.security));
  absl::StatusOr<PushPullRow> row = MeasurePushPull(o);
  // The worker said goodbye when it succeeded; otherwise nothing more will come.
  absl::Status served = row.ok() ? hosted.server->Wait() : absl::OkStatus();
  hosted.server->Shutdown(absl::Seconds(1));
  if (!row.ok()) return row.status();
  if (!served.ok()) {
    return absl::InternalError(absl::StrCat("bench shard for ", o.bytes, " bytes: ", served.message()));
  }
  return row;
}

}  // namespace

absl::StatusOr<std::vector<PushPullRow>> RunPushPullSweep(
    PushPullBenchOptions o, const std::vector<int64_t>& sizes,
    const std::function<void(const PushPullRow&)>& on_row) {
  if (o.server_in_process && (o.worker_cpu >= 0 || o.server_cpu >= 0)) {
    return absl::InvalidArgumentError("a push-pull sweep with its shard in process cannot pin CPUs");
  }
  if (o.worker_cpu >= 0) RINGSIDE_RETURN_IF_ERROR(PinCallingThread(o.worker_cpu));
  std::vector<PushPullRow> rows;
  for (int64_t bytes : sizes) {
    o.bytes = bytes;
    RINGSIDE_ASSIGN_OR_RETURN(PushPullRow row, o.server_in_process ? MeasureWithShardHere(o)
                                                                   : MeasureWithShardChild(o));
    if (o.raw_tcp) {
      RawTcpBenchOptions ro;
      ro.bytes = bytes;
      ro.warmup = 1;
      ro.iters = o.iters;
      RINGSIDE_ASSIGN_OR_RETURN(const RawTcpResult raw, MeasureRawTcp(ro));
      row.raw_gbps = raw.bytes_per_s / 1e9;
    }
    if (on_row) on_row(row);
    rows.push_back(row);
  }
  return rows;
}

absl::StatusOr<PushPullLoad> PushPullsBeside(PushPullBenchOptions o,
                                             const std::function<absl::Status()>& beside) {
  // The shard: here on a free loopback port, or already listening at o.server.
  std::optional<HostedShard> hosted;
  if (o.server.empty()) {
    RINGSIDE_ASSIGN_OR_RETURN(ReservedPort port, ReserveFreePort());
    o.server = absl::StrCat("127.0.0.1:", port.port());
    RINGSIDE_ASSIGN_OR_RETURN(hosted, HostShard(BenchConfig(o), 0, o.server, kTimeout, "",
                                                /*resuming=*/false, o.security));
  }
  absl::Status status;
  PushPullLoad load;
  {
    ShardClient client(NewPsChannel(o.server, o.security, kTimeout),
                       absl::StrCat("shard 0 at ", o.server), 0, kTimeout);
    std::vector<float> params;
    status = RegisterBenchWorker(o, &client, &params);
    if (status.ok()) {
      std::vector<float> grads(o.bytes / 4, 1e-3f);
      std::atomic<bool> stop{false};
      std::atomic<int64_t> done{0};
      absl::Notification first;  // One push-pull done (or failed): the loop is warm.
      absl::Status loop_status;  // Written by the loop; read after loop.Wait().
      TaskThread loop;
      loop.Run([&]() {
        for (int64_t step = 0; !stop.load(); ++step) {
          PushPullTiming timing;
          absl::Status s = client.PushPull(
              step, grads.data(), params.data(), [](int64_t) { return true; },
              [](int64_t) { return true; }, nullptr, &timing);
          if (!s.ok()) loop_status = s;
          if (!s.ok() || done.fetch_add(1) == 0) {
            if (!first.HasBeenNotified()) first.Notify();
          }
          if (!s.ok()) return;
        }
      });
      first.WaitForNotification();
      const int64_t before = done.load();
      const absl::Time t0 = absl::Now();
      status = beside();
      load.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
      load.push_pulls = done.load() - before;
      stop.store(true);
      loop.Wait();
      if (status.ok()) status = loop_status;
      // The last call's end, then goodbye: the shard's Wait returns.
      if (status.ok()) status = client.Shutdown();
    }
  }
  if (!hosted.has_value()) return status.ok() ? absl::StatusOr<PushPullLoad>(load) : status;
  absl::Status served = status.ok() ? hosted->server->Wait() : absl::OkStatus();
  hosted->server->Shutdown(absl::Seconds(1));
  if (!status.ok()) return status;
  if (!served.ok()) return absl::InternalError(absl::StrCat("bench shard: ", served.message()));
  return load;
}

std::string FormatPushPullsBeside(const PushPullLoad& load, double mean_step_ms) {
  return absl::StrFormat("push_pulls=%d seconds=%.6f mean_step_ms=%.6f", load.push_pulls, load.seconds, mean_step_ms);
}

absl::Status ParsePushPullsBeside(absl::string_view line, PushPullLoad* load, double* mean_step_ms) {
  int found = 0;
  for (absl::string_view item : absl::StrSplit(absl::StripAsciiWhitespace(line), ' ', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    bool ok = false;
    if (kv.first == "push_pulls") ok = absl::SimpleAtoi(kv.second, &load->push_pulls);
    if (kv.first == "seconds") ok = absl::SimpleAtod(kv.second, &load->seconds);
    if (kv.first == "mean_step_ms") ok = absl::SimpleAtod(kv.second, mean_step_ms);
    found += ok ? 1 : 0;
  }
  if (found != 3) return absl::InvalidArgumentError(absl::StrCat("not a push-pulls-beside line: '", line, "'"));
  return absl::OkStatus();
}

}  // namespace ringside
