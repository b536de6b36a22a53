// A client of PyTorch's c10d TCPStore, as torch 1.13 speaks it (the server torchrun's
// agent hosts on MASTER_PORT in its static rendezvous). Protocol, read from
// torch/csrc/distributed/c10d/TCPStore.cpp (v1.13) and checked against
// python3-torch 1.13's server (store_test.cc runs the Store contract against it):
//   - no handshake; a request is one query byte and its arguments, a reply follows on
//     the same connection for the queries that have one;
//   - integers are in host byte order (the client and server are both little-endian
//     here, as on every platform torch supports); a string or blob is its uint64
//     length then its bytes;
//   - SET(0) key value          -> no reply
//     GET(2) key                -> value (the key must exist: the server drops a
//                                  client that asks for a missing key, so a WAIT
//                                  goes first, as torch's own client does)
//     ADD(3) key int64          -> int64, the new value (stored as decimal text)
//     CHECK(4) uint64 n, n keys -> uint8: READY(0) or NOT_READY(1)
//     WAIT(5) uint64 n, n keys  -> uint8 STOP_WAITING(0), once every key exists;
//   - torch's client puts "/" before every key on the wire; so does this one, so that
//     both see the same keys.
// A WAIT cannot be cancelled in 1.13: a call that times out closes its connection, so
// that a late STOP_WAITING never answers a later request.
#include <poll.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/socket_io.h"
#include "ddp_ring/store.h"

namespace ringside {
namespace {

enum Query : uint8_t { kSet = 0, kGet = 2, kAdd = 3, kCheck = 4, kWait = 5 };
constexpr uint8_t kReady = 0;        // CHECK's reply.
constexpr uint8_t kStopWaiting = 0;  // WAIT's reply.

// One request's bytes.
class Request {
 public:
  explicit Request(Query query) { bytes_.push_back(static_cast<char>(query)); }
  template <typename T>
  Request& Value(T value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(value));
    return *this;
  }
  Request& Blob(const std::string& blob) {
    Value<uint64_t>(blob.size());
    bytes_ += blob;
    return *this;
  }
  Request& Key(const std::string& key) { return Blob(absl::StrCat("/", key)); }
  Request& Keys(const std::vector<std::string>& keys) {
    Value<uint64_t>(keys.size());
    for (const std::string& key : keys) Key(key);
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

std::string Escaped(const std::vector<std::string>& keys) {
  return absl::StrJoin(keys, ", ", [](std::string* out, const std::string& key) {
    absl::StrAppend(out, absl::CHexEscape(key));
  });
}

class TorchStoreClient final : public Store {
 public:
  TorchStoreClient(std::string host, int port, absl::Duration rpc_timeout)
      : host_(std::move(host)), port_(port), rpc_timeout_(rpc_timeout) {}

  // Opens a first connection, retrying while it is refused (the server may come up
  // after this client) until `deadline`.
  absl::Status Connect(absl::Time deadline) {
    absl::Status last;
    do {
      absl::StatusOr<ScopedFd> fd = ConnectTcp(host_, absl::StrCat(port_), deadline);
      if (fd.ok()) {
        Give(std::move(*fd));
        return absl::OkStatus();
      }
      if (absl::IsInvalidArgument(fd.status())) return fd.status();  // Does not resolve.
      last = fd.status();
      absl::SleepFor(absl::Milliseconds(50));
    } while (absl::Now() < deadline);
    return absl::UnavailableError(absl::StrCat("cannot reach the torch store at ", Where(), ": ",
                                               last.message()));
  }

  absl::Status Set(const std::string& key, const std::string& value) override {
    return Call(Request(kSet).Key(key).Blob(value), absl::Now() + rpc_timeout_,
                [](int, absl::Time) { return absl::OkStatus(); });
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    RINGSIDE_RETURN_IF_ERROR(Wait({key}, timeout));
    std::string value;
    RINGSIDE_RETURN_IF_ERROR(Call(Request(kGet).Key(key), absl::Now() + rpc_timeout_,
                                  [&value](int fd, absl::Time deadline) {
                                    return ReadBlob(fd, deadline, &value);
                                  }));
    return value;
  }

  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    RINGSIDE_ASSIGN_OR_RETURN(std::vector<std::string> missing, Missing(keys));
    if (missing.empty()) return absl::OkStatus();
    if (timeout > absl::ZeroDuration()) {
      absl::Status waited =
          Call(Request(kWait).Keys(missing), absl::Now() + timeout, [](int fd, absl::Time deadline) {
            uint8_t reply = 0;
            RINGSIDE_RETURN_IF_ERROR(ReadAll(fd, &reply, 1, deadline));
            if (reply != kStopWaiting) return absl::InternalError("unexpected reply to WAIT");
            return absl::OkStatus();
          });
      if (!absl::IsDeadlineExceeded(waited)) return waited;
      RINGSIDE_ASSIGN_OR_RETURN(missing, Missing(missing));
      if (missing.empty()) return absl::OkStatus();  // Set just as the time ran out.
    }
    return absl::DeadlineExceededError(absl::StrCat("store: timed out after ",
                                                    absl::FormatDuration(timeout),
                                                    " waiting for keys: ", Escaped(missing)));
  }

  // torch's server adds to whatever leading digits a value has ("10.0.0.1" + 1 = 11)
  // or drops the client, so the value is checked first. Not atomic with the ADD: a
  // concurrent Set of a non-integer goes unnoticed (no rank does that).
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    absl::StatusOr<std::string> value = Get(key, absl::ZeroDuration());
    int64_t parsed = 0;
    if (value.ok() && !absl::SimpleAtoi(*value, &parsed)) {
      return absl::InvalidArgumentError(absl::StrCat("store: Add on key ", absl::CHexEscape(key),
                                                     " whose value is not an integer"));
    }
    if (!value.ok() && !absl::IsDeadlineExceeded(value.status())) return value.status();
    int64_t sum = 0;
    RINGSIDE_RETURN_IF_ERROR(Call(Request(kAdd).Key(key).Value(delta), absl::Now() + rpc_timeout_,
                                  [&sum](int fd, absl::Time deadline) {
                                    return ReadAll(fd, &sum, sizeof(sum), deadline);
                                  }));
    return sum;
  }

