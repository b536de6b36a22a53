#include "common/rpc_security.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/interceptor.h"

namespace ringside {
namespace {

// Reads a whole PEM (or token) file; FailedPrecondition naming `flag` and the path.
absl::StatusOr<std::string> ReadWhole(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, "=", path, ": cannot read it (missing or not permitted)"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Adds the token to the initial metadata of every call of its channel.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* token) : token_(token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kTokenMetadataKey, *token_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const token_;  // Owned by the factory, which the channel keeps.
};

class TokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&token_);
  }

 private:
  const std::string token_;
};

}  // namespace

absl::Status ValidateToken(absl::string_view token, absl::string_view source) {
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, " is empty: give the job's token (",
                                                   kMinTokenChars, " or more characters)"));
  }
  if (token.size() < kMinTokenChars || token.size() > kMaxTokenChars) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the token has %d characters; it must have %d to %d (e.g. `head -c 32 /dev/urandom "
        "| od -An -tx1 | tr -d ' \\n'`)",
        source, token.size(), kMinTokenChars, kMaxTokenChars));
  }
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": the token must be printable ASCII without spaces or control characters"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  const std::string source = absl::StrCat("--token_file=", path);
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(source, ": cannot read it (", strerror(errno), ")"));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: the token file is open to group or others (mode %04o); chmod 600 it", source,
        st.st_mode & 07777));
  }
  absl::StatusOr<std::string> text = ReadWhole(path, "--token_file");
  if (!text.ok()) return text.status();
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (absl::Status s = ValidateToken(token, source); !s.ok()) return s;
  return token;
}

absl::StatusOr<RpcSecurity> LoadRpcSecurity(const std::string& token_file,
                                            const std::string& tls_cert_file,
                                            const std::string& tls_key_file,
                                            const std::string& tls_ca_file) {
  RpcSecurity s;
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(token_file);
    if (!token.ok()) return token.status();
    s.token = *std::move(token);
  } else if (const char* env = std::getenv(kTokenEnvVar); env != nullptr) {
    if (absl::Status v = ValidateToken(env, kTokenEnvVar); !v.ok()) return v;
    s.token = env;
  }
  const int given = !tls_cert_file.empty() + !tls_key_file.empty() + !tls_ca_file.empty();
  if (given != 0 && given != 3) {
    return absl::InvalidArgumentError(
        "TLS needs all of --tls_cert, --tls_key and --tls_ca (PEM files), or none of them");
  }
  if (given == 3) {
    absl::StatusOr<std::string> cert = ReadWhole(tls_cert_file, "--tls_cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadWhole(tls_key_file, "--tls_key");
    if (!key.ok()) return key.status();
    absl::StatusOr<std::string> ca = ReadWhole(tls_ca_file, "--tls_ca");
    if (!ca.ok()) return ca.status();
    s.tls_cert_pem = *std::move(cert);
    s.tls_key_pem = *std::move(key);
    s.tls_ca_pem = *std::move(ca);
  }
  return s;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte of the longer string is visited whatever the contents; the lengths
  // themselves are not secret (every token of a job has the same length).
  const size_t n = std::max(a.size(), b.size());
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | (x ^ y);
  }
  return diff == 0;
}

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
TokenInterceptors(const std::string& token) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> out;
  if (!token.empty()) out.push_back(std::make_unique<TokenInterceptorFactory>(token));
  return out;
}

std::shared_ptr<grpc::Channel> NewSecureChannel(const std::string& target,
                                                const RpcSecurity& security,
                                                const grpc::ChannelArguments& args) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (security.tls()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security.tls_ca_pem;
    ssl.pem_private_key = security.tls_key_pem;
    ssl.pem_cert_chain = security.tls_cert_pem;
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, credentials, args, TokenInterceptors(security.token));
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const RpcSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = security.tls_ca_pem;
  ssl.pem_key_cert_pairs.push_back({security.tls_key_pem, security.tls_cert_pem});
  return grpc::SslServerCredentials(ssl);
}

grpc::Status CallAuthenticator::Check(const grpc::ServerContextBase& context) const {
  if (token_.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kTokenMetadataKey);
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "refused: the call carried no token (this server needs the job's "
                        "token: --token_file or RINGSIDE_TOKEN)");
  }
  if (!ConstantTimeEquals(absl::string_view(it->second.data(), it->second.size()), token_)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "refused: wrong token (not this job's --token_file or RINGSIDE_TOKEN)");
  }
  return grpc::Status::OK;
}

ServerLimits LimitsForClients(int clients, int calls_per_client) {
  ServerLimits limits;
  // Room for every client's calls, the sync server's pollers and a margin.
  limits.max_threads = std::max(64, std::max(1, clients) * std::max(1, calls_per_client) + 32);
  return limits;
}

void ApplyServerLimits(const ServerLimits& limits, grpc::ServerBuilder* builder) {
  if (limits.max_threads > 0) {
    grpc::ResourceQuota quota("ringside-server");
    quota.SetMaxThreads(limits.max_threads);
    builder->SetResourceQuota(quota);
  }
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams);
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, limits.handshake_timeout_ms);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, limits.max_connection_idle_ms);
  SetServerKeepalive(limits.keepalive, builder);
  builder->SetMaxReceiveMessageSize(limits.max_receive_message_bytes);
}

void WarnUnauthenticated(absl::string_view what, absl::string_view address) {
  absl::FPrintF(stderr,
                "ringside: warning: %s at %s is unauthenticated (no --token_file or %s): any "
                "local process can call it\n",
                what, address, kTokenEnvVar);
}

}  // namespace ringside
