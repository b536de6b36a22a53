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
  double backward_ms = 0;  // Backward itself (bounds any head start).
  double step_ms = 0;
};

// The bucket labs' verdicts are ratios of times measured in one check, so they hold on
// a faster, slower or busier host alike (every time dilates with the node): an earlier
// first all-reduce shows when its head start is at least kMinLeadOfBackward of backward
// (which bounds any head start: the first bucket is ready only once backward has begun),
// and pays when at least kMinLeadReturned of that head start comes back as a shorter
// step.
inline constexpr double kMinLeadOfBackward = 0.5;
inline constexpr double kMinLeadReturned = 0.25;

// The links of the bucket labs' jobs: kLabSlowLinkFactor of LabClusterLinks's for their
// model, batch and share. At the NIC's own rate / d, a host whose kernels compute fast
// (OpenBLAS's own for this CPU: d about 2) gets links a 0.3-CPU node cannot drive, and
// the transfers' CPU, taken from backward, eats the head start.
absl::StatusOr<std::string> DdpLabLinks(const LabContext& lab);

// Runs `ringside train --strategy=ddp --workers=2` with `extra` flags as job `name`, on
// `links` (DdpLabLinks's), and reads its facts. The setting makes communication and
// computation comparable, so that overlapping them shows: two emulated nodes (0.3 CPU
// unless lab.node_cpus says otherwise) standing for kLabCluster's, an MLP of six layers
// (3.6 MB, so caps of 0.25 to 25 MB give 6 to 1 buckets), 256 samples per rank.
// FailedPrecondition without the privileges emulated nodes need.
absl::StatusOr<DdpFacts> RunDdpLabJob(const LabContext& lab, const std::string& name, const std::string& links,
                                      const std::vector<std::string>& extra);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LABS_LAB_DDP_JOB_H_
