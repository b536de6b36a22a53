#include "ps_server/ordered_sum.h"

#include <cstring>

#include "absl/base/internal/raw_logging.h"

namespace ringside {

OrderedSum::OrderedSum(int num_workers, int64_t size, Ops* ops)
    : num_workers_(num_workers),
      size_(size),
      ops_(ops),
      acc_(size, 0.0f),
      has_parked_(num_workers, false),
      parked_(num_workers) {}

void OrderedSum::Add(int w, Blocks blocks) {
  if (w <= next_) {
    // Its turn (or, for a rejoined worker, past it: added on arrival).
    const bool first = !summed_any_;
    float* acc = acc_.data();
    blocks([&](int64_t at, float* block, int64_t len) {
      if (first) {
        std::memcpy(acc + at, block, len * sizeof(float));
      } else {
        ops_->Axpy(len, 1.0f, block, acc + at);
      }
    });
    summed_any_ = true;
    if (w == next_) ++next_;
  } else {
    std::vector<float>& slot = parked_[w];
    slot.resize(size_);
    blocks([&](int64_t at, float* block, int64_t len) {
      std::memcpy(slot.data() + at, block, len * sizeof(float));
    });
    has_parked_[w] = true;
  }
  ++contributors_;
}

void OrderedSum::Advance(Counts counts) {
  while (next_ < num_workers_) {
    const int u = next_;
    if (has_parked_[u]) {
      if (summed_any_) {
        ops_->Axpy(size_, 1.0f, parked_[u].data(), acc_.data());
      } else {
        std::memcpy(acc_.data(), parked_[u].data(), size_ * sizeof(float));
      }
      summed_any_ = true;
      has_parked_[u] = false;
    } else if (counts(u)) {
      break;  // u counts in the step and has not pushed: a gap.
    }
    ++next_;
  }
}

float* OrderedSum::TakeMean() {
  ABSL_RAW_CHECK(next_ == num_workers_, "a complete chunk with a worker not summed");
  // Workers scale their loss by 1/N: the sum of N pushes is the mean gradient. Fewer
  // contributors (elastic PS): the mean over those that pushed.
  if (contributors_ != num_workers_ && contributors_ > 0) {
    ops_->Scale(acc_.data(), size_,
                static_cast<float>(num_workers_) / static_cast<float>(contributors_));
  }
  next_ = 0;
  summed_any_ = false;
  contributors_ = 0;
  return acc_.data();
}

}  // namespace ringside
