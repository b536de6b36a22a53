#include "experiments/cluster/profile.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/cluster/cluster.pb.h"
#include "experiments/cluster/presets.h"
#include "experiments/netem/bandwidth.h"
#include "experiments/sys/files.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace ringside {
namespace {

// Collects the first text-format parse error as one line.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (text_.empty()) text_ = absl::StrFormat("line %d column %d: %s", line + 1, column + 1, message);
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

absl::Status Bad(const std::string& origin, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("cluster profile ", origin, ": ", what));
}

// A path's message: `bandwidth` required, latency_us >= 0.
absl::StatusOr<PathProfile> ResolvePath(const LinkProfileMessage& m, const std::string& field,
                                        const std::string& origin) {
  if (!m.has_bandwidth()) return Bad(origin, absl::StrCat(field, ".bandwidth is missing"));
  absl::StatusOr<double> rate = ParseBandwidth(m.bandwidth());
  if (!rate.ok()) return Bad(origin, absl::StrCat(field, ".", rate.status().message()));
  if (m.latency_us() < 0 || !std::isfinite(m.latency_us())) {
    return Bad(origin, absl::StrCat(field, ".latency_us must be >= 0 (got ", m.latency_us(), ")"));
  }
  return PathProfile{*rate, m.latency_us() * 1e-6};
}

}  // namespace

absl::StatusOr<ClusterProfile> ParseClusterProfile(absl::string_view text, const std::string& origin) {
  ClusterProfileMessage m;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &m)) return Bad(origin, errors.text());
  ClusterProfile p;
  if (!m.has_name() || m.name().empty()) return Bad(origin, "name is missing");
  p.name = m.name();
  p.source = m.source();
  p.device = m.device();
  if (m.has_device_tflops()) {
    if (!(m.device_tflops() > 0) || !std::isfinite(m.device_tflops())) {
      return Bad(origin, absl::StrCat("device_tflops must be > 0 (got ", m.device_tflops(), ")"));
    }
    p.device_flops = m.device_tflops() * 1e12;
  }
  for (int i = 0; i < m.step_size(); ++i) {
    const DeviceStepMessage& s = m.step(i);
    const std::string at = absl::StrCat("step[", i, "]");
    if (!s.has_model() || s.model().empty()) return Bad(origin, absl::StrCat(at, ".model is missing"));
    if (!s.has_batch()) return Bad(origin, absl::StrCat(at, ".batch is missing"));
    if (s.batch() < 1) return Bad(origin, absl::StrCat(at, ".batch must be >= 1 (got ", s.batch(), ")"));
    if (!s.has_step_ms()) return Bad(origin, absl::StrCat(at, ".step_ms is missing"));
    if (!(s.step_ms() > 0) || !std::isfinite(s.step_ms())) {
      return Bad(origin, absl::StrCat(at, ".step_ms must be > 0 (got ", s.step_ms(), ")"));
    }
    p.steps.push_back(DeviceStep{s.model(), s.batch(), s.step_ms() / 1e3, s.source()});
  }
  if (m.has_devices_per_node() && m.devices_per_node() < 1) {
    return Bad(origin, absl::StrCat("devices_per_node must be >= 1 (got ", m.devices_per_node(), ")"));
  }
  p.devices_per_node = m.has_devices_per_node() ? m.devices_per_node() : 1;
  if (!m.has_nic()) return Bad(origin, "nic is missing");
  absl::StatusOr<PathProfile> nic = ResolvePath(m.nic(), "nic", origin);
  if (!nic.ok()) return nic.status();
  p.nic = *nic;
  if (p.devices_per_node > 1 || m.has_intra_node()) {
    if (!m.has_intra_node()) return Bad(origin, "intra_node is missing (devices_per_node > 1)");
    absl::StatusOr<PathProfile> intra = ResolvePath(m.intra_node(), "intra_node", origin);
    if (!intra.ok()) return intra.status();
    p.intra_node = *intra;
  }
  return p;
}

std::vector<std::string> ClusterPresetNames() {
  std::vector<std::string> names;
  for (const ClusterPresetFile& f : ClusterPresetFiles()) names.emplace_back(f.name);
  std::sort(names.begin(), names.end());
  return names;
}

absl::string_view ClusterPresetText(absl::string_view name) {
  for (const ClusterPresetFile& f : ClusterPresetFiles()) {
    if (f.name == name) return f.text;
  }
  return "";
}

absl::StatusOr<ClusterProfile> LoadClusterProfile(const std::string& name_or_path) {
  if (const absl::string_view preset = ClusterPresetText(name_or_path); !preset.empty()) {
    return ParseClusterProfile(preset, absl::StrCat("preset ", name_or_path));
  }
  absl::StatusOr<std::string> text = ReadFile(name_or_path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("cluster \"", name_or_path, "\" is neither a preset (",
                                            absl::StrJoin(ClusterPresetNames(), ", "),
                                            ") nor a readable file"));
  }
  return ParseClusterProfile(*text, name_or_path);
}

absl::StatusOr<double> TargetStepSeconds(const ClusterProfile& profile, const std::string& model, int batch,
                                         double gemm_flops) {
  for (const DeviceStep& s : profile.steps) {
    if (s.model == model && s.batch == batch) return s.step_s;
  }
  if (profile.device_flops > 0 && gemm_flops > 0) return gemm_flops / profile.device_flops;
  return absl::FailedPreconditionError(absl::StrFormat(
      "cluster profile %s has no step time for %s at batch %d%s", profile.name, model, batch,
      profile.device_flops > 0 ? " and its FLOP count is unknown" : " and no device_tflops to derive one"));
}

std::string DescribeCluster(const ClusterProfile& p) {
  std::string out = p.name + ": ";
  const std::string device = p.device.empty() ? std::string("device") : p.device;
  absl::StrAppend(&out, p.devices_per_node, " x ", device, " per node");
  absl::StrAppend(&out, ", NIC ", FormatBandwidth(p.nic.bytes_per_s));
  if (p.nic.latency_s > 0) absl::StrAppend(&out, absl::StrFormat(" (latency %g us)", p.nic.latency_s * 1e6));
  if (p.devices_per_node > 1) {
    absl::StrAppend(&out, ", intra-node ", FormatBandwidth(p.intra_node.bytes_per_s));
  }
  return out;
}

}  // namespace ringside
