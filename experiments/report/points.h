// The report's data: one point per (strategy, worker count), the median over the
// repeats of a `ringside compare` directory's cells, with speedups against the
// single-process baseline and the cost model's prediction beside each.
#ifndef RINGSIDE_EXPERIMENTS_REPORT_POINTS_H_
#define RINGSIDE_EXPERIMENTS_REPORT_POINTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/costmodel/cost_model.h"
#include "experiments/matrix/experiment.pb.h"

namespace ringside {

// One point of the report: the median over the repeats of a (strategy, workers) pair.
struct ReportPoint {
  std::string label;
  std::string kind;
  int workers = 0;
  int ok_repeats = 0;
  int failed_repeats = 0;
  std::string failure;          // A failed repeat's reason.
  double step_ms = 0;
  // The spread over the ok repeats (min and max; equal to the median with one repeat).
  double step_ms_min = 0, step_ms_max = 0;
  double speedup_min = 0, speedup_max = 0;
  double samples_per_sec = 0;
  double speedup = 0;           // Throughput over the single-process baseline's.
  double efficiency = 0;        // speedup / workers.
  double compute_ms = 0;  // Forward + backward.
  double data_ms = 0;     // Gathering or generating the batch (apart from compute).
  double comm_ms = 0, wait_ms = 0, update_ms = 0;
  double busiest_bytes_in = 0, busiest_bytes_out = 0;
  double test_accuracy = 0;
  double wall_s = 0;
  std::vector<std::string> cells;  // Cell ids (for trace links).
  // Per cell: its worker 0 / rank 0 trace, relative to the compare directory.
  std::vector<std::string> trace_paths;
  // Cells that ran on a cluster's dilation, read at the host's pace during the cell
  // (BuildPoints): the step and compute at its round's single process's pace, medians
  // over the repeats; 0 where the cells were not read so (no dilation, or results
  // without forward_ms). StepForModel / ComputeAtSinglePace pick them.
  double paced_step_ms = 0;
  double paced_compute_ms = 0;
  // Cells that ran on a cluster's dilation: communication and waiting per step in the
  // cluster's time, each repeat's over the d its links were shaped for (links run at
  // the cluster's rate / d, so this is what the cluster would wait), the median; 0
  // where a repeat has no dilation. Communication alone: no compute pace enters it.
  double cluster_comm_ms = 0;
  // Cells whose links were shaped for a d: the step as the cost model should see it,
  // its link part converted to the matrix's reference d (MedianLinkDilation, whose
  // links the predictions use) and its CPU part at the single's pace where the cell
  // has a forward pace (DDP); the median over the repeats; 0 otherwise. StepForModel
  // picks it first.
  double model_step_ms = 0;
  double predicted_step_ms = 0;    // Cost model (0: no calibration or no prediction).
  double predicted_comm_cpu_ms = 0;  // Of it, the CPU the transfers take from compute (Prediction.comm_cpu_s).
  double predicted_join_ms = 0;  // Of it, the PS's wait for the slowest worker's stream (Prediction.join_s).
  // Where the first repeat computed ("cpu", "cuda:0"; CellResult.device), whether any
  // repeat was emulated (workers / ranks sharing a GPU) and the GPUs it used.
  std::string device;
  bool emulated = false;
  int gpus = 0;
  std::string ps_sync;  // PS: "bsp", "ssp:K", "asp" (CellResult.ps_sync).
  int ranks_per_node = 1;  // Processes per emulated node (CellResult.ranks_per_node).
  // Who the others waited for (CellResult.late_*): the rank(s) / worker(s) that more
  // than half of the ok repeats named (empty: none clearly late), with the medians over
  // those repeats of the share of steps they were last, the others' wait for them per
  // step, and that wait over the step.
  std::vector<int> late_ranks;
  double late_share = 0;
  double late_wait_ms = 0;
  double late_wait_fraction = 0;
  // PS: the placement of the first ok repeat (CellResult.ps_placement) and each shard's
  // bytes per step in and out, in shard order (medians over the ok repeats; empty
  // without shard records).
  std::string ps_placement;
  std::vector<double> shard_bytes;
  // PS: "optimizer" or "summation" (CellResult.ps_mode; empty in older results), and
  // "grpc" or "tcp" (CellResult.ps_transport).
  std::string ps_mode;
  std::string ps_transport;
  // DDP: the format gradients travelled in (CellResult.wire_format; "fp32" in older
  // results).
  std::string wire_format;
};

// PS: the shard carrying the most of `p`'s traffic and its share of all the shards'
// bytes; {-1, 0} without shard records.
struct HottestShard {
  int shard = -1;
  double share = 0;
};
HottestShard FindHottestShard(const ReportPoint& p);

// "cuda:0", or "cuda:0 (emulated: 2 ranks share one GPU, NCCL over sockets)".
std::string PointDevice(const ReportPoint& p);

// Where a report's predicted compute came from (PredictPoints): the calibration's
// compute per step on the single cell's share, and the single cells' measured one, in
// ms; both 0 when the calibration's was used as measured.
struct ComputeBasis {
  double calibrated_ms = 0;
  double single_ms = 0;
};

// Everything a report is rendered from (report.md, report.html, the plots).
struct ReportData {
  std::string name;        // The compare directory's name.
  std::string spec_text;   // Its spec.textproto.
  std::string network;     // In words: "loopback (no emulated links)", "emulated links `bw=1gbit`, ...".
  // The emulation in force (spec.h DescribeEmulation / DescribeEmulationShort), stated on
  // every page and plot; empty / the short "one machine, loopback" without one.
  std::string emulation;
  std::string emulation_short;
  std::vector<ReportPoint> points;  // In spec order.
  int64_t num_params = 0;
  bool predicted = false;  // calibration.json was there and fits: points carry predictions.
  double calibration_node_cpus = 0;  // The CPU share its compute was measured on (0: none).
  // The calibration's paths beside raw TCP measured in its run (TransportsBesideRawTcp;
  // empty: no calibration, or one from before raw TCP was measured).
  std::string transports_beside_raw_tcp;
  ComputeBasis compute_basis;        // PredictPoints's: compute from the single cells.
  // Why there are no predictions, when there are none (e.g. the calibration was taken
  // with another model); empty: there was no calibration.json.
  std::string no_prediction_reason;
  bool strong_scaling = false;  // The spec fixed the global batch (else weak scaling).
  std::string findings;    // Findings(points, context) (findings.h).
  // A cluster emulated by time dilation: whether the host held its profile while the
  // cells ran (report.h HostHeldCluster); "" without a cluster.
  std::string host_check;
};

// Reads DIR/cells/*/result.textproto. NotFound if there are none.
absl::StatusOr<std::vector<CellResult>> ReadCellResults(const std::string& dir);
// Groups by (label, workers), medians over repeats, speedup against "single" (or the
// strategy's own 1-worker point). Sorted by label order of first appearance, workers.
// Speedups: each repeat's throughput over its own round's single process (the single
// cell of the same repeat), median and range, where every repeat has one; else over the
// single cells' median throughput (or the strategy's own 1-worker cell's).
// Cells that ran on a cluster's dilation (CellResult.dilation) are read in the cluster's
// time. A DDP cell at the host's pace during the cell itself: its pace over its round's
// single process's is the ratio of their forward passes (CellResult.forward_ms, a phase
// no all-reduce shares), so a speedup is (throughput x own forward) / (the single's x
// its forward); the host's drift between cells cancels, and what communication takes
// from backward's CPU stays in. A PS cell, whose next parameters arrive during its
// forward, over the single process as the probe just before it measured it, where the
// profile's step is given (`target_step_ms` > 0, DilationRecord.target_step_ms): in the
// cluster's time the single steps at the profile's step, so the speedup is the cell's
// throughput x its own d over the single's batch per target step. Without it, and for
// results without forward_ms, over the d probed around each cell (the median of three
// consecutive probes) and its round's single read the same way.
std::vector<ReportPoint> BuildPoints(const std::vector<CellResult>& results, double target_step_ms = 0);

// The step (compute) the cost model is checked against: model_step_ms where the cells
// ran on links shaped for a d, else at the single process's pace where the point was
// read so (paced_*), else as measured.
double StepForModel(const ReportPoint& p);
double ComputeAtSinglePace(const ReportPoint& p);

// The d of the matrix's median cell with links (the upper median), whose links the
// report's predictions use (report.h MedianCellDilation); 0 when no cell has links.
double MedianLinkDilation(const std::vector<CellResult>& results);

// Cluster runs: how far the host's pace during each DDP cell strayed from the d its
// links were shaped for: its forward pass over its own probe's where compare recorded
// it (CellResult.pace_off, the run compare kept after its retries), else over the single
// cells' forward per unit of d (the median over the rounds of their forward over the d
// probed around them). A cell past `fraction` computed at a pace its links did not
// follow: its communication is relatively that much too fast or slow for the cluster.
struct LinkPaceDrift {
  int cells = 0;          // DDP cells with a dilation and a forward pace.
  int strayed = 0;        // Of them, past the fraction.
  double worst = 0;       // The largest |pace / link's d - 1|,
  std::string worst_cell; // and its cell.
};
LinkPaceDrift MeasureLinkPaceDrift(const std::vector<CellResult>& results, double fraction);
// Orders points by the strategies' order in the spec (text format), then workers.
void SortPointsBySpec(const std::string& spec_text, std::vector<ReportPoint>* points);
// Fills predicted_step_ms of every point from the cost model: `calibration` measured
// on loopback, the spec's strategies and network, the compute time scaled by
// max(1, processes computing at once / `cores`) for workers sharing one machine (with
// the spec's emulated nodes instead: each node's CPU share, its ranks per node and the
// slow node, cost_model.h Scenario) and, under strong scaling (the calibration taken
// at the global batch), by 1 / workers. Points on a GPU get none (the calibration
// measures the CPU's paths).
//
// Where the matrix ran the single process (on the CPU, ok), its measured compute per
// step replaces the calibration's compute and backward (scaled alike, on the single
// cell's share): it was measured beside the other cells, round by round, so the
// predictions' error is the communication model's rather than the host's drift between
// `calibrate` and `compare` (7% in one demo run). Returns the calibration's compute on
// that share and the single's, in ms ({0, 0} when not replaced: ComputeBasis).
ComputeBasis PredictPoints(const Calibration& calibration, const ExperimentSpec& spec, int cores,
                           std::vector<ReportPoint>* points);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_POINTS_H_
