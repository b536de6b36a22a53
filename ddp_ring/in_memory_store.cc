// The in-process store: a hash map under one mutex. Blocking reads wait on an
// absl::Condition, which the mutex re-evaluates whenever a writer releases it, so
// writers need no explicit notification.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ddp_ring/store.h"

namespace ringside {
namespace {

// Longest value echoed back in an Add error message.
constexpr size_t kMaxEchoedValueBytes = 32;

class InMemoryStore final : public Store {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override {
    absl::MutexLock lock(&mu_);
    values_[key] = value;
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    auto present = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return values_.contains(key);
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&present), timeout)) {
      return TimedOut(timeout, {key});
    }
    return values_.at(key);
  }

  absl::Status Wait(const std::vector<std::string>& keys,
                    absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    auto all_present = [this, &keys]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const std::string& key : keys) {
        if (!values_.contains(key)) return false;
      }
      return true;
    };
    if (mu_.AwaitWithTimeout(absl::Condition(&all_present), timeout)) {
      return absl::OkStatus();
    }
    std::vector<std::string> missing;
    for (const std::string& key : keys) {
      if (!values_.contains(key)) missing.push_back(key);
    }
    return TimedOut(timeout, missing);
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    absl::MutexLock lock(&mu_);
    int64_t current = 0;  // A missing key counts as 0.
    auto it = values_.find(key);
    if (it != values_.end() && !absl::SimpleAtoi(it->second, &current)) {
      const std::string& value = it->second;
      std::string shown = value.substr(0, kMaxEchoedValueBytes);
      if (shown.size() < value.size()) shown += "...";
      return absl::InvalidArgumentError(absl::StrCat(
          "store: Add on key ", absl::CHexEscape(key),
          " whose value is not an integer: \"", absl::CHexEscape(shown), "\""));
    }
    int64_t sum = 0;
    if (__builtin_add_overflow(current, delta, &sum)) {
      return absl::OutOfRangeError(absl::StrCat("store: Add on key ",
                                                absl::CHexEscape(key),
                                                " overflows: ", current, " + ", delta));
    }
    values_[key] = absl::StrCat(sum);
    return sum;
  }

 private:
  static absl::Status TimedOut(absl::Duration timeout,
                               const std::vector<std::string>& missing) {
    return absl::DeadlineExceededError(absl::StrCat(
        "store: timed out after ", absl::FormatDuration(timeout), " waiting for keys: ",
        absl::StrJoin(missing, ", ", [](std::string* out, const std::string& key) {
          absl::StrAppend(out, absl::CHexEscape(key));
        })));
  }

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Store> NewInMemoryStore() { return std::make_unique<InMemoryStore>(); }

}  // namespace ringside
