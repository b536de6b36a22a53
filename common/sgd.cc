#include "common/sgd.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringside {

absl::StatusOr<Sgd> Sgd::Create(const SgdHyper& hyper, int64_t size, Ops* ops) {
  if (!(hyper.lr >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("learning rate must be >= 0, got ", hyper.lr));
  }
  if (!(hyper.momentum >= 0 && hyper.momentum < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("momentum must be in [0, 1), got ", hyper.momentum));
  }
  if (!(hyper.weight_decay >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight decay must be >= 0, got ", hyper.weight_decay));
  }
  if (hyper.nesterov && hyper.momentum == 0) {
    return absl::InvalidArgumentError("nesterov needs a momentum > 0");
  }
  Sgd sgd(hyper, size, ops);
  if (hyper.momentum != 0) {
    RINGSIDE_ASSIGN_OR_RETURN(sgd.momentum_, DeviceArray<float>::Create(ops, size));
    ops->Fill(sgd.momentum_.data(), size, 0.0f);
  }
  return sgd;
}

void Sgd::Step(float* params, float* grads, bool zero_grads) {
  StepRange(0, size_, params, grads, zero_grads);
}

void Sgd::StepRange(int64_t offset, int64_t n, float* params, float* grads,
                    bool zero_grads) {
  float* buf = hyper_.momentum != 0 ? momentum_.data() + offset : nullptr;
  ops_->SgdUpdate(params, grads, buf, n, hyper_, zero_grads);
}

absl::StatusOr<std::vector<float>> Sgd::SaveState() const {
  std::vector<float> state(momentum_.size());
  if (!state.empty()) {
    RINGSIDE_RETURN_IF_ERROR(
        ops_->CopyToHost(state.data(), momentum_.data(), state.size() * sizeof(float)));
  }
  return state;
}

absl::Status Sgd::LoadState(absl::Span<const float> state) {
  if (static_cast<int64_t>(state.size()) != momentum_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer state has ", state.size(), " floats, expected ",
                     momentum_.size()));
  }
  if (state.empty()) return absl::OkStatus();
  return ops_->CopyToDevice(momentum_.data(), state.data(), state.size() * sizeof(float));
}

absl::Status Sgd::SaveStateRange(int64_t offset, absl::Span<float> out) const {
  const int64_t n = static_cast<int64_t>(out.size());
  if (offset < 0 || offset + n > size_) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer state range [", offset, ", ",
                                                   offset + n, ") outside [0, ", size_, ")"));
  }
  if (momentum_.size() == 0) {
    std::fill(out.begin(), out.end(), 0.0f);
    return absl::OkStatus();
  }
  return ops_->CopyToHost(out.data(), momentum_.data() + offset, n * sizeof(float));
}

absl::Status Sgd::LoadStateRange(int64_t offset, absl::Span<const float> state) {
  const int64_t n = static_cast<int64_t>(state.size());
  if (offset < 0 || offset + n > size_) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer state range [", offset, ", ",
                                                   offset + n, ") outside [0, ", size_, ")"));
  }
  if (momentum_.size() == 0) return absl::OkStatus();
  return ops_->CopyToDevice(momentum_.data() + offset, state.data(), n * sizeof(float));
}

}  // namespace ringside
