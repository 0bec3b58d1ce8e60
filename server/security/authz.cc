#include "server/security/authz.h"

#include <glog/logging.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <exception>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "informer/util/read_file.h"
#include "informer/util/yaml_reader.h"

namespace server {
namespace {

using Digest = std::array<unsigned char, 32>;

Digest Sha256(absl::string_view data) {
  Digest out{};
  unsigned int len = 0;
  // EVP_Digest with SHA-256 fails only without memory; a zero digest
  // would make every failed hash compare equal, so that is fatal.
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(),
                 nullptr) != 1) {
    LOG(FATAL) << "SHA-256 failed";
  }
  return out;
}

std::string DirName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

bool Contains(const std::vector<std::string>& list, absl::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// A token's value from "token" or "tokenFile" (relative to `base_dir`):
// exactly one of them, not empty, without whitespace.
bool ReadTokenValue(informer::YamlReader* r, const YAML::Node& entry,
                    const std::string& named, absl::string_view base_dir,
                    std::string* value) {
  std::string file;
  if (!r->String(entry, "token", named, value) ||
      !r->String(entry, "tokenFile", named, &file)) {
    return false;
  }
  if (entry["token"].IsDefined() == entry["tokenFile"].IsDefined()) {
    return r->Fail(entry, named,
                   "set exactly one of \"token\" and \"tokenFile\"");
  }
  const std::string field = named + (file.empty() ? ".token" : ".tokenFile");
  if (!file.empty()) {
    const std::string path =
        absl::StartsWith(file, "/") ? file : absl::StrCat(base_dir, "/", file);
    absl::StatusOr<std::string> content = informer::ReadFile(path);
    if (!content.ok()) {
      return r->Fail(entry["tokenFile"], field, content.status().message());
    }
    *value = std::string(absl::StripAsciiWhitespace(*content));
  }
  if (value->empty()) return r->Fail(entry, field, "the token is empty");
  if (std::any_of(value->begin(), value->end(), [](char c) {
        return absl::ascii_isspace(static_cast<unsigned char>(c));
      })) {
    return r->Fail(entry, field, "the token contains whitespace");
  }
  return true;
}

// The resources a token may read: required; Secrets only with
// --allow_secrets; each one configured, when resources are configured.
bool ReadResources(informer::YamlReader* r, const YAML::Node& entry,
                   const std::string& named, const Authorizer::Options& opts,
                   std::vector<std::string>* resources) {
  if (!r->StringList(entry, "resources", named, resources)) return false;
  const std::string field = named + ".resources";
  if (resources->empty()) {
    return r->Fail(entry, field,
                   "required: the resources this token may read (\"*\" "
                   "= all but secrets)");
  }
  for (const std::string& resource : *resources) {
    if (resource == "*") continue;
    if (IsSecretsResource(resource) && !opts.allow_secrets) {
      return r->Fail(entry["resources"], field,
                     absl::StrCat("\"", resource,
                                  "\": Secrets are withheld unless the "
                                  "sidecar runs with --allow_secrets"));
    }
    if (!opts.configured_resources.empty() &&
        !Contains(opts.configured_resources, resource)) {
      return r->Fail(
          entry["resources"], field,
          absl::StrCat("\"", resource,
                       "\" is not a configured resource (configured: ",
                       absl::StrJoin(opts.configured_resources, ", "),
                       "; name them exactly as configured)"));
    }
  }
  return true;
}

absl::Status Unauthenticated(absl::string_view why) {
  return absl::UnauthenticatedError(why);
}

}  // namespace

