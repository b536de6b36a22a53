#include "common/layers.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ringside {
namespace {

// PyTorch's default initialisation for Linear and Conv2d (kaiming_uniform with
// a = sqrt(5)): weights and biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void UniformFanIn(Rng* rng, int64_t fan_in, int64_t n, float* out) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  for (int64_t i = 0; i < n; ++i) out[i] = rng->Uniform(-bound, bound);
}

class Linear final : public Layer {
 public:
  Linear(int in, int out) : in_(in), out_(out) {}

  std::string name() const override { return absl::StrCat("linear", in_, "x", out_); }
  Shape input_shape() const override { return {in_, 1, 1}; }
  Shape output_shape() const override { return {out_, 1, 1}; }
  int64_t num_params() const override { return weight_size() + out_; }

  void InitParams(Rng* rng, float* out) const override {
    UniformFanIn(rng, in_, num_params(), out);
  }

  void Forward(Ops* ops, const float* in, float* out, int batch) override {
    ForwardBegin(ops, in, out, batch);
    ForwardRows(ops, in, out, batch, 0, out_);
  }

  void ForwardBegin(Ops* ops, const float* in, float* out, int batch) override {
    // out [B, out] = b (broadcast).
    ops->BiasBroadcast(out, params_ + weight_size(), batch, out_, 1);
  }

  void ForwardRows(Ops* ops, const float* in, float* out, int batch, int row_begin,
                   int row_end) override {
    // out[:, r0:r1] += in [B, in] * W[r0:r1]^T [in, r1 - r0]: columns r0..r1 of out
    // (row length out).
    ops->GemmStrided(false, true, batch, row_end - row_begin, in_, 1.0f, in, in_,
                     params_ + static_cast<int64_t>(row_begin) * in_, in_, 1.0f,
                     out + row_begin, out_);
  }

  int weight_rows() const override { return out_; }

  void BackwardBias(Ops* ops, const float* dout, int batch, bool accumulate) override {
    // db [out] = column sums of dout [B, out].
    ops->BiasGrad(dout, grads_ + weight_size(), batch, out_, 1, accumulate);
  }

  void BackwardWeightRows(Ops* ops, const float* in, const float* dout, int batch,
                          bool accumulate, int row_begin, int row_end) override {
    // dW [out, in] = dout^T [out, B] * in [B, in]; rows r0..r1 read columns r0..r1 of
    // dout (row length out).
    const float beta = accumulate ? 1.0f : 0.0f;
    ops->GemmStrided(true, false, row_end - row_begin, in_, batch, 1.0f, dout + row_begin,
                     out_, in, in_, beta, grads_ + static_cast<int64_t>(row_begin) * in_, in_);
  }

  void BackwardInput(Ops* ops, const float* in, const float* out, const float* dout,
                     float* din, int batch) override {
    // din [B, in] = dout [B, out] * W [out, in].
    ops->Gemm(false, false, batch, in_, out_, 1.0f, dout, params_, 0.0f, din);
  }

  double GemmFlops(int batch, bool need_din) const override {
    const double one = 2.0 * batch * in_ * out_;
    return one * (need_din ? 3 : 2);
  }

 private:
  int64_t weight_size() const { return static_cast<int64_t>(in_) * out_; }

  const int in_;
  const int out_;
};

class Conv2d final : public Layer {
 public:
  Conv2d(Shape in, int out_channels, int kernel)
      : in_(in), cout_(out_channels), k_(kernel) {}

  std::string name() const override {
    return absl::StrCat("conv", k_, "x", k_, "_", in_.c, "to", cout_);
  }
  Shape input_shape() const override { return in_; }
  Shape output_shape() const override { return {cout_, in_.h - k_ + 1, in_.w - k_ + 1}; }
  int64_t num_params() const override { return weight_size() + cout_; }

  void InitParams(Rng* rng, float* out) const override {
    UniformFanIn(rng, patch(), num_params(), out);
  }

