// SGD with momentum, weight decay and optional Nesterov (torch.optim.SGD semantics,
// dampening 0) over a flat span of parameters. The same code steps a single process,
// each DDP rank and each parameter-server shard.
//
// The optimizer state is the carried momentum term u = momentum * PyTorch's
// momentum_buffer (see SgdHyper): the same floats whichever strategy trains, so a
// checkpoint written by one resumes under another.
#ifndef RINGSIDE_COMMON_SGD_H_
#define RINGSIDE_COMMON_SGD_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/ops.h"

namespace ringside {

// Not thread-safe. Owns the momentum state (backend memory) for `size` parameters, or,
// made with CreateInGradients, keeps it in the caller's gradient buffer.
class Sgd {
 public:
  // InvalidArgument for lr < 0 or non-finite, momentum outside [0, 1), weight_decay < 0
  // or non-finite, or nesterov without momentum.
  static absl::StatusOr<Sgd> Create(const SgdHyper& hyper, int64_t size, Ops* ops);

  // The fused form for a caller whose backward adds its gradients into `grads` [size]
  // (backend memory; borrowed, must outlive the optimizer): the carried term u lives
  // in grads between steps, so backward adds each gradient straight onto it and a step
  // makes one pass over two buffers instead of three (Ops::SgdUpdateCarried). Zeroes
  // grads (u starts at 0). Between steps grads hold the state: the caller may only add
  // gradients into them. Errors as Create, and InvalidArgument for nesterov, which
  // needs the gradient apart from u.
  static absl::StatusOr<Sgd> CreateInGradients(const SgdHyper& hyper, float* grads,
                                               int64_t size, Ops* ops);

  const SgdHyper& hyper() const { return hyper_; }
  int64_t size() const { return size_; }
  bool in_gradients() const { return in_gradients_; }

  // One step over params [size] with grads [size] (backend memory). With
  // `zero_grads` the gradients are set to 0 in the same pass (see Ops::SgdUpdate).
  // In the CreateInGradients form grads must be the buffer given there, and they
  // hold the next step's u afterwards (zero_grads is moot).
  void Step(float* params, float* grads, bool zero_grads = false);
  // One step over the sub-range [offset, offset + n) of the parameters this optimizer
  // owns; params and grads point at that sub-range's first element. With `nonfinite`
  // (one float of backend memory; see SgdHyper::nonfinite) the same pass sets it to 1
  // when a parameter it writes is non-finite.
  void StepRange(int64_t offset, int64_t n, float* params, float* grads,
                 bool zero_grads = false, float* nonfinite = nullptr);

  // Optimizer state (u; empty without momentum) as host floats, for checkpoints.
  absl::StatusOr<std::vector<float>> SaveState() const;
  // InvalidArgument when `state` does not match the size this optimizer expects.
  absl::Status LoadState(absl::Span<const float> state);
  // The state of parameters [offset, offset + out.size()) only (a parameter-server
  // chunk). Zeros without momentum. InvalidArgument for a range outside the optimizer.
  absl::Status SaveStateRange(int64_t offset, absl::Span<float> out) const;
  absl::Status LoadStateRange(int64_t offset, absl::Span<const float> state);

 private:
  Sgd(const SgdHyper& hyper, int64_t size, Ops* ops)
      : hyper_(hyper), size_(size), ops_(ops) {}

  // Where u lives: momentum_ or the caller's gradients; nullptr without momentum.
  float* state() const { return hyper_.momentum != 0 ? state_ : nullptr; }

  SgdHyper hyper_;
  int64_t size_;
  Ops* ops_;
  bool in_gradients_ = false;
  DeviceArray<float> momentum_;  // [size] for Create with momentum != 0, zeroed.
  float* state_ = nullptr;       // momentum_.data() or the caller's gradients.
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_SGD_H_
