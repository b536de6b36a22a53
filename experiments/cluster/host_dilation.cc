#include "experiments/cluster/host_dilation.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/cpu_ops.h"
#include "common/status_macros.h"
#include "experiments/bench/step_bench.h"
#include "experiments/cluster/node_layout.h"
#include "experiments/netem/cpu_share.h"

namespace ringside {
namespace {

// The host step's measurement budget: enough steps for a steady median on a node's
// share (LeNet at batch 256 on 0.4 CPU: about 5 s), little beside the job it sets up.
constexpr int kHostStepWarmup = 3;
constexpr int kHostStepSteps = 12;
// A step much shorter than the share's quota period runs mostly unthrottled and then
// waits out a period: its median is not the node's pace. Such steps are timed again
// over at least this span (100 periods of 5 ms) and their mean taken (the share's
// throughput), up to kMaxHostStepSteps steps.
constexpr absl::Duration kMinHostStepSpan = absl::Milliseconds(500);
constexpr int kMaxHostStepSteps = 5000;

}  // namespace

absl::StatusOr<MeasuredDilation> MeasureDilation(const std::string& cluster, const std::string& model, int batch,
                                                 int threads, double node_cpus, FILE* progress) {
  if (!(node_cpus > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cluster %s needs nodes with a CPU share (--node_cpus): the dilation is measured on one", cluster));
  }
  MeasuredDilation m;
  RINGSIDE_ASSIGN_OR_RETURN(m.profile, LoadClusterProfile(cluster));
  RINGSIDE_RETURN_IF_ERROR(CheckCpuSharePrivileges());
  // A device is a rank: the step is one device's, on its share of the node.
  const int devices = std::max(1, m.profile.devices_per_node);
  const double device_cpus = DeviceCpus(node_cpus, devices);
  if (progress != nullptr) {
    if (devices > 1) {
      absl::FPrintF(progress,
                    "ringside: measuring one step of %s at batch %d on %.4g CPU, one device's share of a node of "
                    "%.2f CPU (cluster %s, %d devices per node)\n",
                    model, batch, device_cpus, node_cpus, m.profile.name, devices);
    } else {
      absl::FPrintF(progress, "ringside: measuring one step of %s at batch %d on a node of %.2f CPU (cluster %s)\n",
                    model, batch, node_cpus, m.profile.name);
    }
  }
  RemoveStaleCpuShares().IgnoreError();
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<EmulatedCpuShares> node,
                            EmulatedCpuShares::Create(device_cpus, 1, CpuSharePeriodFor(device_cpus)));
  RINGSIDE_RETURN_IF_ERROR(node->JoinNode(0));
  StepBenchOptions o;
  o.model = model;
  o.batch = batch;
  o.threads = threads;
  o.warmup = kHostStepWarmup;
  o.steps = kHostStepSteps;
  o.measure_floor = false;
  absl::StatusOr<StepBenchResult> host = MeasureStepBench(o);
  const double span_ms = absl::ToDoubleMilliseconds(kMinHostStepSpan);
  bool by_mean = false;
  if (host.ok() && host->rounds.front().step_ms * o.steps < span_ms) {
    o.steps = std::min(kMaxHostStepSteps,
                       static_cast<int>(std::ceil(span_ms / std::max(host->rounds.front().step_ms, 1e-3))));
    host = MeasureStepBench(o);
    by_mean = true;
  }
  RINGSIDE_RETURN_IF_ERROR(node->Teardown());
  if (!host.ok()) return host.status();
  StepRound round = host->rounds.front();
  if (by_mean && round.step_ms > 0) {
    // The compute's part of the step, at the mean's pace.
    round.compute_ms *= round.mean_step_ms / round.step_ms;
    round.forward_ms *= round.mean_step_ms / round.step_ms;
    round.step_ms = round.mean_step_ms;
  }
  RINGSIDE_ASSIGN_OR_RETURN(double target_s, TargetStepSeconds(m.profile, model, batch, host->gemm_flops));
  RINGSIDE_ASSIGN_OR_RETURN(m.dilation, ComputeDilation(m.profile, round.step_ms / 1e3, target_s, node_cpus,
                                                        /*can_delay=*/false));
  m.dilation.host_kernels = CpuBlasKernels();
  m.host_compute_s = round.compute_ms / 1e3;
  m.host_forward_s = round.forward_ms / 1e3;
  return m;
}

}  // namespace ringside
