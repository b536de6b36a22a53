// A key-prefixing view of another store. Holds no state of its own beyond the prefix,
// so it is exactly as thread-safe and as blocking as the store beneath it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "ddp_ring/store.h"

namespace ringside {
namespace {

class PrefixStore final : public Store {
 public:
  PrefixStore(const std::string& prefix, Store* base)
      : prefix_(prefix), qualifier_(absl::StrCat(prefix, "/")), base_(base) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    return Unqualify(base_->Set(Qualify(key), value));
  }

  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration timeout) override {
    absl::StatusOr<std::string> value = base_->Get(Qualify(key), timeout);
    if (!value.ok()) return Unqualify(value.status());
    return value;
  }

  absl::Status Wait(const std::vector<std::string>& keys,
                    absl::Duration timeout) override {
    std::vector<std::string> qualified;
    qualified.reserve(keys.size());
    for (const std::string& key : keys) qualified.push_back(Qualify(key));
    return Unqualify(base_->Wait(qualified, timeout));
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    absl::StatusOr<int64_t> value = base_->Add(Qualify(key), delta);
    if (!value.ok()) return Unqualify(value.status());
    return value;
  }

 private:
  std::string Qualify(const std::string& key) const {
    return absl::StrCat(qualifier_, key);
  }

  // Rewrites an error from `base_` to speak of the caller's (un-prefixed) key names,
  // noting the prefix once at the end. The base's messages carry the qualified names.
  absl::Status Unqualify(const absl::Status& status) const {
    if (status.ok() || prefix_.empty()) return status;
    std::string message(status.message());
    if (message.find(qualifier_) == std::string::npos) return status;
    return absl::Status(status.code(),
                        absl::StrCat(absl::StrReplaceAll(message, {{qualifier_, ""}}),
                                     " (under store prefix \"", prefix_, "\")"));
  }

  const std::string prefix_;
  const std::string qualifier_;  // prefix_ + "/".
  Store* const base_;            // Not owned.
};

}  // namespace

std::unique_ptr<Store> NewPrefixStore(const std::string& prefix, Store* base) {
  return std::make_unique<PrefixStore>(prefix, base);
}

}  // namespace ringside
