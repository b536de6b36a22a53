// Measuring the dilation for a job on this host: one step of the job's model on a node's
// CPU share (this process joins a cgroup of that share for a few seconds; root), then
// dilation.h's arithmetic against the cluster's step. Used by `ringside compare` (once
// per matrix, matrix/cluster_emulation.h) and `ringside train --cluster` (once per
// local job).
#ifndef RINGSIDE_EXPERIMENTS_CLUSTER_HOST_DILATION_H_
#define RINGSIDE_EXPERIMENTS_CLUSTER_HOST_DILATION_H_

#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "experiments/cluster/dilation.h"
#include "experiments/cluster/profile.h"

namespace ringside {

struct MeasuredDilation {
  ClusterProfile profile;
  Dilation dilation;           // host_step_s: forward + backward + update, median.
  double host_compute_s = 0;   // Its forward + backward part.
  double host_forward_s = 0;   // Its forward part.
};

// Loads `cluster` (profile.h LoadClusterProfile), measures one step of `model` at
// `batch` with `threads` BLAS threads on one device's share of a node of `node_cpus`
// (> 0): DeviceCpus(node_cpus, the profile's devices_per_node), the whole node for one
// device per node. Then computes the dilation (no delay: this project's kernels lack
// netem). One line to `progress` (may
// be null) before the measurement. Errors: the profile's, CheckCpuSharePrivileges's,
// the bench's, TargetStepSeconds's and ComputeDilation's (OutOfRange when the host
// cannot emulate the cluster), each one line.
absl::StatusOr<MeasuredDilation> MeasureDilation(const std::string& cluster, const std::string& model, int batch,
                                                 int threads, double node_cpus, FILE* progress);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLUSTER_HOST_DILATION_H_