bool IsSecretsResource(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  absl::string_view n = lower;
  while (absl::ConsumeSuffix(&n, ".")) {
  }
  auto is_secret = [](absl::string_view r) {
    return r == "secret" || r == "secrets";
  };
  if (absl::StrContains(n, '/')) {
    // "v1/secrets", "/v1/secrets", "core/v1/secrets".
    std::vector<absl::string_view> parts = absl::StrSplit(n, '/');
    if (!is_secret(parts.back())) return false;
    if (parts.size() == 2) return true;
    return parts.size() == 3 && (parts[0].empty() || parts[0] == "core");
  }
  // "secrets", "secrets.v1", "secrets.v1.core", "secret.core".
  const size_t dot = n.find('.');
  if (!is_secret(n.substr(0, dot))) return false;
  if (dot == absl::string_view::npos) return true;
  absl::string_view rest = n.substr(dot + 1);
  return rest == "v1" || rest == "core" || rest == "v1.core";
}

bool TokenGrant::AllNamespaces() const {
  return namespaces.empty() || Contains(namespaces, "*");
}

std::unique_ptr<Authorizer> Authorizer::AllowAll(Options options) {
  std::unique_ptr<Authorizer> authorizer(new Authorizer(std::move(options)));
  authorizer->anonymous_.name = "anonymous";
  authorizer->anonymous_.resources = {"*"};
  return authorizer;
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::FromTokensFile(
    const std::string& path, Options options) {
  absl::StatusOr<std::string> text = informer::ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokens_file: ", text.status().message()));
  }
  return FromTokensYaml(*text, path, DirName(path), std::move(options));
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::FromTokensYaml(
    absl::string_view yaml, absl::string_view origin,
    absl::string_view base_dir, Options options) {
  std::unique_ptr<Authorizer> authorizer = AllowAll(std::move(options));
  absl::StatusOr<YAML::Node> loaded = informer::LoadYaml(yaml, origin);
  if (!loaded.ok()) return loaded.status();
  informer::YamlReader r(origin);
  try {
    const YAML::Node& root = *loaded;
    if (!root.IsMap()) {
      r.Fail(root, "(top level)", "expected a mapping with a \"tokens\" list");
      return r.status();
    }
    if (!r.KnownKeys(root, "", {"tokens"})) return r.status();
    const YAML::Node list = root["tokens"];
    if (!list.IsDefined() || !list.IsSequence() || list.size() == 0) {
      r.Fail(list.IsDefined() ? list : root, "tokens",
             "expected a non-empty list of tokens");
      return r.status();
    }
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!authorizer->AddToken(&r, list[i], absl::StrCat("tokens[", i, "]"),
                                base_dir, &names)) {
        return r.status();
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", e.what()));
  }
  return authorizer;
}

bool Authorizer::AddToken(informer::YamlReader* r, const YAML::Node& entry,
                          const std::string& field, absl::string_view base_dir,
                          std::set<std::string>* names) {
  if (!entry.IsMap()) {
    return r->Fail(entry, field,
                   "expected a mapping (name, token or tokenFile, resources, "
                   "namespaces)");
  }
  if (!r->KnownKeys(entry, field,
                    {"name", "token", "tokenFile", "resources", "namespaces",
                     "recordEvents"})) {
    return false;
  }
  Token token;
  TokenGrant& grant = token.grant;
  if (!r->String(entry, "name", field, &grant.name)) return false;
  if (grant.name.empty()) return r->Fail(entry, field + ".name", "required");
  const std::string named = absl::StrCat(field, " (\"", grant.name, "\")");
  if (!names->insert(grant.name).second) {
    return r->Fail(entry["name"], named + ".name", "duplicate name");
  }
  std::string value;
  if (!ReadTokenValue(r, entry, named, base_dir, &value)) return false;
  if (value.size() < 16) {
    LOG(WARNING) << r->Where(entry) << ": " << named
                 << ": the token is shorter than 16 characters; use a long "
                    "random string";
  }
  token.digest = Sha256(value);
  // Wipe the plaintext copy; only the digest is kept.
  OPENSSL_cleanse(value.data(), value.size());
  for (const Token& other : tokens_) {
    if (CRYPTO_memcmp(other.digest.data(), token.digest.data(),
                      token.digest.size()) == 0) {
      return r->Fail(entry, named,
                     absl::StrCat("the same token as \"", other.grant.name,
                                  "\"; every token must be distinct"));
    }
  }
  if (!ReadResources(r, entry, named, options_, &grant.resources) ||
      !r->StringList(entry, "namespaces", named, &grant.namespaces) ||
      !r->Bool(entry, "recordEvents", named, &grant.record_events)) {
    return false;
  }
  tokens_.push_back(std::move(token));
  return true;
}

std::vector<std::string> Authorizer::token_names() const {
  std::vector<std::string> names;
  for (const Token& t : tokens_) names.push_back(t.grant.name);
  return names;
}

absl::StatusOr<const TokenGrant*> Authorizer::Authenticate(
    absl::optional<absl::string_view> authorization) const {
  if (!requires_token()) return &anonymous_;
  if (!authorization.has_value()) {
    return Unauthenticated(
        "missing bearer token: send the metadata \"authorization: Bearer "
        "<token>\"");
  }
  absl::string_view value = absl::StripAsciiWhitespace(*authorization);
  constexpr absl::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme) ||
      !absl::ascii_isspace(static_cast<unsigned char>(value[kScheme.size()]))) {
    return Unauthenticated(
        "the \"authorization\" metadata must be \"Bearer <token>\"");
  }
  const Digest digest =
      Sha256(absl::StripAsciiWhitespace(value.substr(kScheme.size())));
  // Compare against every token without stopping at a match.
  const TokenGrant* found = nullptr;
  for (const Token& token : tokens_) {
    const bool equal =
        CRYPTO_memcmp(token.digest.data(), digest.data(), digest.size()) == 0;
    if (equal) found = &token.grant;
  }
  if (found == nullptr) return Unauthenticated("invalid bearer token");
  return found;
}

