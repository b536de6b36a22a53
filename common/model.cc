#include "common/model.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/random.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

// Weight rows where the pieces of a split layer start, highest first, without 0: for
// each split offset in (offset, end), the row holding it (round_up: the first row
// wholly above it), at most `rows` (the bias alone). Shared by Forward and Backward.
std::vector<int> PieceStarts(const std::vector<int64_t>& split_at, int64_t offset,
                             int64_t end, int rows, int64_t row_len, bool round_up) {
  std::vector<int> starts;
  for (int64_t at : split_at) {
    if (at <= offset || at >= end) continue;
    const int64_t row = (at - offset + (round_up ? row_len - 1 : 0)) / row_len;
    starts.push_back(static_cast<int>(std::min<int64_t>(row, rows)));
  }
  std::sort(starts.begin(), starts.end(), std::greater<int>());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  if (!starts.empty() && starts.back() == 0) starts.pop_back();
  return starts;
}

absl::Status BuildMlp(absl::string_view widths_spec, Shape input, int num_classes,
                      std::vector<std::unique_ptr<Layer>>* layers) {
  std::vector<int> widths;
  for (absl::string_view part : absl::StrSplit(widths_spec, '-')) {
    int width = 0;
    if (!absl::SimpleAtoi(part, &width) || width <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model spec 'mlp:", widths_spec, "': width '", part,
                       "' is not a positive integer"));
    }
    widths.push_back(width);
  }
  if (widths.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model spec 'mlp:", widths_spec, "' needs at least two widths (input-output)"));
  }
  if (widths.front() != input.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model spec 'mlp:", widths_spec, "' takes ", widths.front(),
                     " inputs but the dataset's samples have ", input.size()));
  }
  if (widths.back() != num_classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("model spec 'mlp:", widths_spec, "' has ", widths.back(),
                     " outputs but the dataset has ", num_classes, " classes"));
  }
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    layers->push_back(NewLinear(widths[i], widths[i + 1]));
    if (i + 2 < widths.size()) layers->push_back(NewRelu({widths[i + 1], 1, 1}));
  }
  return absl::OkStatus();
}

absl::Status BuildLenet(Shape input, int num_classes,
                        std::vector<std::unique_ptr<Layer>>* layers) {
  // Each conv5x5 shrinks by 4, each pool halves: need >= 1 pixel at the end.
  if ((((input.h - 4) / 2) - 4) / 2 < 1 || (((input.w - 4) / 2) - 4) / 2 < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model 'cnn:lenet' needs inputs of at least 16x16, got ", input.h,
                     "x", input.w));
  }
  auto add = [layers](std::unique_ptr<Layer> layer) {
    Shape out = layer->output_shape();
    layers->push_back(std::move(layer));
    return out;
  };
  // conv -> relu -> pool is computed as conv -> pool -> relu: max and ReLU commute
  // (ReLU is monotonic), so outputs and gradients are identical, and the ReLU passes
  // run on a quarter of the data. (Where every input of a window is <= 0, both orders
  // give 0 and a zero gradient.)
  Shape s = input;
  if (s.c > 1) s = add(NewToChannelMajor(s));
  s = add(NewConv2d(s, 32, 5));
  s = add(NewMaxPool2x2(s));
  s = add(NewRelu(s));
  s = add(NewConv2d(s, 64, 5));
  s = add(NewMaxPool2x2(s));
  s = add(NewRelu(s));
  s = add(NewFlatten(s));
  s = add(NewLinear(s.c, 512));
  s = add(NewRelu(s));
  add(NewLinear(512, num_classes));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const std::string& spec,
                                                     Shape input, int num_classes,
                                                     Ops* ops) {
  if (input.size() <= 0 || num_classes < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model input must be non-empty and have >= 2 classes, got ", input.size(),
        " features and ", num_classes, " classes"));
  }
  std::unique_ptr<Model> model(new Model(spec, ops));
  absl::string_view rest = spec;
  if (absl::ConsumePrefix(&rest, "mlp:")) {
    RINGSIDE_RETURN_IF_ERROR(BuildMlp(rest, input, num_classes, &model->layers_));
  } else if (spec == "cnn:lenet") {
    RINGSIDE_RETURN_IF_ERROR(BuildLenet(input, num_classes, &model->layers_));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown model spec '", spec, "' (expected mlp:W0-W1-...-Wn or cnn:lenet)"));
  }
  RINGSIDE_RETURN_IF_ERROR(model->Finalize(input, num_classes));
  return model;
}

std::vector<ParamTensor> Model::Tensors() const {
  std::vector<ParamTensor> tensors;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = *layers_[i];
    const int64_t n = layer.num_params();
    if (n == 0) continue;
    const int64_t bias = layer.weight_rows();
    if (bias > 0 && bias < n) {
      tensors.push_back({{layer_offsets_[i], n - bias}, bias});
      tensors.push_back({{layer_offsets_[i] + n - bias, bias}, 0});
    } else {
      tensors.push_back({{layer_offsets_[i], n}, 0});
    }
  }
  return tensors;
}

