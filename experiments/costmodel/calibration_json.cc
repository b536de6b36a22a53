#include "experiments/costmodel/calibration_json.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "experiments/costmodel/calibration.pb.h"
#include "google/protobuf/util/json_util.h"

namespace ringside {
namespace {

PathCalibrationMessage ToMessage(const PathCalibration& p) {
  PathCalibrationMessage m;
  m.set_alpha_s(p.alpha_s);
  m.set_bytes_per_s(p.bytes_per_s);
  return m;
}

// InvalidArgument naming `name` if a field of a required path is missing.
absl::StatusOr<PathCalibration> FromMessage(const PathCalibrationMessage& m, const char* name,
                                            bool required) {
  if (required && (!m.has_alpha_s() || !m.has_bytes_per_s())) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration JSON: \"", name, "\" needs alpha_s and bytes_per_s"));
  }
  return PathCalibration{m.alpha_s(), m.bytes_per_s()};
}

// The repeats, spreads and sweep extents of `m`, checked.
absl::StatusOr<CalibrationMeasurement> MeasurementFromMessage(const CalibrationMessage& m) {
  CalibrationMeasurement out;
  out.repeats = m.repeats();
  out.push_pull_max_bytes = m.push_pull_max_bytes();
  out.allreduce_max_bytes = m.allreduce_max_bytes();
  out.busy_cpus_elsewhere = m.busy_cpus_elsewhere();
  if (out.repeats < 0) return absl::InvalidArgumentError("calibration JSON: \"repeats\" must be >= 0");
  for (double v : {out.push_pull_max_bytes, out.allreduce_max_bytes, out.busy_cpus_elsewhere}) {
    if (!std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError(
          "calibration JSON: \"push_pull_max_bytes\", \"allreduce_max_bytes\" and "
          "\"busy_cpus_elsewhere\" must be finite and >= 0");
    }
  }
  for (const ConstantSpreadMessage& sm : m.spreads()) {
    if (sm.name().empty()) return absl::InvalidArgumentError("calibration JSON: a spread without a \"name\"");
    RINGSIDE_ASSIGN_OR_RETURN(
        ConstantSpread spread,
        SummarizeRepeats(sm.name(), std::vector<double>(sm.values().begin(), sm.values().end())));
    out.spreads.push_back(std::move(spread));
  }
  return out;
}

}  // namespace

std::string CalibrationToJson(const Calibration& c) {
  return CalibrationToJson(c, CalibrationMeasurement());
}

std::string CalibrationToJson(const Calibration& c, const CalibrationMeasurement& measurement) {
  CalibrationMessage m;
  m.set_compute_s(c.compute_s);
  m.set_backward_s(c.backward_s);
  m.set_update_s_per_byte(c.update_s_per_byte);
  m.set_reduce_s_per_byte(c.reduce_s_per_byte);
  if (c.allreduce_cpu_s_per_byte > 0) m.set_allreduce_cpu_s_per_byte(c.allreduce_cpu_s_per_byte);
  if (c.push_pull_cpu_s_per_byte > 0) m.set_push_pull_cpu_s_per_byte(c.push_pull_cpu_s_per_byte);
  if (c.push_pull_tcp_cpu_s_per_byte > 0) m.set_push_pull_tcp_cpu_s_per_byte(c.push_pull_tcp_cpu_s_per_byte);
  if (c.ps_cpu_link_bytes_per_s > 0) m.set_ps_cpu_link_bytes_per_s(c.ps_cpu_link_bytes_per_s);
  if (c.fp16_codec_s_per_value > 0) m.set_fp16_codec_s_per_value(c.fp16_codec_s_per_value);
  if (c.bf16_codec_s_per_value > 0) m.set_bf16_codec_s_per_value(c.bf16_codec_s_per_value);
  if (c.ps_join_sigma > 0) m.set_ps_join_sigma(c.ps_join_sigma);
  if (c.topk_codec_s_per_value > 0) m.set_topk_codec_s_per_value(c.topk_codec_s_per_value);
  if (c.powersgd_codec_s_per_flop > 0) m.set_powersgd_codec_s_per_flop(c.powersgd_codec_s_per_flop);
  m.set_model_bytes(c.model_bytes);
  m.set_push_pull_per_call_s(c.push_pull_per_call_s);
  *m.mutable_push_pull() = ToMessage(c.push_pull);
  if (c.push_pull_tcp.bytes_per_s > 0) *m.mutable_push_pull_tcp() = ToMessage(c.push_pull_tcp);
  if (c.raw_tcp_bytes_per_s > 0) m.set_raw_tcp_bytes_per_s(c.raw_tcp_bytes_per_s);
  *m.mutable_allreduce() = ToMessage(c.allreduce);
  *m.mutable_halving_doubling() = ToMessage(c.halving_doubling);
  // Unknown provenance stays absent, as in the files written before it was recorded.
  if (!c.model.empty()) m.set_model(c.model);
  if (c.batch > 0) m.set_batch(c.batch);
  if (c.threads > 0) m.set_threads(c.threads);
  if (c.node_cpus > 0) m.set_node_cpus(c.node_cpus);
  if (measurement.repeats > 0) m.set_repeats(measurement.repeats);
  for (const ConstantSpread& s : measurement.spreads) {
    ConstantSpreadMessage* sm = m.add_spreads();
    sm->set_name(s.name);
    for (double v : s.values) sm->add_values(v);
    sm->set_median(s.median);
    sm->set_spread(s.spread);
  }
  if (measurement.push_pull_max_bytes > 0) m.set_push_pull_max_bytes(measurement.push_pull_max_bytes);
  if (measurement.allreduce_max_bytes > 0) m.set_allreduce_max_bytes(measurement.allreduce_max_bytes);
  if (measurement.repeats > 0) m.set_busy_cpus_elsewhere(measurement.busy_cpus_elsewhere);
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  // Cannot fail for a message of doubles (non-finite values print as strings).
  (void)google::protobuf::util::MessageToJsonString(m, &json, options);
  return json;
}

