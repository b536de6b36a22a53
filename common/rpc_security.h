// Transport security of ringside's gRPC endpoints (the PS shards, the DDP job store,
// the launchers' rendezvous store): one shared-secret token checked on every call,
// optional TLS, and per-server connection and thread limits. docs/security.md has the
// model (what is trusted, what is not).
//
// The token is a job-wide secret of kMinTokenChars or more printable characters. It
// comes from a file (--token_file) or the environment (RINGSIDE_TOKEN), never from a
// command-line value (argv is world-readable in /proc). Clients send it as call
// metadata (kTokenMetadataKey) through a channel interceptor, so every call of a
// channel carries it; servers compare it in constant time at the top of every handler
// (CallAuthenticator). gRPC 1.51's per-call credentials and AuthMetadataProcessor are
// not used: neither applies on an insecure channel/server (the processor asserts).
#ifndef RINGSIDE_COMMON_RPC_SECURITY_H_
#define RINGSIDE_COMMON_RPC_SECURITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rpc_keepalive.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_interceptor.h"

namespace ringside {

// The environment variable that carries the job's token to its processes.
inline constexpr char kTokenEnvVar[] = "RINGSIDE_TOKEN";
// The call metadata key that carries it on the wire (lower case, as gRPC requires).
inline constexpr char kTokenMetadataKey[] = "ringside-token";
// Shortest token accepted; the launcher generates 64 hex characters (256 bits).
inline constexpr int kMinTokenChars = 16;
// Longest token accepted (a metadata value must stay small).
inline constexpr int kMaxTokenChars = 1024;

// The security a server listens with or a client connects with. There is no process-wide
// one: each server and channel is given its own (e.g. from the CLI's flags) and keeps
// the copy it was created with. Copyable; empty fields mean "none".
struct RpcSecurity {
  // The job's token. Empty: clients send none, servers check none (unauthenticated).
  std::string token;
  // TLS: the PEM contents of this process's certificate and private key and of the CA
  // that signed every certificate of the job. All three or none. With them, servers
  // listen with SslServerCredentials and require a client certificate signed by the
  // CA (mutual TLS); clients verify the server against the CA and present their own.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string tls_ca_pem;

  bool authenticated() const { return !token.empty(); }
  bool tls() const { return !tls_cert_pem.empty(); }
};

// OK if `token` can be a job token: kMinTokenChars..kMaxTokenChars characters, each
// printable ASCII without spaces. InvalidArgument (one line, not quoting the token)
// naming `source` (e.g. "RINGSIDE_TOKEN", "--token_file=/x") otherwise.
absl::Status ValidateToken(absl::string_view token, absl::string_view source);

// The token in `path` (surrounding whitespace, e.g. a final newline, removed).
// FailedPrecondition (one line naming the path) if it cannot be read or is readable
// by group or others (chmod 600 it); InvalidArgument if ValidateToken refuses it.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// The process's security from its flags and environment: the token from `token_file`
// if not empty, else from RINGSIDE_TOKEN if set (set but empty or invalid: an error),
// else none; TLS from the three PEM file paths (all empty, or all given and
// readable). Errors are one line naming the flag or variable.
absl::StatusOr<RpcSecurity> LoadRpcSecurity(const std::string& token_file,
                                            const std::string& tls_cert_file,
                                            const std::string& tls_key_file,
                                            const std::string& tls_ca_file);

// True iff a == b, in time that depends on their lengths only (not on where they
// differ), so that a caller cannot guess the token byte by byte.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// --- Clients ---

// A channel to `target` ("host:port") with `security`'s credentials (TLS or insecure)
// and an interceptor that adds the token to every call's metadata (none without one).
std::shared_ptr<grpc::Channel> NewSecureChannel(const std::string& target,
                                                const RpcSecurity& security,
                                                const grpc::ChannelArguments& args);
// The interceptor factories that add `token` to every call (empty for no token): for
// channels built elsewhere (e.g. grpc::Server::InProcessChannelWithInterceptors).
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
TokenInterceptors(const std::string& token);

// --- Servers ---

// The listening credentials for `security` (SslServerCredentials with a required,
// CA-verified client certificate under TLS; insecure otherwise).
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const RpcSecurity& security);

// The server side of the token check. Thread-safe (immutable).
class CallAuthenticator {
 public:
  // An empty token accepts every call (an unauthenticated server).
  explicit CallAuthenticator(std::string token) : token_(std::move(token)) {}

  // OK if the call carries the token (or the server has none); else UNAUTHENTICATED
  // with one line that says whether the token was missing or wrong (never what it
  // is). Call it first in every handler: a refused call must change nothing.
  grpc::Status Check(const grpc::ServerContextBase& context) const;

  bool enabled() const { return !token_.empty(); }

 private:
  const std::string token_;
};

// Per-server limits, so that idle or hostile connections cannot starve real clients.
struct ServerLimits {
  // gRPC sync-server threads (grpc::ResourceQuota::SetMaxThreads): a call that finds
  // none free is refused at once with RESOURCE_EXHAUSTED instead of growing the pool.
  int max_threads = 0;
  // Streams one connection may have open at once (GRPC_ARG_MAX_CONCURRENT_STREAMS).
  int max_concurrent_streams = 64;
  // A connection that has not finished its HTTP/2 (or TLS) handshake by then is closed.
  int handshake_timeout_ms = 10'000;
  // A connection without any call for this long is closed (clients reconnect).
  int max_connection_idle_ms = 120'000;
  // Server keepalive pings find dead or hung peers' connections (rpc_keepalive.h).
  KeepalivePolicy keepalive;
  // Largest message a server accepts.
  int max_receive_message_bytes = 4 << 20;
};

// The limits of a server that expects at most `clients` processes, each with a few
// calls in flight at once (`calls_per_client`).
ServerLimits LimitsForClients(int clients, int calls_per_client);

// Applies `limits` to `builder` (resource quota, channel arguments).
void ApplyServerLimits(const ServerLimits& limits, grpc::ServerBuilder* builder);

// One line on stderr, "ringside: warning: <what> at <address> is unauthenticated ...",
// for a server started without a token (by hand, without --token_file or RINGSIDE_TOKEN).
void WarnUnauthenticated(absl::string_view what, absl::string_view address);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_RPC_SECURITY_H_