std::vector<ParamRange> Model::TensorRanges() const {
  std::vector<ParamRange> ranges;
  for (const ParamTensor& t : Tensors()) ranges.push_back(t.range);
  return ranges;
}

absl::Status Model::Finalize(Shape input, int num_classes) {
  num_classes_ = num_classes;
  for (const auto& layer : layers_) {
    if (first_param_layer_ < 0 && layer->num_params() > 0) {
      first_param_layer_ = static_cast<int>(layer_offsets_.size());
    }
    layer_offsets_.push_back(num_params_);
    if (layer->num_params() > 0) {
      layer_ranges_.push_back({num_params_, layer->num_params()});
    }
    num_params_ += layer->num_params();
  }
  RINGSIDE_ASSIGN_OR_RETURN(params_, DeviceArray<float>::Create(ops_, num_params_));
  RINGSIDE_ASSIGN_OR_RETURN(grads_, DeviceArray<float>::Create(ops_, num_params_));
  ops_->Fill(grads_.data(), num_params_, 0.0f);
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->BindParams(params_.data() + layer_offsets_[i],
                           grads_.data() + layer_offsets_[i]);
  }
  act_.assign(layers_.size() + 1, nullptr);
  dact_.assign(layers_.size() + 1, nullptr);
  return InitParams(0);
}

absl::Status Model::InitParams(uint64_t seed) {
  // Each layer draws from its own stream, so changing one layer's size does not
  // shift the others' initial values.
  std::vector<float> host(num_params_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    Rng rng(Mix64(seed) ^ Mix64(i + 1));
    layers_[i]->InitParams(&rng, host.data() + layer_offsets_[i]);
  }
  return ops_->CopyToDevice(params_.data(), host.data(), host.size() * sizeof(float));
}

absl::Status Model::Reserve(int batch) {
  if (batch <= reserved_batch_) return absl::OkStatus();
  storage_.clear();  // Every pointer in act_ / dact_ is reassigned below.
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int64_t n = batch * layers_[i]->output_shape().size();
    if (i > 0 && layers_[i]->in_place()) {
      act_[i + 1] = act_[i];
      dact_[i + 1] = dact_[i];
    } else {
      RINGSIDE_ASSIGN_OR_RETURN(DeviceArray<float> act, DeviceArray<float>::Create(ops_, n));
      RINGSIDE_ASSIGN_OR_RETURN(DeviceArray<float> dact, DeviceArray<float>::Create(ops_, n));
      act_[i + 1] = act.data();
      dact_[i + 1] = dact.data();
      storage_.push_back(std::move(act));
      storage_.push_back(std::move(dact));
    }
    RINGSIDE_RETURN_IF_ERROR(layers_[i]->Reserve(ops_, batch));
  }
  RINGSIDE_ASSIGN_OR_RETURN(
      probs_, DeviceArray<float>::Create(ops_, static_cast<int64_t>(batch) * num_classes_));
  reserved_batch_ = batch;
  return absl::OkStatus();
}

absl::StatusOr<ForwardResult> Model::Forward(const float* x, const int32_t* labels,
                                             int batch, const ForwardHooks& hooks) {
  if (batch < 1) return absl::InvalidArgumentError("forward needs batch >= 1");
  RINGSIDE_RETURN_IF_ERROR(Reserve(batch));
  const float* in = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (hooks.params_needed && layers_[i]->num_params() > 0) {
      RINGSIDE_RETURN_IF_ERROR(ForwardParams(static_cast<int>(i), in, batch, hooks));
    } else {
      layers_[i]->Forward(ops_, in, act_[i + 1], batch);
    }
    in = act_[i + 1];
  }
  ForwardResult result;
  ops_->SoftmaxXentForward(in, labels, batch, num_classes_, probs_.data(),
                           &result.loss_sum, &result.correct);
  RINGSIDE_RETURN_IF_ERROR(ops_->Synchronize());
  last_batch_ = batch;
  last_input_ = x;
  last_labels_ = labels;
  return result;
}

absl::Status Model::Backward(float loss_scale, const BackwardHooks& hooks, bool accumulate) {
  if (last_batch_ == 0) return absl::FailedPreconditionError("backward before forward");
  const int batch = last_batch_;
  const int last = static_cast<int>(layers_.size()) - 1;
  // d(loss)/d(logits) goes straight into the last layer's output gradient.
  ops_->SoftmaxXentBackward(probs_.data(), last_labels_, batch, num_classes_, loss_scale,
                            dact_[last + 1]);
  for (int i = last; i >= 0; --i) {
    const float* in = i == 0 ? last_input_ : act_[i];
    // Input gradients in front of the first layer with parameters are never needed.
    float* din = i <= first_param_layer_ ? nullptr : dact_[i];
    const bool has_params = layers_[i]->num_params() > 0;
    const ParamRange range{layer_offsets_[i], layers_[i]->num_params()};
    if (has_params) {
      RINGSIDE_RETURN_IF_ERROR(
          BackwardParams(i, in, batch, accumulate, hooks, /*free_now=*/din == nullptr));
    }
    if (din != nullptr) layers_[i]->BackwardInput(ops_, in, act_[i + 1], dact_[i + 1], din, batch);
    if (has_params && din != nullptr && hooks.params_free) {
      // din's reads of the parameters must be done before anyone changes them (in
      // stream order, for device-ordered hooks).
      if (!hooks.device_ordered) RINGSIDE_RETURN_IF_ERROR(ops_->Synchronize());
      hooks.params_free(range);
    }
  }
  last_batch_ = 0;
  return hooks.device_ordered ? absl::OkStatus() : ops_->Synchronize();
}