absl::StatusOr<Calibration> CalibrationFromJson(const std::string& json) {
  CalibrationMeasurement ignored;
  return CalibrationFromJson(json, &ignored);
}

absl::StatusOr<Calibration> CalibrationFromJson(const std::string& json,
                                                CalibrationMeasurement* measurement) {
  CalibrationMessage m;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  if (auto s = google::protobuf::util::JsonStringToMessage(json, &m, options); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("calibration JSON: ", s.message().as_string()));
  }
  if (!m.has_compute_s()) return absl::InvalidArgumentError("calibration JSON: missing \"compute_s\"");
  if (!m.has_push_pull()) return absl::InvalidArgumentError("calibration JSON: missing \"push_pull\"");
  if (!m.has_allreduce()) return absl::InvalidArgumentError("calibration JSON: missing \"allreduce\"");
  Calibration c;
  c.compute_s = m.compute_s();
  c.backward_s = m.backward_s();
  c.update_s_per_byte = m.update_s_per_byte();
  c.reduce_s_per_byte = m.reduce_s_per_byte();
  c.allreduce_cpu_s_per_byte = m.allreduce_cpu_s_per_byte();
  c.push_pull_cpu_s_per_byte = m.push_pull_cpu_s_per_byte();
  c.push_pull_tcp_cpu_s_per_byte = m.push_pull_tcp_cpu_s_per_byte();
  c.ps_cpu_link_bytes_per_s = m.ps_cpu_link_bytes_per_s();
  c.fp16_codec_s_per_value = m.fp16_codec_s_per_value();
  c.bf16_codec_s_per_value = m.bf16_codec_s_per_value();
  c.ps_join_sigma = m.ps_join_sigma();
  c.topk_codec_s_per_value = m.topk_codec_s_per_value();
  c.powersgd_codec_s_per_flop = m.powersgd_codec_s_per_flop();
  c.raw_tcp_bytes_per_s = m.raw_tcp_bytes_per_s();
  c.model_bytes = m.model_bytes();
  c.push_pull_per_call_s = m.push_pull_per_call_s();
  absl::StatusOr<PathCalibration> path = FromMessage(m.push_pull(), "push_pull", true);
  if (!path.ok()) return path.status();
  c.push_pull = *path;
  path = FromMessage(m.push_pull_tcp(), "push_pull_tcp", false);
  if (!path.ok()) return path.status();
  c.push_pull_tcp = *path;
  path = FromMessage(m.allreduce(), "allreduce", true);
  if (!path.ok()) return path.status();
  c.allreduce = *path;
  path = FromMessage(m.halving_doubling(), "halving_doubling", false);
  c.halving_doubling = *path;
  c.model = m.model();
  c.batch = m.batch();
  c.threads = m.threads();
  c.node_cpus = m.node_cpus();
  if (c.batch < 0 || c.threads < 0) {
    return absl::InvalidArgumentError("calibration JSON: \"batch\" and \"threads\" must be >= 0");
  }
  if (absl::Status s = ValidateCalibration(c); !s.ok()) return s;
  RINGSIDE_ASSIGN_OR_RETURN(*measurement, MeasurementFromMessage(m));
  return c;
}

}  // namespace ringside
