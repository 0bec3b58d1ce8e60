#ifndef SERVER_SECURITY_AUTHZ_H_
#define SERVER_SECURITY_AUTHZ_H_

#include <grpcpp/grpcpp.h>

#include <array>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "informer/object/object.h"
#include "informer/util/yaml_reader.h"

namespace server {

// True when `name` names the core Secrets resource the way a user may write
// it: "secrets", "secret", "Secret", "secrets.v1", "secret.v1.", "v1/secrets",
// any case. Secrets of another API group ("secrets.example.com") are not.
bool IsSecretsResource(absl::string_view name);

// What one bearer token may read.
struct TokenGrant {
  // For logs and errors; never the token itself.
  std::string name;
  // Resource names as the sidecar is configured with them (and requests
  // name them). "*" = every configured resource except Secrets, which must
  // be named explicitly.
  std::vector<std::string> resources;
  // Namespaces; empty or "*" = all namespaces and cluster-scoped objects.
  std::vector<std::string> namespaces;
  // May record Kubernetes Events through the sidecar (informer.v1.Events),
  // in its namespaces. Default false.
  bool record_events = false;

  bool AllNamespaces() const;
};

// Authorizer decides who may read what from the sidecar's caches.
//
// Authentication: with a tokens file, every informer.v1 call must carry the
// metadata "authorization: Bearer <token>" with one of the file's tokens,
// else UNAUTHENTICATED. Tokens are kept only as SHA-256 digests and compared
// in constant time against every known token (no early exit), so neither
// the memory nor the timing of a check reveals them. Without a tokens file
// every caller may read every configured resource (the sidecar then relies
// on listening on loopback or a unix socket).
//
// Authorization: a read of resource R in namespace N ("" = all namespaces,
// or a cluster-scoped object) is allowed when the token's grant lists R
// (or "*", which never covers Secrets) and N (or all namespaces); otherwise
// PERMISSION_DENIED naming the token, the resource and the namespace.
//
// Secrets: unless `allow_secrets`, reading the Secrets resource is
// PERMISSION_DENIED for everybody, and a tokens file granting it is refused
// at load time.
//
// Thread-safety: immutable after construction; every method may be called
// from any thread.
class Authorizer {
 public:
  struct Options {
    // Serve Secrets (only to tokens that name them, with a tokens file).
    bool allow_secrets = false;
    // The configured resource names; the tokens file's resources must be
    // among them (or "*"). Empty: not checked (tests).
    std::vector<std::string> configured_resources;
  };

  // No tokens: everybody may read everything but (unless allowed) Secrets.
  static std::unique_ptr<Authorizer> AllowAll(Options options);

  // Reads a tokens file (YAML):
  //   tokens:
  //   - name: app                      # required, unique
  //     token: "long-random-string"    # or tokenFile: path (relative to
  //                                    # the tokens file's directory)
  //     resources: [pods, configmaps]  # required; "*" = all but Secrets
  //     namespaces: [default]          # optional; absent/"*" = all
  //     recordEvents: true             # optional; default false
  // InvalidArgument naming the file, line and field for any mistake:
  // unknown keys, missing or empty fields, duplicate names or tokens,
  // unknown resources, Secrets without allow_secrets. Errors never quote
  // token values.
  static absl::StatusOr<std::unique_ptr<Authorizer>> FromTokensFile(
      const std::string& path, Options options);
  // The same from text; `origin` names it in errors, and tokenFile paths
  // are relative to `base_dir`.
  static absl::StatusOr<std::unique_ptr<Authorizer>> FromTokensYaml(
      absl::string_view yaml, absl::string_view origin,
      absl::string_view base_dir, Options options);

  // Whether calls must carry a token.
  bool requires_token() const { return !tokens_.empty(); }
  bool allow_secrets() const { return options_.allow_secrets; }
  // The tokens' names, in file order.
  std::vector<std::string> token_names() const;

  // The caller's grant, from the value of its "authorization" metadata
  // (nullopt when absent). UNAUTHENTICATED when a token is required and the
  // header is missing, not "Bearer <token>", or names no known token.
  absl::StatusOr<const TokenGrant*> Authenticate(
      absl::optional<absl::string_view> authorization) const;
  // The same from a call's metadata (several "authorization" entries are
  // refused as ambiguous).
  absl::StatusOr<const TokenGrant*> Authenticate(
      const grpc::ServerContextBase& context) const;