 private:
  std::string Where() const { return absl::StrCat(host_, ":", port_); }

  static absl::Status ReadBlob(int fd, absl::Time deadline, std::string* blob) {
    uint64_t size = 0;
    RINGSIDE_RETURN_IF_ERROR(ReadAll(fd, &size, sizeof(size), deadline));
    blob->resize(size);
    return ReadAll(fd, blob->data(), size, deadline);
  }

  // The keys of `keys` that do not exist yet (one CHECK per key; a CHECK of several
  // answers only "all or not").
  absl::StatusOr<std::vector<std::string>> Missing(const std::vector<std::string>& keys) {
    std::vector<std::string> missing;
    const bool one = keys.size() == 1;
    uint8_t reply = 0;
    auto read = [&reply](int fd, absl::Time deadline) { return ReadAll(fd, &reply, 1, deadline); };
    RINGSIDE_RETURN_IF_ERROR(Call(Request(kCheck).Keys(keys), absl::Now() + rpc_timeout_, read));
    if (reply == kReady) return missing;
    if (one) return keys;
    for (const std::string& key : keys) {
      RINGSIDE_RETURN_IF_ERROR(Call(Request(kCheck).Keys({key}), absl::Now() + rpc_timeout_, read));
      if (reply != kReady) missing.push_back(key);
    }
    return missing;
  }

  // Sends `request` on an idle connection (or a new one) and reads its reply with
  // `read_reply`, all before `deadline`. The connection goes back to the pool only if
  // the exchange completed.
  template <typename ReadReply>
  absl::Status Call(const Request& request, absl::Time deadline, ReadReply read_reply) {
    RINGSIDE_ASSIGN_OR_RETURN(ScopedFd fd, Take(deadline));
    absl::Status status = WriteAll(fd.get(), request.bytes().data(), request.bytes().size(), deadline);
    if (status.ok()) status = read_reply(fd.get(), deadline);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("torch store at ", Where(), ": ", status.message()));
    }
    Give(std::move(fd));
    return absl::OkStatus();
  }

  absl::StatusOr<ScopedFd> Take(absl::Time deadline) {
    {
      absl::MutexLock lock(&mu_);
      if (!idle_.empty()) {
        ScopedFd fd = std::move(idle_.back());
        idle_.pop_back();
        return fd;
      }
    }
    absl::StatusOr<ScopedFd> fd = ConnectTcp(host_, absl::StrCat(port_), deadline);
    if (!fd.ok()) return absl::UnavailableError(absl::StrCat("torch store: ", fd.status().message()));
    return fd;
  }

  void Give(ScopedFd fd) {
    absl::MutexLock lock(&mu_);
    idle_.push_back(std::move(fd));
  }

  const std::string host_;
  const int port_;
  const absl::Duration rpc_timeout_;
  absl::Mutex mu_;
  std::vector<ScopedFd> idle_ ABSL_GUARDED_BY(mu_);  // Connections with no call under way.
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> ConnectTorchStore(const std::string& host, int port,
                                                         absl::Duration connect_timeout,
                                                         absl::Duration rpc_timeout) {
  auto store = std::make_unique<TorchStoreClient>(host, port, rpc_timeout);
  RINGSIDE_RETURN_IF_ERROR(store->Connect(absl::Now() + connect_timeout));
  return store;
}

}  // namespace ringside
