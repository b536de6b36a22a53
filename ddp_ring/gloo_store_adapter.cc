#include "ddp_ring/gloo_store_adapter.h"

#include <gloo/common/error.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside {

GlooStoreAdapter::GlooStoreAdapter(ringside::Store* store, absl::Duration timeout)
    : store_(store), timeout_(timeout) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  const absl::Status status = store_->Set(key, std::string(data.begin(), data.end()));
  if (!status.ok()) {
    Fail(absl::Status(status.code(),
                      absl::StrCat("store set of key '", key, "': ", status.message())));
  }
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  absl::StatusOr<std::string> value = store_->Get(key, timeout_);
  if (!value.ok()) {
    Fail(absl::Status(
        value.status().code(),
        absl::StrCat("store get of key '", key, "': ", value.status().message())));
  }
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds::zero());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  const absl::Duration limit =
      timeout.count() > 0 ? absl::Milliseconds(timeout.count()) : timeout_;
  const absl::Status status = store_->Wait(keys, limit);
  if (!status.ok()) {
    Fail(absl::Status(status.code(),
                      absl::StrCat("store wait for keys [", absl::StrJoin(keys, ", "),
                                   "]: ", status.message())));
  }
}

absl::Status GlooStoreAdapter::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

void GlooStoreAdapter::Fail(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  throw gloo::IoException(status.ToString());
}

}  // namespace ringside
