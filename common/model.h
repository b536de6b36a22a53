// A model replica: a stack of layers over ONE flat parameter buffer and ONE flat
// gradient buffer (layer order), softmax cross-entropy loss, and a backward pass that
// announces each layer's gradient range the moment it is final.
#ifndef RINGSIDE_COMMON_MODEL_H_
#define RINGSIDE_COMMON_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layers.h"
#include "common/ops.h"

namespace ringside {

// A contiguous range of the flat parameter (and gradient) buffer, in floats.
struct ParamRange {
  int64_t offset = 0;
  int64_t size = 0;
};

// One parameter tensor: its flat range and, for a weight, its rows (range.size / rows
// columns, row-major: a linear layer's [out, in], a convolution's [out channels,
// in channels x kernel area]); rows 0 for a vector (a bias).
struct ParamTensor {
  ParamRange range;
  int64_t rows = 0;
};

// Called during Backward with a range whose gradients are final. Ranges arrive in
// reverse layer order (highest offsets first) and tile [0, num_params()) exactly.
using GradReadyFn = std::function<void(const ParamRange&)>;

// What Backward announces for each layer with parameters, last layer first. Either may
// be empty.
struct BackwardHooks {
  // The layer's parameter gradients are final: they may be read (sent, reduced), not
  // yet changed. Called before the gradient w.r.t. the layer's input is computed,
  // which still reads the layer's parameters.
  GradReadyFn grads_ready;
  // Backward is done with the layer: its parameters (and gradients) may now be
  // changed, e.g. by an optimizer step or by updated values arriving from a server.
  GradReadyFn params_free;
  // Flat parameter offsets (any order) where the caller wants ranges to split, e.g.
  // the boundaries of the chunks it sends. A layer that computes its weight gradient
  // in row blocks (Layer::weight_rows) and has such an offset inside its range is
  // announced in pieces: its bias, then the rows from the row holding the highest
  // offset up, and so on down, each piece announced as soon as it is computed (and
  // for the first layer with parameters, whose parameters backward does not read,
  // freed at once). Ranges still arrive highest offsets first and tile the buffer.
  std::vector<int64_t> split_at;
  // True when the hooks only enqueue work on the model's own Ops object (e.g. a local
  // optimizer step), which the backend runs after the ops that produced the gradients:
  // then Backward does not wait for the device before calling them, nor at its end
  // (the caller synchronises once the step is done). False when a hook reads or hands
  // on the memory from the host (a push, a host-side all-reduce).
  bool device_ordered = false;
};

// What Forward asks before it reads parameters, when the caller lets parameters arrive
// while it runs (e.g. a parameter server's replies to the last step). Both may be empty.
struct ForwardHooks {
  // Blocks until the range holds the parameters Forward must use; a non-OK status
  // stops Forward, which returns it. Asked in layer order for each layer with
  // parameters; a layer cut by split_at that computes its output in row blocks
  // (Layer::ForwardRows) asks for its bias, then its weight rows in pieces from the
  // highest offset down, and computes each piece once it is granted.
  std::function<absl::Status(const ParamRange&)> params_needed;
  // Flat parameter offsets (any order) where pieces should start, e.g. the boundaries
  // of the chunks the parameters arrive in.
  std::vector<int64_t> split_at;
};

struct ForwardResult {
  double loss_sum = 0;  // Sum of the per-sample losses of the batch.
  int64_t correct = 0;  // Samples whose argmax matched the label.
};

// Not thread-safe. Owns its buffers in `ops`'s memory; `ops` must outlive it.
class Model {
 public:
  // Builds a model from a spec:
  //   "mlp:W0-W1-...-Wn"  linear layers with ReLU between; W0 must equal the input's
  //                       C*H*W and Wn the number of classes.
  //   "cnn:lenet"         conv5x5(32) relu pool2 conv5x5(64) relu pool2 fc(512) relu
  //                       (each relu runs after its pool: same values, 1/4 the work)
  //                       fc(classes), stride 1, no padding (28x28 -> 4x4x64 -> 1024).
  // InvalidArgument names the problem for unknown or inconsistent specs.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const std::string& spec,
                                                       Shape input, int num_classes,
                                                       Ops* ops);

