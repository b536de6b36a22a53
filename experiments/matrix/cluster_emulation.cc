#include "experiments/matrix/cluster_emulation.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/run_config.h"
#include "common/status_macros.h"
#include "experiments/cluster/cluster.h"
#include "experiments/netem/netem.h"
#include "experiments/sys/files.h"
#include "google/protobuf/text_format.h"

namespace ringside {
namespace {

// The per-worker batch the cells compute (strong scaling: the 1-worker cell's, the
// global batch; the dilation is measured at it).
int SpecBatch(const ExperimentSpec& spec) {
  return spec.batch_per_worker() > 0 ? spec.batch_per_worker() : spec.global_batch();
}

int SpecThreads(const ExperimentSpec& spec) {
  return spec.has_threads() ? spec.threads() : DefaultRunConfig().threads();
}

// Whether a kept record was made for this spec on these nodes.
bool RecordFits(const DilationRecord& r, const ExperimentSpec& spec, const ClusterProfile& profile,
                double node_cpus) {
  return r.cluster() == profile.name && std::max(1, r.devices_per_node()) == profile.devices_per_node &&
         r.model() == spec.model() && r.batch() == SpecBatch(spec) &&
         std::fabs(r.node_cpus() - node_cpus) < 1e-9 && r.factor() > 0 && !r.network().empty();
}

}  // namespace

absl::Status CheckClusterSpec(const ExperimentSpec& spec, double node_cpus) {
  if (spec.cluster().empty()) return absl::OkStatus();
  if (!spec.network().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cluster \"", spec.cluster(), "\" and network \"", spec.network(),
                                                   "\" exclude each other: the cluster's NIC sets the links"));
  }
  if (!(node_cpus > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster \"", spec.cluster(),
        "\" needs node_cpus (the dilation is measured on a node's CPU share: \"auto\" or a number)"));
  }
  return LoadClusterProfile(spec.cluster()).status();
}

absl::Status ResolveClusterCells(const ExperimentSpec& spec, int machine_cpus, std::vector<Cell>* cells) {
  if (spec.cluster().empty()) return ResolveCellEmulation(spec, machine_cpus, cells);
  RINGSIDE_ASSIGN_OR_RETURN(ClusterProfile profile, LoadClusterProfile(spec.cluster()));
  const int devices = std::max(1, profile.devices_per_node);
  for (Cell& c : *cells) {
    const std::string& kind = c.strategy.kind();
    if (kind != "ps" && kind != "ddp") continue;  // One process: no nodes to fill.
    // One device per node: a PS's packing of a shard beside its worker (ranks_per_node 2)
    // is placement, not devices, and stays the strategy's.
    if (kind == "ps" && devices == 1) continue;
    const int processes = CellProcesses(c);
    const bool shard_processes = processes > c.workers;  // Shards of their own.
    const std::string what =
        shard_processes
            ? absl::StrFormat("the %d processes of %s at %d workers (%d shard%s + %d workers)", processes, c.label,
                              c.workers, c.shards, c.shards == 1 ? "" : "s", c.workers)
            : absl::StrFormat("the %d ranks of %s at %d workers", processes, c.label, c.workers);
    RINGSIDE_ASSIGN_OR_RETURN(
        c.ranks_per_node, ClusterRanksPerNode(profile, processes, what, c.strategy.ranks_per_node(),
                                              absl::StrCat("strategy ", c.label, "'s ranks_per_node")));
    c.nodes = CellNodes(c);
  }
  RINGSIDE_RETURN_IF_ERROR(ResolveCellEmulation(spec, machine_cpus, cells));
  for (Cell& c : *cells) {
    if (c.strategy.kind() == "single") c.node_cpus = DeviceCpus(c.node_cpus, devices);
  }
  return absl::OkStatus();
}

absl::StatusOr<DilationRecord> ResolveDilation(const ExperimentSpec& spec, double node_cpus,
                                               const std::string& out_dir, FILE* progress, bool* fresh) {
  if (fresh != nullptr) *fresh = false;
  RINGSIDE_RETURN_IF_ERROR(CheckClusterSpec(spec, node_cpus));
  RINGSIDE_ASSIGN_OR_RETURN(ClusterProfile profile, LoadClusterProfile(spec.cluster()));
  if (absl::StatusOr<DilationRecord> kept = ReadDilation(out_dir);
      kept.ok() && RecordFits(*kept, spec, profile, node_cpus)) {
    if (progress != nullptr) {
      absl::FPrintF(progress, "compare: %s (kept from %s, measured %s)\n", kept->description(), out_dir,
                    kept->measured_at());
    }
    return *kept;
  }
  absl::StatusOr<DilationRecord> measured = MeasureDilationRecord(spec, node_cpus, progress);
  if (measured.ok() && fresh != nullptr) *fresh = true;
  return measured;
}

absl::StatusOr<DilationRecord> MeasureDilationRecord(const ExperimentSpec& spec, double node_cpus, FILE* progress) {
  const int batch = SpecBatch(spec);
  RINGSIDE_ASSIGN_OR_RETURN(MeasuredDilation m, MeasureDilation(spec.cluster(), spec.model(), batch,
                                                                SpecThreads(spec), node_cpus, progress));
  const Dilation& d = m.dilation;
  DilationRecord r;
  r.set_cluster(m.profile.name);
  r.set_cluster_description(DescribeCluster(m.profile));
  r.set_source(m.profile.source);
  r.set_factor(d.factor);
  r.set_host_step_ms(d.host_step_s * 1e3);
  r.set_host_compute_ms(m.host_compute_s * 1e3);
  r.set_host_forward_ms(m.host_forward_s * 1e3);
  r.set_target_step_ms(d.target_step_s * 1e3);
  r.set_node_cpus(node_cpus);
  r.set_devices_per_node(d.devices_per_node);
  r.set_device_cpus(d.device_cpus);
  r.set_model(spec.model());
  r.set_batch(batch);
  r.set_network(DilatedNetworkProfile(d));
  r.set_description(DescribeDilation(m.profile, d));
  r.set_measured_at(absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()));
  if (progress != nullptr) absl::FPrintF(progress, "compare: %s\n", r.description());
  return r;
}

std::optional<double> CellPaceOff(const CellResult& r, const DilationRecord& probe) {
  if (r.kind() != "ddp" || !(r.forward_ms() > 0) || !(probe.host_forward_ms() > 0)) return std::nullopt;
  return r.forward_ms() / probe.host_forward_ms() - 1;
}

absl::Status WriteDilation(const DilationRecord& record, const std::string& out_dir) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(record, &text);
  return WriteFileAtomically(out_dir + "/" + kDilationFile, text);
}

absl::StatusOr<DilationRecord> ReadDilation(const std::string& out_dir) {
  const std::string path = out_dir + "/" + kDilationFile;
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat(path, " is absent"));
  DilationRecord record;
  if (!google::protobuf::TextFormat::ParseFromString(*text, &record)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " does not parse"));
  }
  return record;
}

}  // namespace ringside
