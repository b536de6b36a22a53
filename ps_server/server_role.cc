#include "ps_server/server_role.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/output_files.h"
#include "common/ps_layout.h"
#include "common/rpc_security.h"
#include "common/status_macros.h"

namespace ringside {

absl::StatusOr<SyncPolicy> SyncPolicyOf(const RunConfig& config) {
  // The configuration keeps the mode's name and SSP's K apart.
  if (config.ps_sync() != SyncModeName(SyncMode::kSsp)) return ParseSyncPolicy(config.ps_sync());
  if (config.ps_staleness() >= 0) return SyncPolicy{SyncMode::kSsp, config.ps_staleness()};
  // A K no flag could give: refused in --ps_sync's words.
  return ParseSyncPolicy(SyncPolicyText(SyncPolicy{SyncMode::kSsp, config.ps_staleness()}));
}

absl::StatusOr<PsShardOptions> ShardOptionsFor(const RunConfig& config, int shard,
                                             absl::Duration timeout) {
  PsShardOptions o;
  o.shard = shard;
  o.num_shards = PsLayout::Of(config).shards();
  o.num_workers = config.world_size();
  RINGSIDE_ASSIGN_OR_RETURN(o.sync, SyncPolicyOf(config));
  o.chunk_bytes = config.ps_chunk_bytes();
  o.hyper = SgdHyperFor(config);
  o.summation = config.ps_mode() == kPsModeSummation;
  o.config = config;
  o.model = config.model();
  o.timeout = timeout;
  if (o.num_shards < 1 || shard < 0 || shard >= o.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard=", shard, " is outside [0, ", o.num_shards, ") (--ps_shards=", config.ps_shards(),
                     config.ps_worker_summers() ? " and a summer in each worker" : "", ")"));
  }
  return o;
}

absl::StatusOr<HostedShard> HostShard(const RunConfig& config, int shard,
                                      const std::string& address, absl::Duration timeout,
                                      const std::string& out_dir, bool resuming,
                                      const RpcSecurity& security) {
  RINGSIDE_ASSIGN_OR_RETURN(PsShardOptions options, ShardOptionsFor(config, shard, timeout));
  HostedShard hosted;
  if (!out_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(out_dir, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create ", out_dir, ": ", error.message()));
    }
    RINGSIDE_ASSIGN_OR_RETURN(
        hosted.metrics,
        MetricsWriter::Open(
            absl::StrCat(out_dir, "/",
                         OutputFileName(OutputFile::kMetrics, OutputOwner::kShard, shard)),
            resuming));
    options.metrics = hosted.metrics.get();
    RINGSIDE_ASSIGN_OR_RETURN(
        hosted.trace,
        TraceWriter::Open(TraceFileForNewRun(out_dir, OutputOwner::kShard, shard, resuming),
                          kShardTracePidBase + shard, absl::StrCat("shard ", shard)));
    options.trace = hosted.trace.get();
  }
  RINGSIDE_ASSIGN_OR_RETURN(hosted.server, PsServer::Start(address, options, security));
  return hosted;
}

absl::Duration AbortGrace(absl::Duration timeout) {
  return std::min(absl::Seconds(2), timeout / 4);
}

absl::Status RunPsServer(const PsServerRoleOptions& o) {
  RINGSIDE_ASSIGN_OR_RETURN(HostedShard hosted,
                            HostShard(o.config, o.shard, o.address, o.timeout, o.out_dir,
                                      o.resume, o.security));
  absl::FPrintF(stderr, "ps: shard %d of %d listening on port %d (%s, %d workers)\n", o.shard,
                PsLayout::Of(o.config).shards(), hosted.server->port(),
                SyncPolicyText(hosted.server->shard()->options().sync), o.config.world_size());
  if (!o.security.authenticated()) {
    WarnUnauthenticated(absl::StrCat("shard ", o.shard), o.address);
  }
  absl::Status status = hosted.server->Wait();
  // After an abort, keep serving a moment so that every worker hears why: calls in
  // flight and new ones (a worker whose step this shard had already released starts
  // its next call) are answered with the abort's reason. Shutdown refuses new calls at
  // once, and such a worker would see only CANCELLED.
  if (!status.ok()) absl::SleepFor(AbortGrace(o.timeout));
  // A hung worker's open stream is cancelled after the same grace.
  hosted.server->Shutdown(status.ok() ? absl::Seconds(1) : AbortGrace(o.timeout));
  if (status.ok()) {
    const ps::ShardStats stats = hosted.server->shard()->Stats();
    absl::FPrintF(stderr, "ps: shard %d done: %d steps, %.1f MB in, %.1f MB out\n", o.shard,
                  stats.steps_completed(), stats.bytes_in() / 1e6, stats.bytes_out() / 1e6);
  }
  return status;
}

absl::StatusOr<std::vector<std::string>> ParseServerList(const std::string& list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    const size_t colon = part.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(part.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ps_servers: '", part, "' is not host:port"));
    }
    out.emplace_back(part);
  }
  if (out.empty()) return absl::InvalidArgumentError("--ps_servers is empty (host:port,...)");
  return out;
}

}  // namespace ringside