absl::Status Model::BackwardParams(int i, const float* in, int batch, bool accumulate,
                                   const BackwardHooks& hooks, bool free_now) {
  Layer& layer = *layers_[i];
  const float* dout = dact_[i + 1];
  const int64_t offset = layer_offsets_[i];
  const int64_t size = layer.num_params();
  const int rows = layer.weight_rows();
  // Announces [lo, top): its gradients are final (and, with free_now, its parameters
  // free), then lowers top to lo. Announced before din is computed, so the gradients
  // travel meanwhile; they must be complete in memory before anyone reads them.
  int64_t top = offset + size;
  auto announce = [&](int64_t lo) -> absl::Status {
    const bool free = free_now && hooks.params_free;
    if ((hooks.grads_ready || free) && !hooks.device_ordered) {
      RINGSIDE_RETURN_IF_ERROR(ops_->Synchronize());
    }
    const ParamRange piece{lo, top - lo};
    if (hooks.grads_ready) hooks.grads_ready(piece);
    if (free) hooks.params_free(piece);
    top = lo;
    return absl::OkStatus();
  };
  // The weight row each piece starts at, highest first: the row holding each split
  // offset inside the weight, or `rows` (the bias alone) for one inside the bias.
  const int64_t row_len = rows > 0 ? (size - rows) / rows : 0;
  std::vector<int> starts;
  if (rows > 0 && hooks.grads_ready) {
    starts = PieceStarts(hooks.split_at, offset, offset + size, rows, row_len,
                         /*round_up=*/false);
  }
  if (starts.empty()) {
    layer.BackwardParams(ops_, in, dout, batch, accumulate);
    return announce(offset);
  }
  layer.BackwardBias(ops_, dout, batch, accumulate);
  int hi = rows;
  for (int lo : starts) {
    if (lo < hi) layer.BackwardWeightRows(ops_, in, dout, batch, accumulate, lo, hi);
    RINGSIDE_RETURN_IF_ERROR(announce(offset + lo * row_len));
    hi = lo;
  }
  layer.BackwardWeightRows(ops_, in, dout, batch, accumulate, 0, hi);
  return announce(offset);
}

absl::Status Model::ForwardParams(int i, const float* in, int batch,
                                  const ForwardHooks& hooks) {
  Layer& layer = *layers_[i];
  float* out = act_[i + 1];
  const int64_t offset = layer_offsets_[i];
  const int64_t size = layer.num_params();
  const int rows = layer.weight_rows();
  const int64_t row_len = rows > 0 ? (size - rows) / rows : 0;
  // Where pieces start, highest first: the first row wholly above each split offset
  // inside the weight (a row that straddles one goes with the rows below it, whose
  // piece waits for both sides).
  std::vector<int> starts;
  if (rows > 0) {
    starts = PieceStarts(hooks.split_at, offset, offset + rows * row_len, rows, row_len,
                         /*round_up=*/true);
    if (!starts.empty() && starts.front() == rows) starts.erase(starts.begin());
  }
  if (starts.empty()) {
    RINGSIDE_RETURN_IF_ERROR(hooks.params_needed(ParamRange{offset, size}));
    layer.Forward(ops_, in, out, batch);
    return absl::OkStatus();
  }
  RINGSIDE_RETURN_IF_ERROR(hooks.params_needed(ParamRange{offset + rows * row_len, rows}));
  layer.ForwardBegin(ops_, in, out, batch);
  int hi = rows;
  for (int lo : starts) {
    RINGSIDE_RETURN_IF_ERROR(
        hooks.params_needed(ParamRange{offset + lo * row_len, (hi - lo) * row_len}));
    layer.ForwardRows(ops_, in, out, batch, lo, hi);
    hi = lo;
  }
  RINGSIDE_RETURN_IF_ERROR(hooks.params_needed(ParamRange{offset, hi * row_len}));
  layer.ForwardRows(ops_, in, out, batch, 0, hi);
  return absl::OkStatus();
}

double Model::GemmFlops(int batch) const {
  double flops = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    flops += layers_[i]->GemmFlops(batch, /*need_din=*/static_cast<int>(i) > first_param_layer_);
  }
  return flops;
}

}  // namespace ringside