  absl::Status Reserve(Ops* ops, int batch) override {
    const int64_t need = patch() * batch * pixels_out();
    if (col_.size() >= need) return absl::OkStatus();
    absl::StatusOr<DeviceArray<float>> col = DeviceArray<float>::Create(ops, need);
    if (!col.ok()) return col.status();
    col_ = std::move(*col);
    return absl::OkStatus();
  }

  void Forward(Ops* ops, const float* in, float* out, int batch) override {
    ForwardBegin(ops, in, out, batch);
    ForwardRows(ops, in, out, batch, 0, cout_);
  }

  void ForwardBegin(Ops* ops, const float* in, float* out, int batch) override {
    const int n = batch * pixels_out();
    // col [Cin*k*k, B*Ho*Wo]; out [Cout, B*Ho*Wo] = b (broadcast).
    ops->Im2Col(in, in_.c, batch, in_.h, in_.w, k_, 0, 1, col_.data());
    ops->BiasBroadcast(out, params_ + weight_size(), 1, cout_, n);
  }

  void ForwardRows(Ops* ops, const float* in, float* out, int batch, int row_begin,
                   int row_end) override {
    const int n = batch * pixels_out();
    // out rows r0..r1 [r1 - r0, N] += W rows r0..r1 [r1 - r0, Cin*k*k] * col.
    ops->Gemm(false, false, row_end - row_begin, n, patch(), 1.0f,
              params_ + static_cast<int64_t>(row_begin) * patch(), col_.data(), 1.0f,
              out + static_cast<int64_t>(row_begin) * n);
  }

  int weight_rows() const override { return cout_; }

  void BackwardBias(Ops* ops, const float* dout, int batch, bool accumulate) override {
    // db [Cout] = row sums of dout [Cout, N].
    ops->BiasGrad(dout, grads_ + weight_size(), 1, cout_, batch * pixels_out(), accumulate);
  }

  void BackwardWeightRows(Ops* ops, const float* in, const float* dout, int batch,
                          bool accumulate, int row_begin, int row_end) override {
    const int n = batch * pixels_out();
    // dW [Cout, Cin*k*k] = dout [Cout, N] * col^T [N, Cin*k*k] (Forward's columns);
    // rows r0..r1 are dout's rows r0..r1 times col^T.
    const float beta = accumulate ? 1.0f : 0.0f;
    ops->Gemm(false, true, row_end - row_begin, patch(), n, 1.0f,
              dout + static_cast<int64_t>(row_begin) * n, col_.data(), beta,
              grads_ + static_cast<int64_t>(row_begin) * patch());
  }

  void BackwardInput(Ops* ops, const float* in, const float* out, const float* dout,
                     float* din, int batch) override {
    const int n = batch * pixels_out();
    // dcol [Cin*k*k, N] = W^T * dout, over the column buffer (BackwardParams has used
    // Forward's columns by now); din = Col2Im(dcol).
    ops->Gemm(true, false, patch(), n, cout_, 1.0f, params_, dout, 0.0f, col_.data());
    ops->Col2Im(col_.data(), in_.c, batch, in_.h, in_.w, k_, 0, 1, din);
  }

  double GemmFlops(int batch, bool need_din) const override {
    const double one = 2.0 * cout_ * patch() * batch * pixels_out();
    return one * (need_din ? 3 : 2);
  }

 private:
  int64_t patch() const { return static_cast<int64_t>(in_.c) * k_ * k_; }
  int64_t weight_size() const { return patch() * cout_; }
  int pixels_out() const { return (in_.h - k_ + 1) * (in_.w - k_ + 1); }

  const Shape in_;
  const int cout_;
  const int k_;
  DeviceArray<float> col_;  // Im2Col of the last Forward's input.
};

class Relu final : public Layer {
 public:
  explicit Relu(Shape shape) : shape_(shape) {}

  std::string name() const override { return "relu"; }
  // Backward reads only `out` (the ReLU output) and dout.
  bool in_place() const override { return true; }
  Shape input_shape() const override { return shape_; }
  Shape output_shape() const override { return shape_; }

