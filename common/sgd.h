// SGD with momentum, weight decay and optional Nesterov (torch.optim.SGD semantics,
// dampening 0) over a flat span of parameters. The same code steps a single process,
// each DDP rank and each parameter-server shard.
#ifndef RINGSIDE_COMMON_SGD_H_
#define RINGSIDE_COMMON_SGD_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/ops.h"

namespace ringside {

// Not thread-safe. Owns the momentum buffer (backend memory) for `size` parameters.
class Sgd {
 public:
  // InvalidArgument for lr < 0, momentum outside [0, 1), weight_decay < 0, or nesterov
  // without momentum.
  static absl::StatusOr<Sgd> Create(const SgdHyper& hyper, int64_t size, Ops* ops);

  const SgdHyper& hyper() const { return hyper_; }
  int64_t size() const { return size_; }

  // One step over params [size] with grads [size] (backend memory). With
  // `zero_grads` the gradients are set to 0 in the same pass (see Ops::SgdUpdate).
  void Step(float* params, float* grads, bool zero_grads = false);
  // One step over the sub-range [offset, offset + n) of the parameters this optimizer
  // owns; params and grads point at that sub-range's first element.
  void StepRange(int64_t offset, int64_t n, float* params, float* grads,
                 bool zero_grads = false);

  // Optimizer state (the momentum buffer; empty without momentum) as host floats, for
  // checkpoints.
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

  SgdHyper hyper_;
  int64_t size_;
  Ops* ops_;
  DeviceArray<float> momentum_;  // [size] when hyper_.momentum != 0, zero-initialised.
};

}  // namespace ringside

#endif  // RINGSIDE_COMMON_SGD_H_
