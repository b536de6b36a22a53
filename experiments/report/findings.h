// The report's findings, computed from its numbers: who is fastest and by how much,
// whether anything scales, and why (compute against communication per step, next to the
// textbook traffic of a master and of a ring on the links the runs had).
#ifndef RINGSIDE_EXPERIMENTS_REPORT_FINDINGS_H_
#define RINGSIDE_EXPERIMENTS_REPORT_FINDINGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "experiments/report/points.h"

namespace ringside {

// What the findings need besides the points.
struct FindingsContext {
  int64_t num_params = 0;        // M = 4 x num_params bytes.
  // The workers' emulated link in bytes/s, and the master's where it differs; 0: no
  // emulated links (loopback: no link speed to set the formulas against).
  double link_bytes_per_s = 0;
  double master_link_bytes_per_s = 0;
  int cores = 0;                 // This machine's cores (0: unknown).
  bool strong_scaling = false;   // The spec fixed the global batch (else weak scaling).
  // A cluster emulated by time dilation (matrix/cluster_emulation.h): its name and d;
  // the link above is the dilated one (the cluster's NIC / d). "" / 0: none.
  std::string cluster;
  double dilation = 0;
};

// A prediction off by more than this fraction of the measured step is marked in the
// table and listed in the findings with its likely cause (issue #32).
inline constexpr double kPredictionMissFraction = 0.15;
// Compute this much slower than the single process's is reported as communication's
// CPU cost (the transfers share the node's CPU share).
inline constexpr double kComputeSlowdownFraction = 0.10;
// A shard carrying more than this many times an even share of the servers' bytes is
// named (HotShardParagraph), whatever the placement.
inline constexpr double kHotShardFactor = 1.5;

// Markdown paragraphs separated by blank lines. The first is the verdict, whole: the fastest
// strategy at the largest worker count several strategies reached and its factor over
// each other one (by throughput, as the summary table's samples/s), whether any
// configuration beats the single process, and why not or why: the winner's compute
// against communication and waiting per step, with N x M / B (a single master's link)
// and 2(N-1)/N x M / B (a ring rank's) on the emulated link. Then one paragraph per
// strategy: its speedup, peak and what dominates its step at its largest N. Last, where
// some point names late ranks (ReportPoint.late_ranks), a list with one line per such
// point: "- **ddp** x4: rank 3 was last in 96% of steps; the others waited a median
// 41.0 ms per step for it (28% of the step)." (PS: "**ps** x4 (SSP:2): worker 2 ...").
// Then, where they apply: "Compute beside communication" (points computing at least
// kComputeSlowdownFraction slower than the single process: the transfers take the
// node's CPU) and "Predictions that miss" (points whose prediction is off by more than
// kPredictionMissFraction, each with its likely cause where one can be named: the node
// share could not drive its link (communication far above the wire time), compute
// slowed by the transfers, a shard's work beside its worker on one node).
// Emulated points (ranks sharing a GPU) are labelled where named ("**ddp-nccl**
// (emulated: 2 ranks share one GPU, NCCL over sockets)"), listed again at the end of the
// verdict, and a strategy on a GPU names its device ("**ddp-nccl** on cuda:0").
std::string Findings(const std::vector<ReportPoint>& points, const FindingsContext& context);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_FINDINGS_H_