  // OK, or PERMISSION_DENIED (see the class comment). `ns` "" = every
  // namespace.
  absl::Status CheckRead(const TokenGrant& grant, absl::string_view resource,
                         absl::string_view ns) const;
  // OK, or PERMISSION_DENIED unless the grant has record_events and may
  // use namespace `ns`.
  absl::Status CheckRecordEvents(const TokenGrant& grant,
                                 absl::string_view ns) const;
  // Whether `grant` may read `resource` in at least one namespace.
  bool MayReadResource(const TokenGrant& grant,
                       absl::string_view resource) const;

 private:
  struct Token {
    std::array<unsigned char, 32> digest;
    TokenGrant grant;
  };

  explicit Authorizer(Options options) : options_(std::move(options)) {}

  // Reads tokens[i] (`field`) of a tokens file into tokens_: a unique name,
  // a token distinct from every other (kept as its digest only), and its
  // grant. False once `r` holds the error.
  bool AddToken(informer::YamlReader* r, const YAML::Node& entry,
                const std::string& field, absl::string_view base_dir,
                std::set<std::string>* names);

  absl::Status CheckResource(const TokenGrant& grant,
                             absl::string_view resource) const;

  const Options options_;
  std::vector<Token> tokens_;
  // The grant of every caller when no token is required.
  TokenGrant anonymous_;
};

// The informer.v1 services' checks, as gRPC statuses. A null authorizer
// allows everything (unit tests of other features). Each authenticates the
// call from its metadata; denials are logged (VLOG 1) with the peer and the
// token's name, never the token.

// Authentication only (e.g. ListResources, whose answer is then filtered).
grpc::Status AuthorizeCall(const Authorizer* authorizer,
                           const grpc::ServerContextBase& context);
// A read of `resource` in `ns` ("" = all namespaces).
grpc::Status AuthorizeRead(const Authorizer* authorizer,
                           const grpc::ServerContextBase& context,
                           absl::string_view resource, absl::string_view ns);
// A read of `resource` in whichever namespaces the token may read (ByIndex,
// whose results are then filtered with FilterReadable).
grpc::Status AuthorizeResource(const Authorizer* authorizer,
                               const grpc::ServerContextBase& context,
                               absl::string_view resource);
// Drops the objects outside the caller's namespaces (none without an
// authorizer or for an all-namespaces token). Call after an OK check.
void FilterReadable(const Authorizer* authorizer,
                    const grpc::ServerContextBase& context,
                    std::vector<informer::ObjectPtr>* objects);
// Recording an Event in namespace `ns` (informer.v1.Events).
grpc::Status AuthorizeRecordEvents(const Authorizer* authorizer,
                                   const grpc::ServerContextBase& context,
                                   absl::string_view ns);
// Whether the caller may read `resource` at all (ListResources' filter).
bool MayReadResource(const Authorizer* authorizer,
                     const grpc::ServerContextBase& context,
                     absl::string_view resource);

// A server-streaming reactor that only ends the call with `status`, for
// refusing a callback stream before it starts. Deletes itself when done.
template <typename Response>
grpc::ServerWriteReactor<Response>* RefuseStream(grpc::Status status) {
  class Refusal final : public grpc::ServerWriteReactor<Response> {
   public:
    explicit Refusal(grpc::Status s) { this->Finish(std::move(s)); }
    void OnDone() override { delete this; }
  };
  return new Refusal(std::move(status));
}

// The same for client-streaming and bidirectional callback methods.
template <typename Request>
grpc::ServerReadReactor<Request>* RefuseReadStream(grpc::Status status) {
  class Refusal final : public grpc::ServerReadReactor<Request> {
   public:
    explicit Refusal(grpc::Status s) { this->Finish(std::move(s)); }
    void OnDone() override { delete this; }
  };
  return new Refusal(std::move(status));
}
template <typename Request, typename Response>
grpc::ServerBidiReactor<Request, Response>* RefuseBidiStream(
    grpc::Status status) {
  class Refusal final : public grpc::ServerBidiReactor<Request, Response> {
   public:
    explicit Refusal(grpc::Status s) { this->Finish(std::move(s)); }
    void OnDone() override { delete this; }
  };
  return new Refusal(std::move(status));
}

}  // namespace server

#endif  // SERVER_SECURITY_AUTHZ_H_
