#include "experiments/costmodel/simulate.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/costmodel/calibration_json.h"
#include "experiments/costmodel/cost_model.h"
#include "experiments/costmodel/model_presets.h"
#include "experiments/netem/bandwidth.h"
#include "experiments/sys/files.h"

namespace ringside {
namespace {

// ", gradients in fp16 on the wire (the compressed ring)" for fp16 / bf16; "" for float32.
std::string CompressedRingText(WireFormat format) {
  if (format == WireFormat::kFp32) return "";
  return absl::StrCat(", gradients in ", WireFormatName(format), " on the wire (the compressed ring)");
}

constexpr int kCellWidth = 20;  // "%11.3f %7.2fx", "%-8s%7.2f Gb/s"

std::string FormatBytes(double bytes) {
  if (bytes >= 1e9) return absl::StrFormat("%.2f GB", bytes / 1e9);
  if (bytes >= 1e6) return absl::StrFormat("%.2f MB", bytes / 1e6);
  if (bytes >= 1e3) return absl::StrFormat("%.2f kB", bytes / 1e3);
  return absl::StrFormat("%.0f B", bytes);
}

std::string FormatRate(double bytes_per_s) {
  if (bytes_per_s <= 0) return "not calibrated";
  if (bytes_per_s >= 1e9) return absl::StrFormat("%.2f GB/s", bytes_per_s / 1e9);
  return absl::StrFormat("%.1f MB/s", bytes_per_s / 1e6);
}

std::string FormatPath(const PathCalibration& p) {
  return absl::StrFormat("alpha %.1f us, %s", p.alpha_s * 1e6, FormatRate(p.bytes_per_s));
}

std::string Centered(const std::string& s, int width) {
  if (static_cast<int>(s.size()) >= width) return s;
  const int left = (width - static_cast<int>(s.size())) / 2;
  return std::string(left, ' ') + s + std::string(width - left - s.size(), ' ');
}

// Exposed communication under this share of the step counts as hidden: the point is
// compute-bound.
constexpr double kHiddenShareOfStep = 0.01;

// What bounds a point, in the bounds table's words: compute only while communication
// hides under it; otherwise what the exposed communication waits for (or the update).
std::string BoundName(const Prediction& p) {
  std::string bottleneck = p.bottleneck;
  if (bottleneck == "compute" && p.comm_s > kHiddenShareOfStep * p.step_s) bottleneck = p.comm_bottleneck;
  if (bottleneck == "worker link") return "NIC";
  if (bottleneck == "master link") return "server";
  if (bottleneck == "intra-node") return "intra";
  if (bottleneck == "reduction") return "reduce";
  return bottleneck;  // compute, update, latency.
}

// The two tables of a sweep (step time and speedup; bound and bandwidth used) and its
// crossovers.
void PrintCurves(const std::vector<Curve>& curves, double single_s, FILE* out) {
  absl::FPrintF(out, "step time ms and speedup (weak scaling: N x single / step)\n");
  absl::FPrintF(out, "%6s %10s", "N", "single ms");
  for (const Curve& curve : curves) absl::FPrintF(out, " |%s", Centered(curve.label, kCellWidth));
  absl::FPrintF(out, " | fastest\n");
  const std::vector<int>& workers = curves.front().workers;
  for (size_t k = 0; k < workers.size(); ++k) {
    absl::FPrintF(out, "%6d %10.3f", workers[k], single_s * 1e3);
    size_t best = 0;
    for (size_t i = 0; i < curves.size(); ++i) {
      const Curve& curve = curves[i];
      absl::FPrintF(out, " |%11.3f %7.2fx", curve.predictions[k].step_s * 1e3, curve.speedups[k]);
      if (curve.predictions[k].step_s < curves[best].predictions[k].step_s) best = i;
    }
    const Curve& winner = curves[best];
    absl::FPrintF(out, " | %s (%s)\n", winner.label, BoundName(winner.predictions[k]));
  }
  absl::FPrintF(out,
                "what bounds each point (compute: communication hidden; else what the exposed "
                "communication waits for: NIC, the busiest node's link; server, the busiest PS "
                "server's link; intra, the path inside a node; latency; or update, reduce) and "
                "the bandwidth it used: bytes through the busiest NIC / all its communication "
                "time, Gbit/s\n");
  absl::FPrintF(out, "%6s %10s", "N", "");
  for (const Curve& curve : curves) absl::FPrintF(out, " |%s", Centered(curve.label, kCellWidth));
  absl::FPrintF(out, "\n");
  for (size_t k = 0; k < workers.size(); ++k) {
    absl::FPrintF(out, "%6d %10s", workers[k], "");
    for (const Curve& curve : curves) {
      const Prediction& p = curve.predictions[k];
      absl::FPrintF(out, " | %-7s%7.2f Gb/s", BoundName(p), UsedBytesPerSecond(p) * 8 / 1e9);
    }
    absl::FPrintF(out, "\n");
  }

  const std::vector<Crossover> crossovers = FindCrossovers(curves);
  if (crossovers.empty()) {
    absl::FPrintF(out, "crossover: none for N = %d..%d (no pair of curves changes order)\n",
                  workers.front(), workers.back());
  }
  for (const Crossover& x : crossovers) {
    absl::FPrintF(out,
                  "crossover: %s overtakes %s between N=%d and N=%d (interpolated N ~ %.1f)\n",
                  x.faster_after, x.faster_before, x.workers_before, x.workers,
                  x.workers_interpolated);
  }
  absl::FPrintF(out, "\n");
}

// The placement's busiest shard at each S of the PS rows, for headers: "" for balanced.
std::string DescribePlacement(PsPlacement placement, const std::vector<double>& tensor_bytes,
                              const std::vector<int>& shards) {
  if (placement == PsPlacement::kBalanced) return "";
  std::string out = absl::StrCat("; PS placement ", PsPlacementName(placement), ": the busiest shard holds");
  bool first = true;
  for (int s : shards) {
    if (s == kShardsPerWorker) continue;
    absl::StrAppendFormat(&out, "%s %.0f%% of M at S=%d", first ? "" : ",",
                          100 * BusiestShare(tensor_bytes, s, placement), s);
    first = false;
  }
  return first ? absl::StrCat(out, " its largest tensors' share at S=N") : out;
}

// Where the PS shards live, for headers.
std::string DescribeShards(bool colocated) {
  return colocated ? "PS shards inside the workers (colocated): shard j in worker j mod S"
                   : "PS shards on server nodes of their own (standalone), one a node, with the workers' NIC";
}

absl::Status PrintOneLink(const SimulateOptions& options, double model_bytes, double link,
                          const std::vector<double>& tensor_bytes, FILE* out) {
  // The PS rows on the transport asked for (RunSimulate checked it was measured).
  Calibration c = options.calibration;
  if (options.ps_tcp) c.push_pull = c.push_pull_tcp;
  const double node_cpus = options.node_cpus < 0 ? c.node_cpus : options.node_cpus;
  SweepOptions sweep;
  sweep.model_bytes = model_bytes;
  sweep.link_bytes_per_s = link;
  sweep.link_latency_s = options.link_latency_s;
  sweep.master_link_bytes_per_s = options.master_link_bytes_per_s;
  sweep.path_limits = options.path_limits;
  sweep.overlap = options.overlap;
  sweep.wire_format = options.wire_format;
  sweep.workers = options.workers;
  sweep.shards = options.shards;
  sweep.shards_colocated = options.shards_colocated;
  sweep.colocated = options.colocated;
  sweep.ps_placement = options.ps_placement;
  sweep.tensor_bytes = tensor_bytes;
  sweep.ps_summation = options.ps_summation;
  sweep.worker_summers = options.worker_summers;
  sweep.ps_chunk_bytes = options.ps_chunk_bytes;
  sweep.bucket_cap_bytes = options.bucket_cap_bytes;
  sweep.node_cpus = node_cpus;
  sweep.slow_node_fraction = options.slow_node_fraction;
  absl::StatusOr<std::vector<Curve>> curves = PredictCurves(c, sweep);
  if (!curves.ok()) return curves.status();

  if (link > 0) {
    absl::FPrintF(out, "== link %s (%s each way)", FormatBandwidth(link), FormatRate(link));
  } else {
    absl::FPrintF(out, "== calibrated paths (no link speed given)");
  }
  absl::FPrintF(out, ", model %s ==\n", FormatBytes(model_bytes));
  if (options.master_link_bytes_per_s > 0) {
    absl::FPrintF(out, "PS server links: %s\n", FormatBandwidth(options.master_link_bytes_per_s));
  }
  if (link > 0 || options.link_latency_s >= 0) {
    absl::FPrintF(out, "%s\n",
                  options.path_limits
                      ? "bandwidth = min(link, calibrated path); latency = calibrated alpha"
                        " + link latency (twice for a push-pull)"
                      : "link numbers alone (calibrated paths ignored: --wire_only)");
  }
  if (options.link_latency_s >= 0) {
    absl::FPrintF(out, "link latency %.1f us one way, node to node\n",
                  options.link_latency_s * 1e6);
  }
  const std::string measured_on =
      c.node_cpus > 0 ? absl::StrFormat("a node of %g CPU", c.node_cpus) : std::string("the machine's cores");
  Scenario on_node;  // The single baseline: one node of the share, full speed.
  on_node.node_cpus = node_cpus;
  const Calibration baseline = CalibrationOnNode(c, on_node);
  if (node_cpus != c.node_cpus) {
    absl::FPrintF(out,
                  "emulated nodes: %s each, NOT the calibration's share: its CPU-bound costs "
                  "(measured on %s) rescaled x%.3g\n",
                  node_cpus > 0 ? absl::StrFormat("%g CPU", node_cpus) : std::string("the machine's cores"),
                  measured_on, c.compute_s > 0 ? baseline.compute_s / c.compute_s : 1.0);
  } else if (node_cpus > 0) {
    absl::FPrintF(out, "emulated nodes: %g CPU each, the calibration's share (no rescaling)\n", node_cpus);
  }
  if (options.slow_node_fraction < 1) {
    absl::FPrintF(out, "one node at %g of that share (every step waits for it)\n",
                  options.slow_node_fraction);
  }
  const double single = SingleProcessStepSeconds(baseline, model_bytes);
  absl::FPrintF(out,
                "single process: %.3f ms/step (compute %.3f ms + update %.3f ms); DDP "
                "overlap %s%s\n",
                single * 1e3, baseline.compute_s * 1e3, baseline.update_s_per_byte * model_bytes * 1e3,
                options.overlap ? "on" : "off",
                CompressedRingText(options.wire_format));
  PrintCurves(*curves, single, out);
  return absl::OkStatus();
}

// "--step_ms", "profile step entry (source)", "X GFLOP / Y TFLOP/s".
std::string DescribeStep(const ClusterSimulateOptions& o, double step_s) {
  if (o.step_s > 0) return "given (--step_ms)";
  for (const DeviceStep& s : o.cluster.steps) {
    if (s.model == o.model.name && s.batch == o.batch) {
      return absl::StrCat("the profile's step entry", s.source.empty() ? "" : absl::StrCat(" (", s.source, ")"));
    }
  }
  return absl::StrFormat("%.1f GFLOP / %.1f TFLOP/s (%s)", o.model.flops_per_step / 1e9,
                         o.cluster.device_flops / 1e12,
                         o.model.flops_source.empty() ? std::string("the model's GEMMs") : o.model.flops_source);
}

template <typename T, typename Parse>
absl::StatusOr<std::vector<T>> ParseList(absl::string_view text, const char* what, Parse parse) {
  std::vector<T> out;
  for (absl::string_view word : absl::StrSplit(text, ',')) {
    word = absl::StripAsciiWhitespace(word);
    T value;
    if (word.empty() || !parse(word, &value)) {
      return absl::InvalidArgumentError(absl::StrCat("bad ", what, " '", word, "' in '", text, "'"));
    }
    out.push_back(value);
  }
  return out;
}

}  // namespace

absl::Status RunSimulate(const SimulateOptions& options, FILE* out) {
  const Calibration& c = options.calibration;
  if (!options.model.empty() || options.batch > 0) {
    absl::Status fits = CheckCalibrationFits(c, options.model.empty() ? c.model : options.model,
                                             options.batch > 0 ? options.batch : c.batch);
    if (!fits.ok()) return absl::FailedPreconditionError(absl::StrCat("simulate: ", fits.message()));
  }
  if (options.ps_tcp && !(c.push_pull_tcp.bytes_per_s > 0)) {
    return absl::FailedPreconditionError(
        "simulate: --ps_transport=tcp needs a calibration with the TCP push-pull path (push_pull_tcp; re-run "
        "`ringside calibrate`)");
  }
  const double model_bytes =
      options.model_bytes > 0 ? options.model_bytes : options.calibration.model_bytes;
  if (!(model_bytes > 0) || !std::isfinite(model_bytes)) {
    return absl::InvalidArgumentError(
        "simulate: no model size (give model_bytes or calibrate with a model)");
  }
  if (c.model.empty() || c.batch <= 0) {
    absl::FPrintF(out, "calibration of an unknown model and batch (written by an older ringside "
                       "calibrate; re-run `ringside calibrate --model=... --batch=...` to record "
                       "them)\n");
  } else {
    absl::FPrintF(out, "calibration measured with %s at batch %d, %d thread(s)%s\n", c.model, c.batch,
                  c.threads, model_bytes != c.model_bytes
                                 ? absl::StrCat("; predicting for a model of ", FormatBytes(model_bytes),
                                                " with its compute times")
                                 : "");
  }
  absl::FPrintF(out,
                "calibration: compute %.3f ms/step (backward %.3f ms) on %s, update %.3f "
                "ns/byte, reduce %.3f ns/byte%s%s%s\n",
                c.compute_s * 1e3, c.backward_s * 1e3,
                c.node_cpus > 0 ? absl::StrFormat("a node of %g CPU", c.node_cpus) : std::string("the machine's cores"),
                c.update_s_per_byte * 1e9, c.reduce_s_per_byte * 1e9,
                c.allreduce_cpu_s_per_byte > 0
                    ? absl::StrFormat(", ring CPU %.3f ns per byte sent", c.allreduce_cpu_s_per_byte * 1e9)
                    : std::string(),
                c.push_pull_cpu_s_per_byte > 0
                    ? absl::StrFormat(", PS CPU %.3f ns per byte an end moves on the node (TCP %.3f)",
                                      c.push_pull_cpu_s_per_byte * 1e9, c.push_pull_tcp_cpu_s_per_byte * 1e9)
                    : std::string(),
                c.fp16_codec_s_per_value > 0
                    ? absl::StrFormat(", encode + decode %.3f ns per value in fp16 (bf16 %.3f)",
                                      c.fp16_codec_s_per_value * 1e9, c.bf16_codec_s_per_value * 1e9)
                    : std::string());
  absl::FPrintF(out,
                "  push-pull: %s over gRPC, %s over TCP%s, +%.1f us per further call at a node; all-reduce: %s; "
                "halving-doubling: %s\n",
                FormatPath(c.push_pull),
                c.push_pull_tcp.bytes_per_s > 0 ? FormatPath(c.push_pull_tcp) : std::string("not measured"),
                options.ps_tcp ? " (the PS rows: TCP)" : " (the PS rows: gRPC)", c.push_pull_per_call_s * 1e6,
                FormatPath(c.allreduce),
                c.halving_doubling.bytes_per_s > 0 ? FormatPath(c.halving_doubling)
                                                   : std::string("as all-reduce"));
  std::vector<double> tensors;  // The model's, for a whole-tensor placement.
  if (options.ps_placement != PsPlacement::kBalanced) {
    absl::StatusOr<std::vector<double>> t = ModelTensorBytes(options.model.empty() ? c.model : options.model);
    if (!t.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("simulate: --ps_placement=",
                                                        PsPlacementName(options.ps_placement),
                                                        " needs the calibration's model's tensors: ", t.status().message()));
    }
    tensors = *std::move(t);
  }
  absl::FPrintF(out, "%s; %s%s\n\n", DescribeRingsidePsSchedule(options.ps_chunk_bytes),
                DescribeShards(options.shards_colocated),
                DescribePlacement(options.ps_placement, tensors, options.shards));
  const std::vector<double> links =
      options.link_bytes_per_s.empty() ? std::vector<double>{0} : options.link_bytes_per_s;
  for (double link : links) {
    absl::Status st = PrintOneLink(options, model_bytes, link, tensors, out);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::StatusOr<SimulatedModel> ResolveSimulatedModel(const std::string& model, int batch,
                                                     double model_mb,
                                                     const std::vector<double>& layers_mb) {
  SimulatedModel m;
  if (!model.empty()) {
    if (model_mb > 0 || !layers_mb.empty()) {
      return absl::InvalidArgumentError("simulate: give --model or --model_mb [--layers_mb], not both");
    }
    m.name = model;
    if (model.find(':') != std::string::npos) {
      absl::StatusOr<ModelWeight> weight = WeighModel(model, batch > 0 ? batch : 1);
      if (!weight.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("simulate: model ", model, ": ", weight.status().message()));
      }
      m.description = absl::StrCat(model, " (a ringside model, 28x28x1 inputs, 10 classes)");
      m.bytes = weight->bytes;
      m.layer_bytes = weight->layer_bytes;
      if (batch > 0) m.flops_per_step = weight->gemm_flops;
      m.flops_source = "its GEMMs, Model::GemmFlops";
      return m;
    }
    absl::StatusOr<ModelPreset> preset = FindModelPreset(model);
    if (!preset.ok()) return absl::NotFoundError(absl::StrCat("simulate: ", preset.status().message()));
    m.description = preset->description;
    for (const LayerShape& l : preset->layers) m.layer_bytes.push_back(l.params * kBytesPerParam);
    m.bytes = PresetParams(*preset) * kBytesPerParam;
    if (batch > 0) m.flops_per_step = preset->flops_per_sample * batch;
    m.flops_source = preset->flops_source;
    return m;
  }
  if (model_mb < 0 || !std::isfinite(model_mb)) {
    return absl::InvalidArgumentError(absl::StrCat("simulate: --model_mb must be > 0 (got ", model_mb, ")"));
  }
  double sum = 0;
  for (double l : layers_mb) {
    if (!(l > 0) || !std::isfinite(l)) {
      return absl::InvalidArgumentError(absl::StrCat("simulate: --layers_mb sizes must be > 0 (got ", l, ")"));
    }
    sum += l;
    m.layer_bytes.push_back(l * 1e6);
  }
  if (model_mb == 0 && layers_mb.empty()) {
    return absl::InvalidArgumentError(
        "simulate --cluster needs a model: --model=NAME|SPEC (presets: " +
        absl::StrJoin(ModelPresetNames(), ", ") + ") or --model_mb=MB [--layers_mb=a,b,...]");
  }
  if (model_mb > 0 && !layers_mb.empty() && std::abs(sum - model_mb) > 1e-6 * model_mb) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "simulate: --layers_mb add up to %g MB, --model_mb is %g MB", sum, model_mb));
  }
  m.bytes = (layers_mb.empty() ? model_mb : sum) * 1e6;
  m.description = layers_mb.empty()
                      ? std::string("given by size (layers unknown: buckets ignore layer boundaries)")
                      : absl::StrFormat("given by size, %d layers", static_cast<int>(layers_mb.size()));
  return m;
}

