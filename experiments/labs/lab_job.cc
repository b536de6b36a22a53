#include "experiments/labs/lab_job.h"

#include <cmath>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "common/trace.h"
#include "experiments/cluster/cluster.h"
#include "experiments/netem/bandwidth.h"
#include "experiments/netem/cpu_share.h"
#include "experiments/netem/network_emulator.h"
#include "experiments/sys/subprocess.h"

namespace ringside {
namespace {

// The last non-empty line of `text` ("" if none).
std::string LastLine(const std::string& text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  return lines.empty() ? "" : std::string(lines.back());
}

}  // namespace

absl::StatusOr<LabJob> RunLabJob(const LabContext& lab, const std::string& name,
                                 const std::vector<std::string>& args, absl::Duration timeout) {
  LabJob job;
  job.dir = absl::StrCat(lab.out_dir, "/", name);
  std::error_code ec;
  std::filesystem::remove_all(job.dir, ec);  // A previous check's outputs.
  std::filesystem::create_directories(job.dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", job.dir, ": ", ec.message()));
  std::vector<std::string> argv = {lab.ringside};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(absl::StrCat("--out=", job.dir));
  // What the student would type: `ringside` and the lab's flags (the --out is implied).
  absl::FPrintF(lab.out, "  $ ringside %s\n", absl::StrJoin(args, " "));
  std::fflush(lab.out);
  const int64_t start = NowMicros();
  absl::StatusOr<CommandOutput> run = RunCommand(argv, timeout);
  job.seconds = (NowMicros() - start) / 1e6;
  if (!run.ok()) {
    return absl::Status(run.status().code(),
                        absl::StrCat("job ", name, ": ", run.status().message()));
  }
  job.stdout_text = std::move(run->stdout_text);
  job.stderr_text = std::move(run->stderr_text);
  if (!run->ok()) {
    std::string why = LastLine(job.stderr_text);
    if (why.empty()) why = absl::StrCat("exit status ", run->exit_code, ", signal ", run->term_signal);
    return absl::InternalError(absl::StrCat("job ", name, " failed: ", why));
  }
  absl::FPrintF(lab.out, "    (%.1f s)\n", job.seconds);
  return job;
}

absl::StatusOr<std::vector<StepMetrics>> JobMetrics(const LabJob& job, OutputOwner owner, int index) {
  return ReadMetricsFile(
      absl::StrCat(job.dir, "/", OutputFileName(OutputFile::kMetrics, owner, index)));
}

absl::StatusOr<std::string> ScaleLinks(const std::string& links, double factor) {
  RINGSIDE_ASSIGN_OR_RETURN(NetworkProfile profile, ParseNetworkProfile(links));
  profile.link.bits_per_sec = std::floor(profile.link.bits_per_sec * factor);
  return ProfileToString(profile);
}

absl::StatusOr<std::string> LinkRateText(const std::string& links) {
  RINGSIDE_ASSIGN_OR_RETURN(NetworkProfile profile, ParseNetworkProfile(links));
  return FormatBandwidth(profile.link.bits_per_sec / 8);
}

absl::StatusOr<std::string> LabScaledLinks(const LabContext& lab, const std::string& cluster_links, double factor) {
  RINGSIDE_ASSIGN_OR_RETURN(std::string links, ScaleLinks(cluster_links, factor));
  RINGSIDE_ASSIGN_OR_RETURN(std::string rate, LinkRateText(links));
  absl::FPrintF(lab.out, "  links at %gx the cluster's NIC / d: %s\n", factor, rate);
  return links;
}

double LabNodeCpus(const LabContext& lab, double own) { return lab.node_cpus > 0 ? lab.node_cpus : own; }

absl::StatusOr<std::string> LabClusterLinks(const LabContext& lab, const std::string& model, int batch,
                                            double node_cpus) {
  if (absl::Status s = CheckCpuSharePrivileges(); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("this lab runs on emulated nodes, which needs root: ", s.message()));
  }
  RINGSIDE_ASSIGN_OR_RETURN(MeasuredDilation m,
                            MeasureDilation(kLabCluster, model, batch, /*threads=*/1, node_cpus, nullptr));
  absl::FPrintF(lab.out, "  %s\n", DescribeDilation(m.profile, m.dilation));
  return DilatedNetworkProfile(m.dilation);
}

std::vector<std::string> LabCommonFlags(int train_samples, int epochs) {
  return {absl::StrFormat("--dataset=synthetic:train=%d,test=512,seed=5", train_samples),
          absl::StrCat("--model=", kLabCommonModel),
          "--lr=0.05", "--momentum=0.9", "--seed=3", "--threads=1", "--eval_batch=512",
          absl::StrFormat("--epochs=%d", epochs)};
}

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace ringside