absl::StatusOr<const TokenGrant*> Authorizer::Authenticate(
    const grpc::ServerContextBase& context) const {
  if (!requires_token()) return &anonymous_;
  const auto& metadata = context.client_metadata();
  auto [begin, end] = metadata.equal_range("authorization");
  if (begin == end) return Authenticate(absl::nullopt);
  if (std::next(begin) != end) {
    return Unauthenticated(
        "several \"authorization\" metadata entries; send exactly one");
  }
  return Authenticate(
      absl::string_view(begin->second.data(), begin->second.size()));
}

absl::Status Authorizer::CheckResource(const TokenGrant& grant,
                                       absl::string_view resource) const {
  if (IsSecretsResource(resource)) {
    if (!options_.allow_secrets) {
      return absl::PermissionDeniedError(
          absl::StrCat("\"", resource,
                       "\": Secrets are withheld (the sidecar runs without "
                       "--allow_secrets)"));
    }
    // With tokens, Secrets must be named: "*" does not cover them.
    if (!requires_token() || Contains(grant.resources, resource)) {
      return absl::OkStatus();
    }
  } else if (Contains(grant.resources, "*") ||
             Contains(grant.resources, resource)) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "token \"", grant.name, "\" may not read \"", resource,
      "\" (it may read: ", absl::StrJoin(grant.resources, ", "), ")"));
}

absl::Status Authorizer::CheckRead(const TokenGrant& grant,
                                   absl::string_view resource,
                                   absl::string_view ns) const {
  if (absl::Status st = CheckResource(grant, resource); !st.ok()) return st;
  if (grant.AllNamespaces() ||
      (!ns.empty() && Contains(grant.namespaces, ns))) {
    return absl::OkStatus();
  }
  const std::string allowed = absl::StrJoin(grant.namespaces, ", ");
  if (ns.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "token \"", grant.name, "\" may not read \"", resource,
        "\" in all namespaces (or cluster-scoped): it may read only the "
        "namespaces ",
        allowed, "; set the request's namespace"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat("token \"", grant.name, "\" may not read \"", resource,
                   "\" in namespace \"", ns, "\" (it may read the namespaces ",
                   allowed, ")"));
}

