// A DDP job of the bucket labs (4 and 5) and what its records say about the buckets.
#ifndef RINGSIDE_EXPERIMENTS_LABS_LAB_DDP_JOB_H_
#define RINGSIDE_EXPERIMENTS_LABS_LAB_DDP_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/labs/lab_job.h"

namespace ringside {

struct DdpFacts {
  int buckets = 0;       // From the job's "ddp: ... N buckets" line.
  // Medians over rank 0's steps after warm-up:
  double lead_ms = 0;    // How long before backward ended the first bucket's all-reduce
                         // was launched (negative: after it ended).
  double wait_ms = 0;    // Waiting for the all-reduces after backward.
  double step_ms = 0;
};

// The cluster the bucket labs' nodes stand for (experiments/cluster/presets/): its
// links are dilated against this host's step (docs/cluster.md), so the labs' effects
// are the cluster's on a faster, slower or busier host alike.
inline constexpr char kLabCluster[] = "gige-cpu";

// The links every job of one bucket-lab check runs on: kLabCluster's NIC / d, with d
// measured once here on a node of the jobs' share (cluster/host_dilation.h), so that
// the jobs a check compares run on the same links (each job measuring its own d would
// give each a slightly different link). Says the dilation on lab.out. Root.
absl::StatusOr<std::string> LabClusterLinks(const LabContext& lab);

// Runs `ringside train --strategy=ddp --workers=2` with `extra` flags as job `name`, on
// `links` (LabClusterLinks's), and reads its facts. The setting makes communication and computation comparable, so that
// overlapping them shows: two emulated nodes of 0.3 CPU standing for kLabCluster's
// nodes (links its 1 Gbit/s NIC / the dilation; root), an MLP of six layers (3.6 MB, so
// caps of 0.25 to 25 MB give 6 to 1 buckets), 256 samples per rank. FailedPrecondition
// without the privileges emulated nodes need.
absl::StatusOr<DdpFacts> RunDdpLabJob(const LabContext& lab, const std::string& name, const std::string& links,
                                      const std::vector<std::string>& extra);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LABS_LAB_DDP_JOB_H_
