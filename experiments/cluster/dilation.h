// Time-dilated emulation of a target cluster (Gupta et al., NSDI'06; COSTMODEL.md):
// this host cannot compute as fast (or as slow) as the target's device, so every link
// is slowed (or sped up) by the same factor instead. With d = T_host / T_target (one
// step on a node's CPU share here over one step on the target's device), a link shaped
// to B / d carries in one host step what B carries in one target step: communication
// over compute, what a speedup measures, is the target's whatever the host's speed.
// Pure arithmetic; nothing here measures or shapes anything.
#ifndef RINGSIDE_EXPERIMENTS_CLUSTER_DILATION_H_
#define RINGSIDE_EXPERIMENTS_CLUSTER_DILATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "experiments/cluster/node_layout.h"
#include "experiments/cluster/profile.h"

namespace ringside {

// The fastest link a node's CPU share may be shaped to, bytes per second per CPU of
// share. On these machines a 0.4-CPU node drove a ring at about 330 MB/s (about 0.8 GB/s
// per CPU; issue #32's 10 Gbit/s cell, whose link it could not fill); a link set near
// that is bounded by the share, not by tc. Half of it keeps the link the bound. Named
// once; docs/cluster.md.
inline constexpr double kMaxShapedBytesPerSecPerCpu = 400e6;  // 3.2 Gbit/s per CPU.
// tc's token bucket does not hold rates below this (netem/network_emulator.h).
inline constexpr double kMinShapedBytesPerSec = 125e3;  // 1 Mbit/s.

struct Dilation {
  double host_step_s = 0;    // One step on one device's share here (measured).
  std::string host_kernels;  // The host's GEMM kernels (CpuBlasKernels()); "" unknown.
  double target_step_s = 0;  // One step on the target's device (TargetStepSeconds).
  double factor = 0;         // d = host / target.
  double node_cpus = 0;      // A node's share (0: unthrottled).
  int devices_per_node = 1;  // The profile's: ranks per emulated node.
  double device_cpus = 0;    // The share the host step was measured on:
                             // DeviceCpus(node_cpus, devices_per_node) (node_layout.h).
  PathProfile nic;           // Shaped: bytes_per_s = B / d; latency_s = d x latency
                             // (what a delay would have to be; see latency_emulated).
  PathProfile intra_node;    // One device's intra-node path, dilated likewise (B_i / d).
  // Each node's loopback, which all its devices share (one queue for the node's
  // processes, both directions): devices_per_node x B_i / d, what the node's devices
  // send at once on the target. 0 when not shaped (see intra_node_emulated).
  double loopback_bytes_per_s = 0;
  // False with one device per node (no such path), or when the loopback rate is above
  // what the node's share can drive (drivable_bytes_per_s): the loopback is then left
  // unshaped, slower than the target's path, and DescribeDilation says so.
  bool intra_node_emulated = false;
  double drivable_bytes_per_s = 0;  // kMaxShapedBytesPerSecPerCpu x the node's share.
  // False when the profile has a latency and this kernel cannot add delay (no netem):
  // the emulated links then carry the target's bandwidth but only loopback latency.
  bool latency_emulated = false;
};

// d and the shaped paths. `node_cpus` is a node's share (0: none); `host_step_s` was
// measured on one device's share of it, DeviceCpus(node_cpus, devices_per_node).
// InvalidArgument for a non-positive or non-finite step; OutOfRange, one line naming
// the profile, d and the limit, when the host cannot emulate it: a shaped NIC rate
// above kMaxShapedBytesPerSecPerCpu x node_cpus (the node's share could not drive it;
// node_cpus 0 counts as one CPU), or a NIC or loopback rate below
// kMinShapedBytesPerSec. A loopback above what the share drives is not refused:
// intra_node_emulated is false. `can_delay`: the kernel has netem.
absl::StatusOr<Dilation> ComputeDilation(const ClusterProfile& profile, double host_step_s,
                                         double target_step_s, double node_cpus, bool can_delay);

// The `--network` text of the dilated paths (network_emulator.h's grammar), e.g.
// "bw=342mbit" (plus ",delay=..." when latency_emulated, and ",lo.bw=..." for a shaped
// loopback): rates rounded down to a whole kbit/s.
std::string DilatedNetworkProfile(const Dilation& dilation);

// One line for every report page and summary: "cluster aws-p3.16xlarge emulated with
// dilation d = 2.93 (host step 234.6 ms on 0.40 CPU / target 80.0 ms): NIC 25 Gbit/s
// -> 8.5 Gbit/s shaped; latency 10 us not emulated (no netem: +20 us per ring step)".
// With several devices per node it names the device's share, the NIC's sharing and
// the intra-node path: shaped on each node's loopback, or "intra-node path not
// emulated: loopback is slower than ...".
std::string DescribeDilation(const ClusterProfile& profile, const Dilation& dilation);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLUSTER_DILATION_H_
