#include "common/sgd.h"

#include <algorithm>
#include <cmath>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringside {

namespace {

absl::Status ValidateHyper(const SgdHyper& hyper) {
  if (!(hyper.lr >= 0) || !std::isfinite(hyper.lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning rate must be finite and >= 0, got ", hyper.lr));
  }
  if (!(hyper.momentum >= 0 && hyper.momentum < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("momentum must be in [0, 1), got ", hyper.momentum));
  }
  if (!(hyper.weight_decay >= 0) || !std::isfinite(hyper.weight_decay)) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight decay must be finite and >= 0, got ", hyper.weight_decay));
  }
  if (hyper.nesterov && hyper.momentum == 0) {
    return absl::InvalidArgumentError("nesterov needs a momentum > 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Sgd> Sgd::Create(const SgdHyper& hyper, int64_t size, Ops* ops) {
  RINGSIDE_RETURN_IF_ERROR(ValidateHyper(hyper));
  Sgd sgd(hyper, size, ops);
  if (hyper.momentum != 0) {
    RINGSIDE_ASSIGN_OR_RETURN(sgd.momentum_, DeviceArray<float>::Create(ops, size));
    ops->Fill(sgd.momentum_.data(), size, 0.0f);
    sgd.state_ = sgd.momentum_.data();
  }
  return sgd;
}

absl::StatusOr<Sgd> Sgd::CreateInGradients(const SgdHyper& hyper, float* grads,
                                           int64_t size, Ops* ops) {
  RINGSIDE_RETURN_IF_ERROR(ValidateHyper(hyper));
  if (hyper.nesterov) {
    return absl::InvalidArgumentError("nesterov cannot keep its momentum in the gradients");
  }
  Sgd sgd(hyper, size, ops);
  sgd.in_gradients_ = true;
  sgd.state_ = grads;
  ops->Fill(grads, size, 0.0f);
  return sgd;
}

void Sgd::Step(float* params, float* grads, bool zero_grads) {
  StepRange(0, size_, params, grads, zero_grads);
}

void Sgd::StepRange(int64_t offset, int64_t n, float* params, float* grads,
                    bool zero_grads, float* nonfinite) {
  SgdHyper hyper = hyper_;
  hyper.nonfinite = nonfinite;
  if (in_gradients_) {
    ABSL_RAW_CHECK(grads == state_ + offset, "CreateInGradients: grads must be its buffer");
    ops_->SgdUpdateCarried(params, grads, n, hyper);
    return;
  }
  float* buf = state() != nullptr ? state() + offset : nullptr;
  ops_->SgdUpdate(params, grads, buf, n, hyper, zero_grads);
}

absl::StatusOr<std::vector<float>> Sgd::SaveState() const {
  std::vector<float> out(state() != nullptr ? size_ : 0);
  if (!out.empty()) {
    RINGSIDE_RETURN_IF_ERROR(ops_->CopyToHost(out.data(), state(), out.size() * sizeof(float)));
  }
  return out;
}

absl::Status Sgd::LoadState(absl::Span<const float> state) {
  const int64_t want = this->state() != nullptr ? size_ : 0;
  if (static_cast<int64_t>(state.size()) != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer state has ", state.size(), " floats, expected ", want));
  }
  if (state.empty()) return absl::OkStatus();
  return ops_->CopyToDevice(this->state(), state.data(), state.size() * sizeof(float));
}

absl::Status Sgd::SaveStateRange(int64_t offset, absl::Span<float> out) const {
  const int64_t n = static_cast<int64_t>(out.size());
  if (offset < 0 || offset + n > size_) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer state range [", offset, ", ",
                                                   offset + n, ") outside [0, ", size_, ")"));
  }
  if (state() == nullptr) {
    std::fill(out.begin(), out.end(), 0.0f);
    return absl::OkStatus();
  }
  return ops_->CopyToHost(out.data(), state() + offset, n * sizeof(float));
}

absl::Status Sgd::LoadStateRange(int64_t offset, absl::Span<const float> state) {
  const int64_t n = static_cast<int64_t>(state.size());
  if (offset < 0 || offset + n > size_) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer state range [", offset, ", ",
                                                   offset + n, ") outside [0, ", size_, ")"));
  }
  if (this->state() == nullptr) return absl::OkStatus();
  return ops_->CopyToDevice(this->state() + offset, state.data(), n * sizeof(float));
}

}  // namespace ringside
