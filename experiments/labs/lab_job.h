// One training job a lab runs: this same `ringside` binary with the lab's flags, its
// output directory, and what the job printed and wrote (metrics, checkpoint).
#ifndef RINGSIDE_EXPERIMENTS_LABS_LAB_JOB_H_
#define RINGSIDE_EXPERIMENTS_LABS_LAB_JOB_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/output_files.h"
#include "common/ringside.pb.h"

namespace ringside {

// Where a lab check runs. Borrowed by the checks; not thread-safe.
struct LabContext {
  std::string ringside;   // The binary that runs the jobs (this one).
  std::string out_dir;    // One subdirectory per job, replaced on every check.
  FILE* out = stdout;     // Where the check narrates: commands, numbers, the verdict.
  // The CPU share of every emulated node of the check (`lab check --node_cpus`); 0:
  // each lab's own (LabNodeCpus).
  double node_cpus = 0;
};

// The model of LabCommonFlags.
inline constexpr char kLabCommonModel[] = "mlp:784-256-256-10";

// The cluster the labs' emulated nodes stand for (experiments/cluster/presets/): the
// links of labs 4 to 7 are its NIC dilated against this host's step on a node's share
// (docs/cluster.md), so their effects are the cluster's on a faster, slower or busier
// host alike, and at any node share.
inline constexpr char kLabCluster[] = "gige-cpu";

// Slow links: this fraction of LabClusterLinks's rate (a 500 Mbit/s NIC on gige-cpu).
// Labs 4, 5, 8 and 9, whose effects need the links to bound communication, run on them:
// at the NIC's own rate / d, a host that computes fast (a small d) gets links a node's
// share cannot drive, and the bytes' CPU, not the link, sets communication. Halving the
// rate doubles each byte's wire time while its CPU stays.
inline constexpr double kLabSlowLinkFactor = 0.5;

// `links` (a --network profile) with its rate times `factor`, whole bits per second.
absl::StatusOr<std::string> ScaleLinks(const std::string& links, double factor);

// The rate of `links` (a --network profile) as FormatBandwidth writes it ("243.7 Mbit/s").
absl::StatusOr<std::string> LinkRateText(const std::string& links);

// `cluster_links` (LabClusterLinks's) times `factor`, said on lab.out as "links at
// <factor>x the cluster's NIC / d: <rate>".
absl::StatusOr<std::string> LabScaledLinks(const LabContext& lab, const std::string& cluster_links, double factor);

// The share a lab's nodes run on: lab.node_cpus when set, else the lab's `own`.
double LabNodeCpus(const LabContext& lab, double own);

// The links every job of one check runs on: kLabCluster's NIC / d, with d measured
// once here for the jobs' `model` at `batch` (one BLAS thread) on a node of
// `node_cpus`, so that the jobs a check compares run on the same links (each job
// measuring its own would give each a slightly different link on a drifting host).
// Says the dilation on lab.out. FailedPrecondition without root; the dilation's errors
// (a host that cannot emulate the cluster at this share) otherwise.
absl::StatusOr<std::string> LabClusterLinks(const LabContext& lab, const std::string& model, int batch,
                                            double node_cpus);

// A finished job.
struct LabJob {
  std::string dir;          // Its --out.
  std::string stdout_text;
  std::string stderr_text;
  double seconds = 0;       // Wall time of the whole command.
};

// Runs `ringside ARGS... --out=OUT_DIR/NAME` (the directory emptied first), printing
// "  $ ringside ARGS...   (T s)" to lab.out. Blocks at most `timeout`. The job's last
// error line (Internal naming the job) when it exits non-zero; DeadlineExceeded when
// it runs past `timeout` (it is killed with everything it started).
absl::StatusOr<LabJob> RunLabJob(const LabContext& lab, const std::string& name,
                                 const std::vector<std::string>& args,
                                 absl::Duration timeout = absl::Seconds(110));

// The step records of one process of `job` (OutputOwner/index as output_files.h).
absl::StatusOr<std::vector<StepMetrics>> JobMetrics(const LabJob& job, OutputOwner owner,
                                                    int index = 0);

// The median over `records` after the first `skip` (warm-up) of field(record).
template <typename F>
double MedianAfter(const std::vector<StepMetrics>& records, int skip, F field);

// The flags every lab's jobs share: a small MLP on a synthetic task of `train_samples`
// (and 512 test samples), `epochs` epochs, one BLAS thread per process (the machine has 2
// cores and a job up to 5 processes), SGD with momentum, a seed.
std::vector<std::string> LabCommonFlags(int train_samples = 4096, int epochs = 1);

// `a` with `more` appended.
std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& more);

}  // namespace ringside

#include "experiments/sys/median.h"

namespace ringside {

template <typename F>
double MedianAfter(const std::vector<StepMetrics>& records, int skip, F field) {
  std::vector<double> values;
  for (size_t i = static_cast<size_t>(skip); i < records.size(); ++i) {
    values.push_back(static_cast<double>(field(records[i])));
  }
  return Median(values);
}

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_LABS_LAB_JOB_H_
