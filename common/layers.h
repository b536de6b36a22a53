// The layers models are built from. Each layer is written once against the Ops
// interface, so the same code runs on every backend.
//
// Layout: a layer sees activations of `batch` samples. Linear layers use [B, features];
// convolution, ReLU after a convolution and max-pool use [C, B, H, W] (see ops.h).
// Transpose layers switch between the two.
#ifndef RINGSIDE_COMMON_LAYERS_H_
#define RINGSIDE_COMMON_LAYERS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/ops.h"
#include "common/random.h"

namespace ringside {

// Per-sample activation shape [channels, height, width]; flat features are [n, 1, 1].
struct Shape {
  int c = 0;
  int h = 1;
  int w = 1;
  int64_t size() const { return static_cast<int64_t>(c) * h * w; }
};

// A layer of a model. Not thread-safe. Parameters live in the model's flat buffers:
// BindParams hands the layer views of num_params() floats into them.
class Layer {
 public:
  virtual ~Layer() = default;

  virtual std::string name() const = 0;
  virtual Shape input_shape() const = 0;
  virtual Shape output_shape() const = 0;
  virtual int64_t num_params() const { return 0; }
  // True if Forward may write `out` over `in` and Backward `din` over `dout` (the
  // model then gives both the same buffer). The layer before must not need its own
  // output in its Backward.
  virtual bool in_place() const { return false; }

  // Views into the model's parameter and gradient buffers (backend memory).
  void BindParams(float* params, float* grads) {
    params_ = params;
    grads_ = grads;
  }
  // Writes the initial parameters (num_params() floats) into host memory `out`.
  virtual void InitParams(Rng* rng, float* out) const {}
  // Sizes scratch memory (im2col columns, argmax) for up to `batch` samples.
  virtual absl::Status Reserve(Ops* ops, int batch) { return absl::OkStatus(); }

  // out [batch, output_shape] = f(in [batch, input_shape]), in the layer's layout.
  virtual void Forward(Ops* ops, const float* in, float* out, int batch) = 0;
  // Forward in pieces, for a layer with weight_rows() > 0, whose weight rows are its
  // output features (or channels), so that a caller can start on the rows whose
  // parameters are already current: ForwardBegin, then ForwardRows over any split of
  // [0, weight_rows()), in any order, write what Forward writes. ForwardBegin reads
  // the bias (and fills scratch such as im2col columns); ForwardRows reads only weight
  // rows [row_begin, row_end).
  virtual void ForwardBegin(Ops* ops, const float* in, float* out, int batch) {}
  virtual void ForwardRows(Ops* ops, const float* in, float* out, int batch, int row_begin,
                           int row_end) {}
  // Backward, in two halves so that a layer's parameter gradients can be handed on
  // (pushed, all-reduced) while the gradient w.r.t. its input is still being computed.
  // `in` and `out` are the values of the last Forward; dout is the gradient of the
  // loss w.r.t. out.
  // 1. Writes the parameter gradients (adding to them when `accumulate`, overwriting
  //    otherwise). Layers without parameters do nothing. The default runs the pieces
  //    below over all rows (nothing when weight_rows() is 0).
  virtual void BackwardParams(Ops* ops, const float* in, const float* dout, int batch,
                              bool accumulate) {
    if (weight_rows() == 0) return;
    BackwardWeightRows(ops, in, dout, batch, accumulate, 0, weight_rows());
    BackwardBias(ops, dout, batch, accumulate);
  }
  //    A layer whose parameters are a weight [weight_rows(), row length] followed by a
  //    bias [weight_rows()] may also offer this half in pieces, so that Backward can
  //    announce part of the gradients while it computes the rest: it returns
  //    weight_rows() > 0, and then BackwardBias plus BackwardWeightRows over any split
  //    of [0, weight_rows()), in any order, write what BackwardParams writes.
  virtual int weight_rows() const { return 0; }
  virtual void BackwardBias(Ops* ops, const float* dout, int batch, bool accumulate) {}
  // Rows [row_begin, row_end) of the weight gradient.
  virtual void BackwardWeightRows(Ops* ops, const float* in, const float* dout, int batch,
                                  bool accumulate, int row_begin, int row_end) {}
  // 2. Writes din, the gradient w.r.t. in. Called after BackwardParams or its pieces
  //    (which may need scratch state that this half overwrites), and only when din is
  //    needed.
  virtual void BackwardInput(Ops* ops, const float* in, const float* out, const float* dout,
                             float* din, int batch) = 0;

  // FLOPs of this layer's GEMMs for one forward and backward at `batch`
  // (need_din: whether din is computed). 0 for layers without GEMMs.
  virtual double GemmFlops(int batch, bool need_din) const { return 0; }

 protected:
  float* params_ = nullptr;
  float* grads_ = nullptr;
};

// y [B, out] = x [B, in] * W^T + b. Parameters: W [out, in], then b [out].
std::unique_ptr<Layer> NewLinear(int in_features, int out_features);
// 2-D convolution, stride 1, no padding, on [C, B, H, W]. Parameters: W [Cout, Cin, k,
// k], then b [Cout]. Output [Cout, B, H-k+1, W-k+1].
std::unique_ptr<Layer> NewConv2d(Shape in, int out_channels, int kernel);
// max(x, 0), any layout.
std::unique_ptr<Layer> NewRelu(Shape shape);
// 2x2 max-pool, stride 2, on [C, B, H, W] -> [C, B, H/2, W/2].
std::unique_ptr<Layer> NewMaxPool2x2(Shape in);
// [B, C, H, W] (sample-major, as datasets deliver) -> [C, B, H, W].
std::unique_ptr<Layer> NewToChannelMajor(Shape shape);
// [C, B, H, W] -> [B, C*H*W]: flatten before a linear layer, PyTorch's order.
std::unique_ptr<Layer> NewFlatten(Shape in);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_LAYERS_H_