absl::Status Authorizer::CheckRecordEvents(const TokenGrant& grant,
                                           absl::string_view ns) const {
  if (!requires_token()) return absl::OkStatus();
  if (!grant.record_events) {
    return absl::PermissionDeniedError(
        absl::StrCat("token \"", grant.name,
                     "\" may not record events (recordEvents is not set)"));
  }
  if (grant.AllNamespaces() ||
      (!ns.empty() && Contains(grant.namespaces, ns))) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "token \"", grant.name, "\" may not record events in namespace \"", ns,
      "\" (it may use the namespaces ", absl::StrJoin(grant.namespaces, ", "),
      ")"));
}

bool Authorizer::MayReadResource(const TokenGrant& grant,
                                 absl::string_view resource) const {
  return CheckResource(grant, resource).ok();
}

namespace {

grpc::Status Denied(const grpc::ServerContextBase& context,
                    const absl::Status& status) {
  VLOG(1) << "authz: refused a call from " << context.peer() << ": " << status;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace

grpc::Status AuthorizeCall(const Authorizer* authorizer,
                           const grpc::ServerContextBase& context) {
  if (authorizer == nullptr) return grpc::Status::OK;
  absl::StatusOr<const TokenGrant*> grant = authorizer->Authenticate(context);
  if (!grant.ok()) return Denied(context, grant.status());
  return grpc::Status::OK;
}

grpc::Status AuthorizeRead(const Authorizer* authorizer,
                           const grpc::ServerContextBase& context,
                           absl::string_view resource, absl::string_view ns) {
  if (authorizer == nullptr) return grpc::Status::OK;
  absl::StatusOr<const TokenGrant*> grant = authorizer->Authenticate(context);
  if (!grant.ok()) return Denied(context, grant.status());
  if (absl::Status st = authorizer->CheckRead(**grant, resource, ns);
      !st.ok()) {
    return Denied(context, st);
  }
  return grpc::Status::OK;
}

grpc::Status AuthorizeResource(const Authorizer* authorizer,
                               const grpc::ServerContextBase& context,
                               absl::string_view resource) {
  if (authorizer == nullptr) return grpc::Status::OK;
  absl::StatusOr<const TokenGrant*> grant = authorizer->Authenticate(context);
  if (!grant.ok()) return Denied(context, grant.status());
  if (absl::Status st = authorizer->CheckRead(
          **grant, resource,
          (*grant)->AllNamespaces() ? "" : (*grant)->namespaces.front());
      !st.ok()) {
    return Denied(context, st);
  }
  return grpc::Status::OK;
}

void FilterReadable(const Authorizer* authorizer,
                    const grpc::ServerContextBase& context,
                    std::vector<informer::ObjectPtr>* objects) {
  if (authorizer == nullptr) return;
  absl::StatusOr<const TokenGrant*> grant = authorizer->Authenticate(context);
  if (!grant.ok()) {  // callers checked first; fail closed anyway
    objects->clear();
    return;
  }
  if ((*grant)->AllNamespaces()) return;
  const std::vector<std::string>& allowed = (*grant)->namespaces;
  objects->erase(std::remove_if(objects->begin(), objects->end(),
                                [&allowed](const informer::ObjectPtr& obj) {
                                  return !Contains(allowed, obj->namespace_());
                                }),
                 objects->end());
}

grpc::Status AuthorizeRecordEvents(const Authorizer* authorizer,
                                   const grpc::ServerContextBase& context,
                                   absl::string_view ns) {
  if (authorizer == nullptr) return grpc::Status::OK;
  absl::StatusOr<const TokenGrant*> grant = authorizer->Authenticate(context);
  if (!grant.ok()) return Denied(context, grant.status());
  if (absl::Status st = authorizer->CheckRecordEvents(**grant, ns); !st.ok()) {
    return Denied(context, st);
  }
  return grpc::Status::OK;
}

bool MayReadResource(const Authorizer* authorizer,
                     const grpc::ServerContextBase& context,
                     absl::string_view resource) {
  if (authorizer == nullptr) return true;
  absl::StatusOr<const TokenGrant*> grant = authorizer->Authenticate(context);
  return grant.ok() && authorizer->MayReadResource(**grant, resource);
}

}  // namespace server