  const std::string& spec() const { return spec_; }
  int64_t num_params() const { return num_params_; }
  // Flat buffers, num_params() floats each, backend memory.
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  // Parameter range of every layer that has parameters, in layer order.
  const std::vector<ParamRange>& layer_ranges() const { return layer_ranges_; }
  // Every parameter tensor's range, in layer order: a layer whose parameters are a
  // weight of weight_rows() rows and then a bias (Layer::weight_rows) gives the two,
  // another layer with parameters one. What a PS placement deals out
  // (common/ps_placement.h), as TensorFlow places each variable.
  std::vector<ParamRange> TensorRanges() const;
  // The same tensors with their shapes (what PowerSGD compresses as matrices).
  std::vector<ParamTensor> Tensors() const;
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }

  // Deterministic initialisation from `seed` (PyTorch's default uniform bounds).
  absl::Status InitParams(uint64_t seed);

  // x [batch, C*H*W] (sample-major), labels [batch]: backend memory. Keeps the
  // activations for Backward. batch >= 1.
  absl::StatusOr<ForwardResult> Forward(const float* x, const int32_t* labels,
                                        int batch, const ForwardHooks& hooks = {});
  // Backward of the last Forward. Gradients of loss_scale * (sum of per-sample
  // losses) overwrite grads() (loss_scale = 1 / global batch gives the mean loss),
  // or are added to them when `accumulate` (gradient accumulation; also lets an
  // optimizer that zeroes the gradients as it consumes them spare BLAS a zeroing
  // pass). `hooks` are called for each layer as described in BackwardHooks.
  absl::Status Backward(float loss_scale, const BackwardHooks& hooks, bool accumulate = false);
  // The same with hooks.grads_ready = on_ready (may be empty) only.
  absl::Status Backward(float loss_scale, const GradReadyFn& on_ready, bool accumulate = false) {
    return Backward(loss_scale, BackwardHooks{on_ready, nullptr}, accumulate);
  }

  // GEMM FLOPs of one forward + backward at `batch`.
  double GemmFlops(int batch) const;

 private:
  Model(std::string spec, Ops* ops) : spec_(std::move(spec)), ops_(ops) {}
  absl::Status Finalize(Shape input, int num_classes);
  // Layer i's parameter gradients, announced through `hooks` (in pieces where
  // hooks.split_at cuts the layer; see BackwardHooks). free_now: backward will not read
  // the layer's parameters again, so each piece is also freed at once.
  absl::Status BackwardParams(int i, const float* in, int batch, bool accumulate,
                              const BackwardHooks& hooks, bool free_now);
  absl::Status Reserve(int batch);
  // Layer i's forward (which has parameters), asking for them through `hooks` (in
  // pieces where hooks.split_at cuts its weight; see ForwardHooks).
  absl::Status ForwardParams(int i, const float* in, int batch, const ForwardHooks& hooks);

  const std::string spec_;
  Ops* const ops_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int64_t> layer_offsets_;  // Offset of each layer's parameters.
  std::vector<ParamRange> layer_ranges_;
  int64_t num_params_ = 0;
  int num_classes_ = 0;
  int first_param_layer_ = -1;
  DeviceArray<float> params_;
  DeviceArray<float> grads_;
  // act_[0] is the caller's input; act_[i + 1] is layer i's output, dact_[i + 1] the
  // gradient w.r.t. it. In-place layers share their input's buffers.
  std::vector<float*> act_;
  std::vector<float*> dact_;
  std::vector<DeviceArray<float>> storage_;  // Owns the buffers act_/dact_ point into.
  DeviceArray<float> probs_;               // Softmax of the logits [batch, classes].
  int reserved_batch_ = 0;
  int last_batch_ = 0;
  const float* last_input_ = nullptr;
  const int32_t* last_labels_ = nullptr;
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_MODEL_H_
