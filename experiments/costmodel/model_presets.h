// Published models `ringside simulate --model=NAME` knows by name: their parameter
// tensors in layer order (fp32, 4 bytes a parameter) and, where a source gives one, the
// forward + backward FLOPs of one sample. Per-tensor sizes matter: DDP's buckets are
// contiguous runs of layers, and a PS that places whole tensors is bounded by the
// largest. The shapes are generated from each architecture's published definition
// (model_presets.cc names the sources), and tests pin the published totals.
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_MODEL_PRESETS_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_MODEL_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside {

struct LayerShape {
  std::string name;   // "fc6", "layer3.2.conv2", "encoder.7.attention.query".
  double params = 0;  // Parameters (weights and biases) of the tensor(s).
};

struct ModelPreset {
  std::string name;                // "resnet-50", "vgg-16", "bert-large".
  std::string description;         // One line: "ResNet-50 (He et al., CVPR 2016), ...".
  std::vector<LayerShape> layers;  // Layer order (input first).
  // Forward + backward FLOPs of one sample (a multiply-add is 2 FLOPs, as device_tflops
  // counts them; backward about twice forward); 0: no published count.
  double flops_per_sample = 0;
  std::string flops_source;        // Where that count comes from.
};

// Bytes per fp32 parameter.
inline constexpr double kBytesPerParam = 4;

// The presets' names, sorted.
std::vector<std::string> ModelPresetNames();

// The preset called `name`; NotFound, one line listing the presets, for any other.
absl::StatusOr<ModelPreset> FindModelPreset(absl::string_view name);

// Total parameters of a preset.
double PresetParams(const ModelPreset& preset);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_MODEL_PRESETS_H_