absl::StatusOr<double> ClusterStepSeconds(const ClusterSimulateOptions& o) {
  if (o.step_s > 0) return o.step_s;
  absl::StatusOr<double> step = TargetStepSeconds(o.cluster, o.model.name, o.batch, o.model.flops_per_step);
  if (step.ok()) return step;
  const std::string model = o.model.name.empty() ? std::string("a model given by size") : o.model.name;
  std::string hint = "give --step_ms=MS (one device's step)";
  if (o.batch <= 0 && !o.model.name.empty()) {
    absl::StrAppend(&hint, ", or --batch=B to derive it from the model's FLOPs or a step entry");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "simulate: no step time for ", model, o.batch > 0 ? absl::StrCat(" at batch ", o.batch) : "",
      " on cluster ", o.cluster.name, ": ", hint));
}

Calibration DeviceCalibration(double step_s) {
  Calibration c;
  c.compute_s = step_s;
  c.backward_s = kBackwardShareOfStep * step_s;
  return c;
}

absl::StatusOr<SweepOptions> ClusterSweep(const ClusterSimulateOptions& o, double link) {
  if (!(o.model.bytes > 0)) return absl::InvalidArgumentError("simulate: the model has no bytes");
  SweepOptions sweep;
  sweep.model_bytes = o.model.bytes;
  sweep.link_bytes_per_s = link > 0 ? link : o.cluster.nic.bytes_per_s;
  sweep.link_latency_s = o.link_latency_s >= 0 ? o.link_latency_s : o.cluster.nic.latency_s;
  sweep.path_limits = false;  // No calibrated software path: the wire alone.
  sweep.overlap = o.overlap;
  sweep.wire_format = o.wire_format;
  sweep.workers = o.workers;
  sweep.shards = o.shards;
  sweep.shards_colocated = o.shards_colocated;
  sweep.colocated = false;
  sweep.ranks_per_node = std::max(1, o.cluster.devices_per_node);
  if (sweep.ranks_per_node > 1) {
    sweep.intra_node_bytes_per_s = o.cluster.intra_node.bytes_per_s;
    sweep.intra_node_latency_s = o.cluster.intra_node.latency_s;
  }
  sweep.layer_bytes = o.model.layer_bytes;
  sweep.bucket_cap_bytes = o.bucket_cap_bytes;
  sweep.ps_placement = o.ps_placement;
  sweep.tensor_bytes = o.model.layer_bytes;
  sweep.ps_summation = o.ps_summation;
  sweep.worker_summers = o.worker_summers;
  sweep.ps_chunk_bytes = o.ps_chunk_bytes;
  if (o.ps_placement != PsPlacement::kBalanced && o.model.layer_bytes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("simulate: --ps_placement=", PsPlacementName(o.ps_placement),
                                                   " deals whole tensors: give the model's layers (a preset, a "
                                                   "ringside spec or --layers_mb)"));
  }
  return sweep;
}

