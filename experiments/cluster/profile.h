// A target cluster, parsed once (cluster.proto): the device's compute, devices per node,
// the NIC and the intra-node path. `--cluster=NAME|FILE` names a preset
// (presets/*.textproto, compiled in) or a text-format file.
#ifndef RINGSIDE_EXPERIMENTS_CLUSTER_PROFILE_H_
#define RINGSIDE_EXPERIMENTS_CLUSTER_PROFILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside {

// One path, resolved: bytes per second each way (> 0) and one-way latency (>= 0).
struct PathProfile {
  double bytes_per_s = 0;
  double latency_s = 0;
};

// A published or measured step of `model` at `batch` on one device.
struct DeviceStep {
  std::string model;
  int batch = 0;
  double step_s = 0;
  std::string source;
};

struct ClusterProfile {
  std::string name;
  std::string source;
  std::string device;
  double device_flops = 0;       // Sustained FLOP/s on GEMMs; 0: only `steps`.
  std::vector<DeviceStep> steps;
  int devices_per_node = 1;
  PathProfile nic;               // Each node's link to the switch.
  PathProfile intra_node;        // Between devices of one node (devices_per_node > 1).
};

// Parses and checks a profile's text; `origin` names it in messages ("presets/x",
// a path). InvalidArgument with one line naming the origin and the field: a parse
// error, a missing required field (name, nic.bandwidth, intra_node.bandwidth when
// devices_per_node > 1), a negative or zero one, a bandwidth that netem/bandwidth.h
// does not read. The device's speed (device_tflops, `step` entries) may be absent: a
// step time given elsewhere (`simulate --step_ms`) stands in; TargetStepSeconds says
// when none does.
absl::StatusOr<ClusterProfile> ParseClusterProfile(absl::string_view text, const std::string& origin);

// A preset's name, else a file's path. NotFound (one line listing the presets) for a
// name that is neither; ParseClusterProfile's errors for a bad file.
absl::StatusOr<ClusterProfile> LoadClusterProfile(const std::string& name_or_path);

// The compiled-in presets, sorted by name.
std::vector<std::string> ClusterPresetNames();
// A preset's text, or "" when there is none of that name.
absl::string_view ClusterPresetText(absl::string_view name);

// One device's step of `model` at `batch` on the target: the profile's `step` entry for
// that model and batch if it has one, else gemm_flops / device_flops (gemm_flops: one
// forward + backward at `batch`, Model::GemmFlops). FailedPrecondition naming the
// profile when it has neither (no entry and no FLOP rate, or gemm_flops <= 0).
absl::StatusOr<double> TargetStepSeconds(const ClusterProfile& profile, const std::string& model, int batch,
                                         double gemm_flops);

// One line for people: "aws-p3.16xlarge: 8 x NVIDIA V100 per node, NIC 25 Gbit/s
// (latency 10 us), intra-node 150 GB/s".
std::string DescribeCluster(const ClusterProfile& profile);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLUSTER_PROFILE_H_
