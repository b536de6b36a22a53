#include "ddp_ring/gloo_transfer.h"

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "ddp_ring/gloo_errors.h"

namespace ringside {

namespace {

// The sizes of one direction's posted transfers not yet waited for, oldest first: a
// vector and a read index, the waited-for front dropped once it is most of the vector,
// so that a buffer with a few transfers in flight at a time (the pipelined ring) keeps
// a short vector and allocates only at first.
class PostedSizes {
 public:
  void Push(size_t bytes) { sizes_.push_back(bytes); }
  // The oldest; requires one.
  size_t Pop() {
    const size_t bytes = sizes_[next_++];
    if (next_ == sizes_.size()) {
      sizes_.clear();
      next_ = 0;
    } else if (next_ >= 8 && 2 * next_ >= sizes_.size()) {
      sizes_.erase(sizes_.begin(), sizes_.begin() + next_);
      next_ = 0;
    }
    return bytes;
  }

 private:
  std::vector<size_t> sizes_;
  size_t next_ = 0;
};

}  // namespace

// One unbound buffer, with the sizes of its posted transfers not yet waited for, so
// that each wait counts what completed.
class GlooTransfer::Buffer : public TransferBuffer {
 public:
  Buffer(GlooTransfer* owner, std::unique_ptr<gloo::transport::UnboundBuffer> buffer)
      : owner_(owner), buffer_(std::move(buffer)) {}

  absl::Status PostSend(int peer, uint64_t slot, size_t offset, size_t bytes) override {
    RINGSIDE_RETURN_IF_ERROR(Guarded([&] { buffer_->send(peer, slot, offset, bytes); }));
    sends_.Push(bytes);
    return absl::OkStatus();
  }

  absl::Status PostRecv(int peer, uint64_t slot, size_t offset, size_t bytes) override {
    RINGSIDE_RETURN_IF_ERROR(Guarded([&] { buffer_->recv(peer, slot, offset, bytes); }));
    recvs_.Push(bytes);
    return absl::OkStatus();
  }

  absl::Status WaitSend() override {
    RINGSIDE_RETURN_IF_ERROR(Guarded([&] { buffer_->waitSend(owner_->timeout_ms_); }));
    owner_->posted_.sent += static_cast<int64_t>(sends_.Pop());
    return absl::OkStatus();
  }

  absl::Status WaitRecv() override {
    RINGSIDE_RETURN_IF_ERROR(Guarded([&] { buffer_->waitRecv(owner_->timeout_ms_); }));
    owner_->posted_.received += static_cast<int64_t>(recvs_.Pop());
    return absl::OkStatus();
  }

 private:
  // Runs `call` on the unbound buffer; Gloo's exception, if it throws, as a Status.
  template <typename Call>
  absl::Status Guarded(Call call) {
    try {
      call();
    } catch (...) {
      return GlooExceptionToStatus(std::current_exception(), owner_->timeout_);
    }
    return absl::OkStatus();
  }

  GlooTransfer* const owner_;
  const std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
  PostedSizes sends_;
  PostedSizes recvs_;
};

GlooTransfer::GlooTransfer(gloo::Context* context, TcpPairs* pairs, absl::Duration timeout)
    : context_(context),
      pairs_(pairs),
      timeout_(timeout),
      timeout_ms_(absl::ToInt64Milliseconds(timeout)) {
  if (pairs_ != nullptr) pairs_at_start_ = {pairs_->payload_sent(), pairs_->payload_received()};
}

absl::StatusOr<std::unique_ptr<TransferBuffer>> GlooTransfer::Register(void* data, size_t bytes) {
  try {
    return std::unique_ptr<TransferBuffer>(
        new Buffer(this, context_->createUnboundBuffer(data, bytes)));
  } catch (...) {
    return GlooExceptionToStatus(std::current_exception(), timeout_);
  }
}

uint64_t GlooTransfer::Slot(uint8_t prefix, uint32_t tag) const {
  return gloo::Slot::build(prefix, tag);
}

absl::Status GlooTransfer::Exchange(int peer, uint64_t tag, const void* send, size_t send_bytes,
                                    void* recv, size_t recv_bytes,
                                    absl::FunctionRef<void(size_t, size_t)> progress) {
  if (pairs_ == nullptr) {
    return absl::FailedPreconditionError("no direct TCP pairs were connected");
  }
  const absl::Status status = pairs_->Exchange(peer, tag, send, send_bytes, recv, recv_bytes,
                                               absl::Now() + timeout_, progress);
  if (absl::IsDeadlineExceeded(status)) {
    // Worded like Gloo's timeouts.
    return absl::DeadlineExceededError(absl::StrCat(
        "timed out after ", absl::FormatDuration(timeout_), " (", status.message(), ")"));
  }
  return status;
}

CollectiveBytes GlooTransfer::bytes() const {
  CollectiveBytes total = posted_;
  if (pairs_ != nullptr) {
    total += CollectiveBytes{pairs_->payload_sent(), pairs_->payload_received()} - pairs_at_start_;
  }
  return total;
}

}  // namespace ringside