absl::StatusOr<std::vector<Curve>> PredictClusterCurves(const ClusterSimulateOptions& o, double link) {
  absl::StatusOr<double> step = ClusterStepSeconds(o);
  if (!step.ok()) return step.status();
  absl::StatusOr<SweepOptions> sweep = ClusterSweep(o, link);
  if (!sweep.ok()) return sweep.status();
  return PredictCurves(DeviceCalibration(*step), *sweep);
}

absl::Status RunClusterSimulate(const ClusterSimulateOptions& o, FILE* out) {
  absl::StatusOr<double> step = ClusterStepSeconds(o);
  if (!step.ok()) return step.status();
  const ClusterProfile& cl = o.cluster;
  const double latency = o.link_latency_s >= 0 ? o.link_latency_s : cl.nic.latency_s;
  absl::FPrintF(out, "cluster %s\n", DescribeCluster(cl));
  if (!cl.source.empty()) absl::FPrintF(out, "  source: %s\n", cl.source);
  absl::FPrintF(out, "model: %s: %s of fp32 gradients%s\n", o.model.description, FormatBytes(o.model.bytes),
                o.batch > 0 ? absl::StrFormat(", batch %d a device", o.batch) : std::string(""));
  absl::FPrintF(out, "step on one device: %.3f ms, %s; backward taken as %.0f%% of it\n", *step * 1e3,
                DescribeStep(o, *step), kBackwardShareOfStep * 100);
  absl::FPrintF(out,
                "links: the profile's wire alone (no calibration); NIC latency %.1f us one way%s "
                "(2(N-1) per ring, 2 lg N per halving-doubling, 2 per push-pull); ranks laid out "
                "node by node, %d a node; no update or summing cost outside the step\n",
                latency * 1e6, o.link_latency_s >= 0 ? " (--link_latency)" : "",
                std::max(1, cl.devices_per_node));
  absl::FPrintF(out, "%s; %s; DDP overlap %s%s, buckets of %s%s\n\n", DescribeRingsidePsSchedule(o.ps_chunk_bytes),
                DescribeShards(o.shards_colocated), o.overlap ? "on" : "off",
                CompressedRingText(o.wire_format),
                o.model.layer_bytes.empty() ? "the model cut regardless of layers" : "whole layers",
                DescribePlacement(o.ps_placement, o.model.layer_bytes, o.shards));
  const std::vector<double> links =
      o.link_bytes_per_s.empty() ? std::vector<double>{0} : o.link_bytes_per_s;
  for (double link : links) {
    absl::StatusOr<SweepOptions> sweep = ClusterSweep(o, link);
    if (!sweep.ok()) return sweep.status();
    absl::StatusOr<std::vector<Curve>> curves = PredictCurves(DeviceCalibration(*step), *sweep);
    if (!curves.ok()) return curves.status();
    absl::FPrintF(out, "== NIC %s (%s each way), %d device(s) a node, model %s ==\n",
                  FormatBandwidth(sweep->link_bytes_per_s), FormatRate(sweep->link_bytes_per_s),
                  sweep->ranks_per_node, FormatBytes(o.model.bytes));
    absl::FPrintF(out, "single device: %.3f ms/step\n", *step * 1e3);
    PrintCurves(*curves, *step, out);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ParseWorkerList(absl::string_view text) {
  absl::StatusOr<std::vector<int>> list = ParseList<int>(text, "worker count", [](absl::string_view w, int* v) {
    return absl::SimpleAtoi(w, v) && *v >= 1;
  });
  if (!list.ok()) return absl::InvalidArgumentError(absl::StrCat("--workers: ", list.status().message(), " (need counts >= 1)"));
  return list;
}

absl::StatusOr<std::vector<int>> ParseShardList(absl::string_view text, bool zero_allowed) {
  const int least = zero_allowed ? 0 : 1;
  absl::StatusOr<std::vector<int>> list = ParseList<int>(text, "shard count", [least](absl::string_view w, int* v) {
    if (w == "N" || w == "n") {
      *v = kShardsPerWorker;
      return true;
    }
    return absl::SimpleAtoi(w, v) && *v >= least;
  });
  if (!list.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shards: ", list.status().message(), " (need counts >= ", least, " or N)"));
  }
  return list;
}

absl::StatusOr<std::vector<double>> ParseSizeList(absl::string_view text) {
  absl::StatusOr<std::vector<double>> list = ParseList<double>(text, "size", [](absl::string_view w, double* v) {
    return absl::SimpleAtod(w, v) && *v > 0 && std::isfinite(*v);
  });
  if (!list.ok()) return absl::InvalidArgumentError(absl::StrCat("--layers_mb: ", list.status().message(), " (need MB > 0)"));
  return list;
}

absl::StatusOr<Calibration> ReadCalibrationFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("calibration file ", text.status().message()));
  absl::StatusOr<Calibration> c = CalibrationFromJson(*text);
  if (!c.ok()) {
    return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  }
  return c;
}

absl::Status WriteCalibrationFile(const Calibration& calibration, const std::string& path) {
  return WriteFileAtomically(path, CalibrationToJson(calibration));
}

}  // namespace ringside
