#include "experiments/labs/lab_ddp_job.h"

#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "experiments/netem/cpu_share.h"
#include "experiments/netem/network_emulator.h"

namespace ringside {
namespace {

constexpr int kSteps = 20;
constexpr int kWarmup = 4;
// The jobs' model, batch and own node share (one place: the links are dilated for them).
constexpr char kModel[] = "mlp:784-384-384-384-384-384-10";
constexpr int kBatch = 256;
constexpr double kNodeCpus = 0.3;

}  // namespace

absl::StatusOr<std::string> DdpLabLinks(const LabContext& lab) {
  RINGSIDE_ASSIGN_OR_RETURN(std::string links, LabClusterLinks(lab, kModel, kBatch, LabNodeCpus(lab, kNodeCpus)));
  return LabScaledLinks(lab, links, kLabSlowLinkFactor);
}

absl::StatusOr<DdpFacts> RunDdpLabJob(const LabContext& lab, const std::string& name, const std::string& links,
                                      const std::vector<std::string>& extra) {
  if (absl::Status s = CheckCpuSharePrivileges(); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the bucket labs run on emulated nodes, which needs root: ", s.message()));
  }
  RINGSIDE_RETURN_IF_ERROR(CheckNetworkPrivileges());
  std::vector<std::string> args = {"train", "--strategy=ddp", "--workers=2",
                                   absl::StrFormat("--steps=%d", kSteps), absl::StrFormat("--batch=%d", kBatch),
                                   "--dataset=synthetic:train=8192,test=512,seed=5",
                                   absl::StrCat("--model=", kModel), "--lr=0.02",
                                   "--momentum=0.9", "--seed=3", "--threads=1", "--eval_batch=512",
                                   "--epochs=1", absl::StrCat("--node_cpus=", LabNodeCpus(lab, kNodeCpus)),
                                   absl::StrCat("--network=", links)};
  RINGSIDE_ASSIGN_OR_RETURN(LabJob job, RunLabJob(lab, name, With(args, extra)));
  const std::string said = job.stdout_text + job.stderr_text;
  DdpFacts f;
  std::smatch match;
  static const std::regex kBuckets(", (\\d+) buckets, ");
  if (!std::regex_search(said, match, kBuckets) ||
      !absl::SimpleAtoi(match[1].str(), &f.buckets)) {
    return absl::InternalError(absl::StrCat("job ", name, " did not say how many buckets it used"));
  }
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> r0, JobMetrics(job, OutputOwner::kRank, 0));
  f.lead_ms = MedianAfter(r0, kWarmup, [](const StepMetrics& m) {
    return (m.backward_end_us() - m.first_bucket_us()) / 1e3;
  });
  f.wait_ms = MedianAfter(r0, kWarmup, [](const StepMetrics& m) { return m.allreduce_wait_ms(); });
  f.backward_ms = MedianAfter(r0, kWarmup, [](const StepMetrics& m) { return m.backward_ms(); });
  f.step_ms = MedianAfter(r0, kWarmup, [](const StepMetrics& m) { return m.step_ms(); });
  const std::string when =
      f.lead_ms > 0.05    ? absl::StrFormat("%.1f ms before backward ended", f.lead_ms)
      : f.lead_ms < -0.05 ? absl::StrFormat("%.1f ms after backward ended", -f.lead_ms)
                          : std::string("as backward ended");
  absl::FPrintF(lab.out,
                "    %d bucket%s; first all-reduce launched %s; backward %.1f ms; wait after it %.1f ms; "
                "step %.1f ms (medians)\n",
                f.buckets, f.buckets == 1 ? "" : "s", when, f.backward_ms, f.wait_ms, f.step_ms);
  return f;
}

}  // namespace ringside
