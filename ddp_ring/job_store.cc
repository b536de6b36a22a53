#include "ddp_ring/job_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/rpc_security.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

// The job's store as its ranks see it: a view of a client, owning the server that
// rank 0 hosts (if any). Members are destroyed view first, server last.
class JoinedStore final : public Store {
 public:
  JoinedStore(std::unique_ptr<StoreServer> server, std::unique_ptr<Store> client,
              const std::string& prefix)
      : server_(std::move(server)),
        client_(std::move(client)),
        view_(prefix.empty() ? nullptr : NewPrefixStore(prefix, client_.get())) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    return store()->Set(key, value);
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    return store()->Get(key, timeout);
  }
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    return store()->Wait(keys, timeout);
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    return store()->Add(key, delta);
  }

 private:
  Store* store() const { return view_ != nullptr ? view_.get() : client_.get(); }

  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<Store> client_;
  std::unique_ptr<Store> view_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> JoinJobStore(const JobEnv& env,
                                                    const RpcSecurity& security,
                                                    absl::Duration timeout) {
  const std::string me = absl::StrCat("rank ", env.rank);
  if (env.agent_store) {
    absl::StatusOr<std::unique_ptr<Store>> client =
        ConnectTorchStore(env.master_addr, env.master_port, timeout, StoreRpcTimeout(timeout));
    if (!client.ok()) return Annotate(client.status(), absl::StrCat(me, ": joining torchrun's agent store"));
    return std::unique_ptr<Store>(new JoinedStore(
        nullptr, std::move(*client), absl::StrCat("/worker/attempt_", env.restart_count)));
  }
  std::unique_ptr<StoreServer> server;
  if (env.rank == 0) {
    // Bound to MASTER_ADDR only (the address every rank dials), capped for the job's ranks.
    absl::StatusOr<std::unique_ptr<StoreServer>> started =
        StoreServer::Start(env.master_addr, env.master_port, security, env.world_size);
    if (!started.ok()) return Annotate(started.status(), absl::StrCat(me, ": hosting the store"));
    server = std::move(*started);
    if (!security.authenticated()) {
      WarnUnauthenticated("the job's store", absl::StrCat(env.master_addr, ":", env.master_port));
    }
  }
  absl::StatusOr<std::unique_ptr<Store>> client =
      ConnectStore(env.master_addr, env.master_port, security, timeout, StoreRpcTimeout(timeout));
  if (!client.ok()) return Annotate(client.status(), me);
  return std::unique_ptr<Store>(new JoinedStore(std::move(server), std::move(*client), ""));
}

absl::Duration StoreRpcTimeout(absl::Duration timeout) {
  return std::clamp(timeout / 4, absl::Seconds(1), absl::Seconds(10));
}

std::string ReachableAddress(const JobEnv& env) {
  if (const char* h = std::getenv("RINGSIDE_HOSTNAME"); h != nullptr && *h != '\0') return h;
  if (absl::StartsWith(env.master_addr, "127.") || env.master_addr == "localhost") {
    return "127.0.0.1";
  }
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace ringside
