#include "experiments/costmodel/calibration_json.h"

#include "absl/strings/str_cat.h"
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

}  // namespace

std::string CalibrationToJson(const Calibration& c) {
  CalibrationMessage m;
  m.set_compute_s(c.compute_s);
  m.set_backward_s(c.backward_s);
  m.set_update_s_per_byte(c.update_s_per_byte);
  m.set_reduce_s_per_byte(c.reduce_s_per_byte);
  m.set_model_bytes(c.model_bytes);
  m.set_push_pull_per_call_s(c.push_pull_per_call_s);
  *m.mutable_push_pull() = ToMessage(c.push_pull);
  *m.mutable_allreduce() = ToMessage(c.allreduce);
  *m.mutable_halving_doubling() = ToMessage(c.halving_doubling);
  // Unknown provenance stays absent, as in the files written before it was recorded.
  if (!c.model.empty()) m.set_model(c.model);
  if (c.batch > 0) m.set_batch(c.batch);
  if (c.threads > 0) m.set_threads(c.threads);
  if (c.node_cpus > 0) m.set_node_cpus(c.node_cpus);
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
  c.model_bytes = m.model_bytes();
  c.push_pull_per_call_s = m.push_pull_per_call_s();
  absl::StatusOr<PathCalibration> path = FromMessage(m.push_pull(), "push_pull", true);
  if (!path.ok()) return path.status();
  c.push_pull = *path;
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
  return c;
}

}  // namespace ringside
