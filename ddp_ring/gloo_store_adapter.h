// GlooStoreAdapter: lets Gloo's rendezvous (gloo::rendezvous::Context::connectFullMesh)
// run over a ringside::Store, so that Gloo ranks exchange their TCP addresses through
// the same store (in-process or gRPC) as everything else in ringside.
#ifndef RINGSIDE_DDP_RING_GLOO_STORE_ADAPTER_H_
#define RINGSIDE_DDP_RING_GLOO_STORE_ADAPTER_H_

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ddp_ring/store.h"

namespace ringside {

// Forwards Gloo's store calls to a ringside::Store. Every blocking call is bounded:
// get() and wait(keys) use the adapter's timeout, wait(keys, timeout) the one given.
//
// Gloo's interface has no way to return an error, so a failed call throws
// gloo::IoException whose message names the key(s) and the store's status. The first
// such status is also kept (first_error()) so that the caller, which catches the
// exception, can report it with its original code (DeadlineExceeded, Unavailable).
//
// Thread-safe (as thread-safe as the wrapped store, which must outlive the adapter).
class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(ringside::Store* store, absl::Duration timeout);
  ~GlooStoreAdapter() override = default;

  GlooStoreAdapter(const GlooStoreAdapter&) = delete;
  GlooStoreAdapter& operator=(const GlooStoreAdapter&) = delete;

  // Store::Set; throws gloo::IoException on failure.
  void set(const std::string& key, const std::vector<char>& data) override;
  // Blocks until `key` exists (Gloo's rendezvous relies on this), at most the
  // adapter's timeout; throws gloo::IoException on failure or timeout.
  std::vector<char> get(const std::string& key) override;
  // Store::Wait with the adapter's timeout; throws gloo::IoException on failure.
  void wait(const std::vector<std::string>& keys) override;
  // Store::Wait with `timeout` (the adapter's timeout if `timeout` is zero or
  // negative, Gloo's convention for "none given"); throws gloo::IoException.
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The status of the first call that failed; OK if none has.
  absl::Status first_error() const;

 private:
  // Records `status` (if it is the first failure) and throws it as gloo::IoException.
  [[noreturn]] void Fail(const absl::Status& status);

  ringside::Store* const store_;
  const absl::Duration timeout_;

  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_GLOO_STORE_ADAPTER_H_
