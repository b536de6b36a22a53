#include "experiments/costmodel/model_presets.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside {
namespace {

// A multiply-add is 2 FLOPs; backward costs about twice forward (the gradients with
// respect to the inputs and to the weights: one GEMM each per forward GEMM).
constexpr double kFlopsPerMultiplyAdd = 2;
constexpr double kForwardPlusBackward = 3;

// ResNet-50 (K. He, X. Zhang, S. Ren, J. Sun, "Deep Residual Learning for Image
// Recognition", CVPR 2016, Table 1: bottleneck stages of 3, 4, 6, 3 blocks of widths
// 64, 128, 256, 512, expansion 4), as torchvision's resnet50 defines it: convolutions
// without bias, each followed by batch norm (weight and bias: 2 x channels), a
// projection (1x1 convolution + batch norm) on each stage's first block, fc 2048 x 1000.
// 25,557,032 parameters (torchvision's model table: 25.6M).
// Forward at 224 x 224: 4.09 G multiply-adds (torchvision's table, "GFLOPS 4.09",
// which counts multiply-adds; He et al. give 3.8e9).
ModelPreset ResNet50() {
  ModelPreset p;
  p.name = "resnet-50";
  p.description = "ResNet-50 (He et al., CVPR 2016; torchvision resnet50), 224x224 images";
  p.layers.push_back({"conv1+bn1", 7 * 7 * 3 * 64 + 2 * 64});
  int in = 64;
  const std::pair<int, int> stages[] = {{3, 64}, {4, 128}, {6, 256}, {3, 512}};
  for (int stage = 0; stage < 4; ++stage) {
    const auto [blocks, w] = stages[stage];
    for (int b = 0; b < blocks; ++b) {
      const std::string at = absl::StrCat("layer", stage + 1, ".", b, ".");
      p.layers.push_back({at + "conv1+bn1", double(in) * w + 2.0 * w});
      p.layers.push_back({at + "conv2+bn2", 9.0 * w * w + 2.0 * w});
      p.layers.push_back({at + "conv3+bn3", double(w) * 4 * w + 8.0 * w});
      if (b == 0) p.layers.push_back({at + "downsample", double(in) * 4 * w + 8.0 * w});
      in = 4 * w;
    }
  }
  p.layers.push_back({"fc", 2048.0 * 1000 + 1000});
  p.flops_per_sample = 4.09e9 * kFlopsPerMultiplyAdd * kForwardPlusBackward;
  p.flops_source =
      "4.09 G multiply-adds forward at 224x224 (torchvision model table), x 2 FLOPs x 3 "
      "(forward + backward)";
  return p;
}

// VGG-16 (K. Simonyan, A. Zisserman, "Very Deep Convolutional Networks for Large-Scale
// Image Recognition", ICLR 2015, configuration D): thirteen 3x3 convolutions with bias,
// fc6 25088 x 4096 (102.8M parameters, the largest tensor), fc7 4096 x 4096 (16.8M),
// fc8 4096 x 1000 (4.1M). 138,357,544 parameters (the paper's 138M).
// Forward at 224 x 224: 15.47 G multiply-adds (torchvision's model table).
ModelPreset Vgg16() {
  ModelPreset p;
  p.name = "vgg-16";
  p.description = "VGG-16 (Simonyan & Zisserman, ICLR 2015, configuration D), 224x224 images";
  const int convs[] = {64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512};
  int in = 3;
  int i = 0;
  for (int out : convs) {
    p.layers.push_back({absl::StrCat("conv", ++i), 9.0 * in * out + out});
    in = out;
  }
  p.layers.push_back({"fc6", 25088.0 * 4096 + 4096});
  p.layers.push_back({"fc7", 4096.0 * 4096 + 4096});
  p.layers.push_back({"fc8", 4096.0 * 1000 + 1000});
  p.flops_per_sample = 15.47e9 * kFlopsPerMultiplyAdd * kForwardPlusBackward;
  p.flops_source =
      "15.47 G multiply-adds forward at 224x224 (torchvision model table), x 2 FLOPs x 3 "
      "(forward + backward)";
  return p;
}

// BERT-large (J. Devlin, M.-W. Chang, K. Lee, K. Toutanova, "BERT: Pre-training of Deep
// Bidirectional Transformers for Language Understanding", NAACL 2019: L = 24, H = 1024,
// A = 16, "340M" parameters), as Hugging Face's BertModel defines it: embeddings (word
// 30522 x 1024 = 31.3M, position 512 x 1024, token type 2 x 1024, layer norm), 24
// encoder layers of 12,596,224 parameters each (query, key, value, output 1024 x 1024
// + bias; feed-forward 1024 x 4096 and 4096 x 1024 + biases; two layer norms), the
// pooler 1024 x 1024 + bias. 335,141,888 parameters.
// FLOPs: Kaplan et al., "Scaling Laws for Neural Language Models", 2020, Table 1:
// forward 2 N + 2 n_layer n_ctx d_model per token (N the 302.3M non-embedding
// parameters), at BERT's phase-1 pre-training length of 128 tokens; x 3.
ModelPreset BertLarge() {
  constexpr double kHidden = 1024, kFeedForward = 4096, kVocab = 30522, kPositions = 512;
  constexpr int kLayers = 24, kSequence = 128;
  ModelPreset p;
  p.name = "bert-large";
  p.description = "BERT-large (Devlin et al., NAACL 2019; Hugging Face BertModel), 128 tokens a sample";
  p.layers.push_back({"embeddings.word", kVocab * kHidden});
  p.layers.push_back({"embeddings.position+type+norm", kPositions * kHidden + 2 * kHidden + 2 * kHidden});
  double encoder = 0;
  for (int l = 0; l < kLayers; ++l) {
    const std::string at = absl::StrCat("encoder.", l, ".");
    for (const char* name : {"query", "key", "value", "output"}) {
      p.layers.push_back({at + "attention." + name, kHidden * kHidden + kHidden});
    }
    p.layers.push_back({at + "attention.norm", 2 * kHidden});
    p.layers.push_back({at + "intermediate", kHidden * kFeedForward + kFeedForward});
    p.layers.push_back({at + "output", kFeedForward * kHidden + kHidden});
    p.layers.push_back({at + "output.norm", 2 * kHidden});
  }
  for (const LayerShape& l : p.layers) {
    if (l.name.rfind("encoder.", 0) == 0) encoder += l.params;
  }
  p.layers.push_back({"pooler", kHidden * kHidden + kHidden});
  const double forward_per_token = 2 * encoder + 2.0 * kLayers * kSequence * kHidden;
  p.flops_per_sample = forward_per_token * kSequence * kForwardPlusBackward;
  p.flops_source =
      "forward 2 N + 2 n_layer n_ctx d_model per token (Kaplan et al. 2020, N = 302.3M "
      "encoder parameters) x 128 tokens, x 3 (forward + backward)";
  return p;
}

const std::vector<std::function<ModelPreset()>>& Makers() {
  static const auto* kMakers = new std::vector<std::function<ModelPreset()>>{BertLarge, ResNet50, Vgg16};
  return *kMakers;
}

}  // namespace

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const auto& make : Makers()) names.push_back(make().name);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<ModelPreset> FindModelPreset(absl::string_view name) {
  for (const auto& make : Makers()) {
    ModelPreset p = make();
    if (p.name == name) return p;
  }
  return absl::NotFoundError(absl::StrCat("unknown model preset '", name, "' (presets: ",
                                          absl::StrJoin(ModelPresetNames(), ", "),
                                          "; or a ringside spec such as mlp:784-256-10, cnn:lenet)"));
}

double PresetParams(const ModelPreset& preset) {
  double total = 0;
  for (const LayerShape& l : preset.layers) total += l.params;
  return total;
}

}  // namespace ringside
