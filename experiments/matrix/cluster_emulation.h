// A spec's cluster (ExperimentSpec.cluster) turned into emulated nodes and links by time
// dilation (experiments/cluster/dilation.h): every multi-process cell runs the
// profile's devices per node as ranks per node, this host's step of the spec's model is
// measured on one device's CPU share, d = host step / target step, and every node's
// link is shaped to the cluster NIC's rate / d (its loopback to the intra-node path's,
// where the share drives it). `ringside compare` resolves it once per directory and
// keeps it in DIR/dilation.textproto, so a resumed matrix runs on the links it started
// with; the report reads it back and states it on every page.
#ifndef RINGSIDE_EXPERIMENTS_MATRIX_CLUSTER_EMULATION_H_
#define RINGSIDE_EXPERIMENTS_MATRIX_CLUSTER_EMULATION_H_

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/matrix/experiment.pb.h"
#include "experiments/matrix/spec.h"

namespace ringside {

// The file compare keeps the dilation in, inside its output directory.
inline constexpr char kDilationFile[] = "dilation.textproto";

// What a cluster's emulation needs from a spec, checked before anything runs: a
// loadable profile (one line naming a missing or bad field, or the presets when the
// name is neither a preset nor a file), node_cpus resolved to `node_cpus` > 0, no
// `network` of its own. InvalidArgument / NotFound otherwise.
absl::Status CheckClusterSpec(const ExperimentSpec& spec, double node_cpus);

// ResolveCellEmulation (spec.h) for a spec with a cluster, in its place; the same
// without one. A device is a rank: every cell of more than one process (ps, ddp) gets
// the profile's devices_per_node as its ranks_per_node and its nodes counted with them,
// before "auto" divides the machine over the most nodes. The single baseline (one
// process; exempt from the rule) runs on one device's share of a node,
// DeviceCpus(node_cpus, devices_per_node) (cluster/node_layout.h), the share the
// dilation's host step is measured on; dp keeps no share. InvalidArgument, one line
// and before anything is made: the profile's errors, a strategy whose ranks_per_node
// differs from the devices per node, a cell whose processes do not fill whole nodes
// (naming both numbers), ResolveCellEmulation's.
absl::Status ResolveClusterCells(const ExperimentSpec& spec, int machine_cpus, std::vector<Cell>* cells);

// The dilation for `spec` (whose cluster is set) on nodes of `node_cpus`: the one kept
// in `out_dir` if it was measured for the same cluster, devices per node, model, batch
// and share, else a fresh one: the host step measured on one device's share of a node (this process joins a
// cgroup for a few seconds; root), then ComputeDilation. OutOfRange (one line) when the
// host cannot emulate the cluster. Progress lines go to `progress` (may be null).
// Does not write the record (WriteDilation does, once the output directory exists).
// `*fresh` (may be null) says whether it was measured now rather than kept.
absl::StatusOr<DilationRecord> ResolveDilation(const ExperimentSpec& spec, double node_cpus,
                                               const std::string& out_dir, FILE* progress,
                                               bool* fresh = nullptr);

// A fresh dilation for `spec` on nodes of `node_cpus`, never the kept one: compare
// measures one before every cell it runs (but the first, when the plan's was measured
// just then), so that each cell's links follow the host's pace of that moment (a shared
// VM's step drifts by 10-60% over the minutes a matrix takes, even within a round of
// repeats, and a link-bound cell's speedup moves with it) and each cell's time can be
// read in the cluster's time (host time / d; report/points.cc, HostPaceDilations).
absl::StatusOr<DilationRecord> MeasureDilationRecord(const ExperimentSpec& spec, double node_cpus, FILE* progress);

// How far a cell's host pace strayed from the pace its links were shaped for: past this
// fraction compare runs a DDP cell again (CellPaceOff), and the report disowns a run in
// which more than a quarter of its DDP cells strayed (report.h) or whose single process
// computed this far from the probe (HostHeldCluster).
inline constexpr double kPaceDriftFraction = 0.15;
// Compare runs a DDP cell whose pace strayed again, at most this many runs in all: each
// run costs a probe and the cell; two retries bring most strayed cells back (a shared
// VM's pace moves for seconds to minutes, not for good).
inline constexpr int kMaxPaceAttempts = 3;

// A DDP cell's forward pass over the forward of the probe that shaped its links, less 1
// (`r`.forward_ms / `probe`.host_forward_ms - 1): how far the host's pace during the cell
// strayed from the one its links were shaped for. DDP's all-reduce runs during backward,
// so its forward shares the node with nothing, as the probe's single process did. None
// where either forward is unknown or `r` is not a DDP cell (a PS worker's next
// parameters arrive during its forward; the single process is the probe's twin).
std::optional<double> CellPaceOff(const CellResult& r, const DilationRecord& probe);

// DIR/dilation.textproto: written atomically / read back (NotFound when absent).
absl::Status WriteDilation(const DilationRecord& record, const std::string& out_dir);
absl::StatusOr<DilationRecord> ReadDilation(const std::string& out_dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_MATRIX_CLUSTER_EMULATION_H_
