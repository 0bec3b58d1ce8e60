#include "server/security/authz.h"

#include <glog/logging.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

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

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read \"", path, "\": ", std::strerror(errno)));
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
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

// Collects the first error of a tokens file with its position.
class Reader {
 public:
  explicit Reader(absl::string_view origin) : origin_(origin) {}

  absl::Status Error(const YAML::Node& node, absl::string_view field,
                     absl::string_view problem) const {
    std::string where(origin_);
    const YAML::Mark mark = node.Mark();
    if (mark.line >= 0) absl::StrAppend(&where, ":", mark.line + 1);
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", field, ": ", problem));
  }

  // A scalar string; absent/null -> "" (when optional).
  absl::Status String(const YAML::Node& map, const char* key,
                      absl::string_view field, std::string* out) const {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
    if (!n.IsScalar()) return Error(n, field, "expected a string");
    *out = n.Scalar();
    return absl::OkStatus();
  }

  // A list of non-empty strings (a single string is accepted as a list of
  // one); absent -> empty.
  absl::Status Strings(const YAML::Node& map, const char* key,
                       absl::string_view field,
                       std::vector<std::string>* out) const {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
    if (n.IsScalar()) {
      out->push_back(n.Scalar());
    } else if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) {
        if (!n[i].IsScalar()) {
          return Error(n[i], absl::StrCat(field, "[", i, "]"),
                       "expected a string");
        }
        out->push_back(n[i].Scalar());
      }
    } else {
      return Error(n, field, "expected a list of strings");
    }
    for (const std::string& s : *out) {
      if (absl::StripAsciiWhitespace(s).empty()) {
        return Error(n, field, "empty entry");
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string origin_;
};

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
  absl::StatusOr<std::string> text = ReadFile(path);
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
  const Options& opts = authorizer->options_;
  const Reader r(origin);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": not valid YAML: ", e.what()));
  }
  try {
    if (!root.IsMap()) {
      return r.Error(root, "(top level)",
                     "expected a mapping with a \"tokens\" list");
    }
    for (const auto& kv : root) {
      if (kv.first.Scalar() != "tokens") {
        return r.Error(kv.first, kv.first.Scalar(),
                       "unknown field (expected \"tokens\")");
      }
    }
    const YAML::Node list = root["tokens"];
    if (!list.IsDefined() || !list.IsSequence() || list.size() == 0) {
      return r.Error(list.IsDefined() ? list : root, "tokens",
                     "expected a non-empty list of tokens");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node entry = list[i];
      const std::string field = absl::StrCat("tokens[", i, "]");
      if (!entry.IsMap()) {
        return r.Error(entry, field,
                       "expected a mapping (name, token or tokenFile, "
                       "resources, namespaces)");
      }
      for (const auto& kv : entry) {
        const std::string key = kv.first.Scalar();
        if (key != "name" && key != "token" && key != "tokenFile" &&
            key != "resources" && key != "namespaces" &&
            key != "recordEvents") {
          return r.Error(kv.first, absl::StrCat(field, ".", key),
                         "unknown field (expected name, token, tokenFile, "
                         "resources, namespaces, recordEvents)");
        }
      }
      Token token;
      TokenGrant& grant = token.grant;
      if (absl::Status st =
              r.String(entry, "name", field + ".name", &grant.name);
          !st.ok()) {
        return st;
      }
      if (grant.name.empty()) {
        return r.Error(entry, field + ".name", "required");
      }
      const std::string named = absl::StrCat(field, " (\"", grant.name, "\")");
      if (!names.insert(grant.name).second) {
        return r.Error(entry["name"], named + ".name", "duplicate name");
      }

      std::string value, file;
      if (absl::Status st = r.String(entry, "token", named + ".token", &value);
          !st.ok()) {
        return st;
      }
      if (absl::Status st =
              r.String(entry, "tokenFile", named + ".tokenFile", &file);
          !st.ok()) {
        return st;
      }
      if (entry["token"].IsDefined() == entry["tokenFile"].IsDefined()) {
        return r.Error(entry, named,
                       "set exactly one of \"token\" and \"tokenFile\"");
      }
      if (!file.empty()) {
        const std::string path = absl::StartsWith(file, "/")
                                     ? file
                                     : absl::StrCat(base_dir, "/", file);
        absl::StatusOr<std::string> content = ReadFile(path);
        if (!content.ok()) {
          return r.Error(entry["tokenFile"], named + ".tokenFile",
                         content.status().message());
        }
        value = std::string(absl::StripAsciiWhitespace(*content));
      }
      if (value.empty()) {
        return r.Error(entry, named + (file.empty() ? ".token" : ".tokenFile"),
                       "the token is empty");
      }
      if (std::any_of(value.begin(), value.end(), [](char c) {
            return absl::ascii_isspace(static_cast<unsigned char>(c));
          })) {
        return r.Error(entry, named + (file.empty() ? ".token" : ".tokenFile"),
                       "the token contains whitespace");
      }
      if (value.size() < 16) {
        LOG(WARNING) << origin << ": " << named << ": the token is shorter "
                     << "than 16 characters; use a long random string";
      }
      token.digest = Sha256(value);
      // Wipe the plaintext copy; only the digest is kept.
      OPENSSL_cleanse(value.data(), value.size());
      for (const Token& other : authorizer->tokens_) {
        if (CRYPTO_memcmp(other.digest.data(), token.digest.data(),
                          token.digest.size()) == 0) {
          return r.Error(entry, named,
                         absl::StrCat("the same token as \"", other.grant.name,
                                      "\"; every token must be distinct"));
        }
      }

      if (absl::Status st = r.Strings(entry, "resources", named + ".resources",
                                      &grant.resources);
          !st.ok()) {
        return st;
      }
      if (grant.resources.empty()) {
        return r.Error(entry, named + ".resources",
                       "required: the resources this token may read (\"*\" "
                       "= all but secrets)");
      }
      for (const std::string& resource : grant.resources) {
        if (resource == "*") continue;
        if (IsSecretsResource(resource) && !opts.allow_secrets) {
          return r.Error(entry["resources"], named + ".resources",
                         absl::StrCat("\"", resource,
                                      "\": Secrets are withheld unless the "
                                      "sidecar runs with --allow_secrets"));
        }
        if (!opts.configured_resources.empty() &&
            !Contains(opts.configured_resources, resource)) {
          return r.Error(
              entry["resources"], named + ".resources",
              absl::StrCat("\"", resource,
                           "\" is not a configured resource (configured: ",
                           absl::StrJoin(opts.configured_resources, ", "),
                           "; name them exactly as configured)"));
        }
      }
      if (absl::Status st = r.Strings(entry, "namespaces",
                                      named + ".namespaces", &grant.namespaces);
          !st.ok()) {
        return st;
      }
      if (const YAML::Node events = entry["recordEvents"];
          events.IsDefined() && !events.IsNull()) {
        if (!events.IsScalar() ||
            !YAML::convert<bool>::decode(events, grant.record_events)) {
          return r.Error(events, named + ".recordEvents",
                         "expected true or false");
        }
      }
      authorizer->tokens_.push_back(std::move(token));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", e.what()));
  }
  return authorizer;
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