  void Forward(Ops* ops, const float* in, float* out, int batch) override {
    ops->ReluForward(in, out, batch * shape_.size());
  }
  void BackwardInput(Ops* ops, const float* in, const float* out, const float* dout,
                     float* din, int batch) override {
    ops->ReluBackward(out, dout, din, batch * shape_.size());
  }

 private:
  const Shape shape_;
};

class MaxPool2x2 final : public Layer {
 public:
  explicit MaxPool2x2(Shape in) : in_(in) {}

  std::string name() const override { return "maxpool2x2"; }
  Shape input_shape() const override { return in_; }
  Shape output_shape() const override { return {in_.c, in_.h / 2, in_.w / 2}; }

  absl::Status Reserve(Ops* ops, int batch) override {
    const int64_t need = batch * output_shape().size();
    if (argmax_.size() >= need) return absl::OkStatus();
    absl::StatusOr<DeviceArray<int32_t>> argmax = DeviceArray<int32_t>::Create(ops, need);
    if (!argmax.ok()) return argmax.status();
    argmax_ = std::move(*argmax);
    return absl::OkStatus();
  }

  void Forward(Ops* ops, const float* in, float* out, int batch) override {
    ops->MaxPool2x2Forward(in, in_.c * batch, in_.h, in_.w, out, argmax_.data());
  }
  void BackwardInput(Ops* ops, const float* in, const float* out, const float* dout,
                     float* din, int batch) override {
    ops->MaxPool2x2Backward(dout, argmax_.data(), in_.c * batch, in_.h, in_.w, din);
  }

 private:
  const Shape in_;
  DeviceArray<int32_t> argmax_;  // Winners of the last Forward.
};

// Swaps the batch axis with the channel axis. to_channel_major: [B, C, HW] -> [C, B,
// HW]; otherwise [C, B, HW] -> [B, C, HW] (a flatten, output shape [C*H*W, 1, 1]).
class Transpose final : public Layer {
 public:
  Transpose(Shape shape, bool to_channel_major)
      : shape_(shape), to_channel_major_(to_channel_major) {}

  std::string name() const override {
    return to_channel_major_ ? "to_channel_major" : "flatten";
  }
  Shape input_shape() const override { return shape_; }
  Shape output_shape() const override {
    return to_channel_major_ ? shape_ : Shape{static_cast<int>(shape_.size()), 1, 1};
  }

  void Forward(Ops* ops, const float* in, float* out, int batch) override {
    const int hw = shape_.h * shape_.w;
    if (to_channel_major_) {
      ops->SwapAxes01(in, batch, shape_.c, hw, out);
    } else {
      ops->SwapAxes01(in, shape_.c, batch, hw, out);
    }
  }
  void BackwardInput(Ops* ops, const float* in, const float* out, const float* dout,
                     float* din, int batch) override {
    const int hw = shape_.h * shape_.w;
    if (to_channel_major_) {
      ops->SwapAxes01(dout, shape_.c, batch, hw, din);
    } else {
      ops->SwapAxes01(dout, batch, shape_.c, hw, din);
    }
  }

 private:
  const Shape shape_;
  const bool to_channel_major_;
};

}  // namespace

std::unique_ptr<Layer> NewLinear(int in_features, int out_features) {
  return std::make_unique<Linear>(in_features, out_features);
}
std::unique_ptr<Layer> NewConv2d(Shape in, int out_channels, int kernel) {
  return std::make_unique<Conv2d>(in, out_channels, kernel);
}
std::unique_ptr<Layer> NewRelu(Shape shape) { return std::make_unique<Relu>(shape); }
std::unique_ptr<Layer> NewMaxPool2x2(Shape in) { return std::make_unique<MaxPool2x2>(in); }
std::unique_ptr<Layer> NewToChannelMajor(Shape shape) {
  return std::make_unique<Transpose>(shape, true);
}
std::unique_ptr<Layer> NewFlatten(Shape in) { return std::make_unique<Transpose>(in, false); }

}  // namespace ringside
