// A spec's cluster (ExperimentSpec.cluster) turned into emulated links by time dilation
// (experiments/cluster/dilation.h): this host's step of the spec's model is measured on
// a node's CPU share, d = host step / target step, and every node's link is shaped to
// the cluster NIC's rate / d. `ringside compare` resolves it once per directory and
// keeps it in DIR/dilation.textproto, so a resumed matrix runs on the links it started
// with; the report reads it back and states it on every page.
#ifndef RINGSIDE_EXPERIMENTS_MATRIX_CLUSTER_EMULATION_H_
#define RINGSIDE_EXPERIMENTS_MATRIX_CLUSTER_EMULATION_H_

#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "experiments/matrix/experiment.pb.h"

namespace ringside {

// The file compare keeps the dilation in, inside its output directory.
inline constexpr char kDilationFile[] = "dilation.textproto";

// What a cluster's emulation needs from a spec, checked before anything runs: a
// loadable profile (one line naming a missing or bad field, or the presets when the
// name is neither a preset nor a file), node_cpus resolved to `node_cpus` > 0, no
// `network` of its own, every strategy one process per node unless the profile has
// several devices per node. InvalidArgument / NotFound otherwise.
absl::Status CheckClusterSpec(const ExperimentSpec& spec, double node_cpus);

// The dilation for `spec` (whose cluster is set) on nodes of `node_cpus`: the one kept
// in `out_dir` if it was measured for the same cluster, model, batch and share, else a
// fresh one: the host step measured on a node of that share (this process joins a
// cgroup for a few seconds; root), then ComputeDilation. OutOfRange (one line) when the
// host cannot emulate the cluster. Progress lines go to `progress` (may be null).
// Does not write the record (WriteDilation does, once the output directory exists).
absl::StatusOr<DilationRecord> ResolveDilation(const ExperimentSpec& spec, double node_cpus,
                                               const std::string& out_dir, FILE* progress);

// DIR/dilation.textproto: written atomically / read back (NotFound when absent).
absl::Status WriteDilation(const DilationRecord& record, const std::string& out_dir);
absl::StatusOr<DilationRecord> ReadDilation(const std::string& out_dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_MATRIX_CLUSTER_EMULATION_H_
