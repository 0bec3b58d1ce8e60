#include "informer/client/kubeconfig.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <exception>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "informer/client/rest_config_builder.h"
#include "informer/util/read_file.h"
#include "informer/util/yaml_reader.h"

namespace informer {
namespace client {
namespace {

// A kubeconfig larger than this is not a kubeconfig; real ones nest fewer
// than ten levels (see YamlLimits).
constexpr YamlLimits kLimits{16 << 20, 100};

std::string DirName(absl::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string Resolve(absl::string_view base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return absl::StrCat(base_dir, "/", path);
}

// The kubeconfig's own field kinds on top of YamlReader: file paths
// relative to the kubeconfig's directory, and base64 data.
class Reader : public YamlReader {
 public:
  explicit Reader(absl::string_view file_name)
      : YamlReader(file_name, NullIs::kAbsent), dir_(DirName(file_name)) {}

  bool Path(const YAML::Node& map, const char* key, absl::string_view field,
            std::string* out) {
    if (!String(map, key, field, out)) return false;
    *out = Resolve(dir_, *out);
    return true;
  }

  bool Base64(const YAML::Node& map, const char* key, absl::string_view field,
              std::string* out) {
    std::string text;
    if (!String(map, key, field, &text)) return false;
    if (text.empty()) return true;
    std::string cleaned;
    for (char c : text) {
      if (!absl::ascii_isspace(static_cast<unsigned char>(c))) cleaned += c;
    }
    if (!absl::Base64Unescape(cleaned, out)) {
      return Fail(map[key], Join(field, key), "not valid base64");
    }
    return true;
  }

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

bool ReadExec(Reader* r, const YAML::Node& exec, const std::string& field,
              ExecConfig* out) {
  if (!r->String(exec, "apiVersion", field, &out->api_version) ||
      !r->String(exec, "command", field, &out->command) ||
      !r->String(exec, "installHint", field, &out->install_hint) ||
      !r->Bool(exec, "provideClusterInfo", field, &out->provide_cluster_info) ||
      !r->String(exec, "interactiveMode", field, &out->interactive_mode)) {
    return false;
  }
  if (out->command.empty()) {
    r->Fail(exec, field + ".command", "missing");
    return false;
  }
  if (out->api_version != "client.authentication.k8s.io/v1" &&
      out->api_version != "client.authentication.k8s.io/v1beta1") {
    r->Fail(
        exec, field + ".apiVersion",
        absl::StrCat("unsupported exec plugin apiVersion \"", out->api_version,
                     "\" (want client.authentication.k8s.io/v1 or "
                     "v1beta1)"));
    return false;
  }
  // kubectl: a command with a path separator is relative to the file.
  if (absl::StrContains(out->command, '/')) {
    out->command = Resolve(r->dir(), out->command);
  }
  YAML::Node args;
  if (!r->Sequence(exec, "args", field, &args)) return false;
  if (args.IsDefined()) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].IsScalar()) {
        r->Fail(args[i], absl::StrCat(field, ".args[", i, "]"),
                "expected a string");
        return false;
      }
      out->args.push_back(args[i].Scalar());
    }
  }
  YAML::Node env;
  if (!r->Sequence(exec, "env", field, &env)) return false;
  if (env.IsDefined()) {
    for (size_t i = 0; i < env.size(); ++i) {
      std::string f = absl::StrCat(field, ".env[", i, "]");
      if (!env[i].IsMap()) {
        r->Fail(env[i], f, "expected a mapping with name and value");
        return false;
      }
      std::string name, value;
      if (!r->String(env[i], "name", f, &name) ||
          !r->String(env[i], "value", f, &value)) {
        return false;
      }
      if (name.empty()) {
        r->Fail(env[i], f + ".name", "missing");
        return false;
      }
      out->env.emplace_back(name, value);
    }
  }
  return true;
}

// Reads a named list (clusters, users, contexts): each entry has "name" and
// an inner mapping under `inner_key`. `read` fills the value.
template <typename T, typename ReadFn>
bool ReadNamedList(Reader* r, const YAML::Node& root, const char* list_key,
                   const char* inner_key, std::map<std::string, T>* out,
                   ReadFn read) {
  YAML::Node list;
  if (!r->Sequence(root, list_key, "", &list)) return false;
  if (!list.IsDefined()) return true;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node entry = list[i];
    std::string field = absl::StrCat(list_key, "[", i, "]");
    if (!entry.IsMap()) {
      r->Fail(entry, field,
              "expected a mapping with name and " + std::string(inner_key));
      return false;
    }
    std::string name;
    if (!r->String(entry, "name", field, &name)) return false;
    if (name.empty()) {
      r->Fail(entry, field + ".name", "missing");
      return false;
    }
    YAML::Node inner;
    if (!r->Map(entry, inner_key, field, &inner)) return false;
    T value;
    if (inner.IsDefined() &&
        !read(inner, absl::StrCat(field, ".", inner_key), &value)) {
      return false;
    }
    // Within one file the first entry of a name wins, as across files.
    out->emplace(name, std::move(value));
  }
  return true;
}

}  // namespace

absl::StatusOr<Kubeconfig> ParseKubeconfig(absl::string_view yaml,
                                           absl::string_view file_name) {
  absl::StatusOr<YAML::Node> loaded = LoadYaml(yaml, file_name, kLimits);
  if (!loaded.ok()) return loaded.status();
  Reader r(file_name);
  Kubeconfig config;
  config.files.emplace_back(file_name);
  try {
    const YAML::Node root = *loaded;
    if (!root.IsDefined() || root.IsNull()) return config;  // empty file
    if (!root.IsMap()) {
      r.Fail(root, "(top level)", "expected a mapping");
      return r.status();
    }
    std::string kind;
    if (!r.String(root, "kind", "", &kind)) return r.status();
    if (!kind.empty() && kind != "Config") {
      r.Fail(root["kind"], "kind", "expected \"Config\", got \"" + kind + "\"");
      return r.status();
    }
    if (!r.String(root, "current-context", "", &config.current_context)) {
      return r.status();
    }
    bool ok = ReadNamedList<KubeCluster>(
        &r, root, "clusters", "cluster", &config.clusters,
        [&r](const YAML::Node& n, const std::string& f, KubeCluster* c) {
          return r.String(n, "server", f, &c->server) &&
                 r.Path(n, "certificate-authority", f,
                        &c->certificate_authority) &&
                 r.Base64(n, "certificate-authority-data", f,
                          &c->certificate_authority_data) &&
                 r.Bool(n, "insecure-skip-tls-verify", f,
                        &c->insecure_skip_tls_verify) &&
                 r.String(n, "tls-server-name", f, &c->tls_server_name) &&
                 r.String(n, "proxy-url", f, &c->proxy_url);
        });
    ok = ok &&
         ReadNamedList<KubeUser>(
             &r, root, "users", "user", &config.users,
             [&r](const YAML::Node& n, const std::string& f, KubeUser* u) {
               if (!(r.String(n, "token", f, &u->token) &&
                     r.Path(n, "tokenFile", f, &u->token_file) &&
                     r.Path(n, "client-certificate", f,
                            &u->client_certificate) &&
                     r.Base64(n, "client-certificate-data", f,
                              &u->client_certificate_data) &&
                     r.Path(n, "client-key", f, &u->client_key) &&
                     r.Base64(n, "client-key-data", f, &u->client_key_data) &&
                     r.String(n, "username", f, &u->username) &&
                     r.String(n, "password", f, &u->password))) {
                 return false;
               }
               YAML::Node exec;
               if (!r.Map(n, "exec", f, &exec)) return false;
               if (exec.IsDefined()) {
                 u->exec.emplace();
                 if (!ReadExec(&r, exec, f + ".exec", &*u->exec)) {
                   return false;
                 }
               }
               YAML::Node provider;
               if (!r.Map(n, "auth-provider", f, &provider)) return false;
               if (provider.IsDefined()) {
                 if (!r.String(provider, "name", f + ".auth-provider",
                               &u->auth_provider)) {
                   return false;
                 }
                 if (u->auth_provider.empty()) u->auth_provider = "(unnamed)";
               }
               return true;
             });
    ok = ok &&
         ReadNamedList<KubeContext>(
             &r, root, "contexts", "context", &config.contexts,
             [&r](const YAML::Node& n, const std::string& f, KubeContext* c) {
               return r.String(n, "cluster", f, &c->cluster) &&
                      r.String(n, "user", f, &c->user) &&
                      r.String(n, "namespace", f, &c->namespace_);
             });
    if (!ok) return r.status();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": invalid kubeconfig: ", e.what()));
  }
  return config;
}

absl::StatusOr<Kubeconfig> LoadKubeconfigFile(absl::string_view path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseKubeconfig(*text, path);
}

void MergeKubeconfig(const Kubeconfig& later, Kubeconfig* into) {
  // std::map::insert keeps the existing value: first definition wins.
  into->clusters.insert(later.clusters.begin(), later.clusters.end());
  into->users.insert(later.users.begin(), later.users.end());
  into->contexts.insert(later.contexts.begin(), later.contexts.end());
  if (into->current_context.empty()) {
    into->current_context = later.current_context;
  }
  into->files.insert(into->files.end(), later.files.begin(), later.files.end());
}

KubeconfigLoadOptions KubeconfigLoadOptionsFromEnv() {
  KubeconfigLoadOptions opts;
  if (const char* env = std::getenv("KUBECONFIG")) opts.kubeconfig_env = env;
  if (const char* home = std::getenv("HOME")) opts.home = home;
  return opts;
}

absl::StatusOr<Kubeconfig> LoadKubeconfig(const KubeconfigLoadOptions& opts) {
  if (!opts.explicit_path.empty()) {
    return LoadKubeconfigFile(opts.explicit_path);
  }
  if (!opts.kubeconfig_env.empty()) {
    Kubeconfig merged;
    bool any = false;
    for (absl::string_view path :
         absl::StrSplit(opts.kubeconfig_env, ':', absl::SkipEmpty())) {
      absl::StatusOr<Kubeconfig> one = LoadKubeconfigFile(path);
      if (absl::IsNotFound(one.status())) continue;  // kubectl skips these
      if (!one.ok()) return one.status();
      MergeKubeconfig(*one, &merged);
      any = true;
    }
    if (!any) {
      return absl::NotFoundError(absl::StrCat(
          "none of the KUBECONFIG files exist: ", opts.kubeconfig_env));
    }
    return merged;
  }
  if (opts.home.empty()) {
    return absl::NotFoundError(
        "no kubeconfig: --kubeconfig, $KUBECONFIG and $HOME are all unset");
  }
  return LoadKubeconfigFile(absl::StrCat(opts.home, "/.kube/config"));
}

absl::StatusOr<RestConfig> RestConfigFromKubeconfig(
    const Kubeconfig& config, const ConfigOverrides& overrides) {
  const std::string& context_name =
      overrides.context.empty() ? config.current_context : overrides.context;
  std::string files = absl::StrJoin(config.files, ":");
  if (context_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kubeconfig ", files, ": no current-context and no --context given"));
  }
  auto ctx = config.contexts.find(context_name);
  if (ctx == config.contexts.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kubeconfig ", files, ": context \"", context_name, "\" not found"));
  }
  auto cluster = config.clusters.find(ctx->second.cluster);
  if (cluster == config.clusters.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", files, ": context \"", context_name,
                     "\" names cluster \"", ctx->second.cluster,
                     "\", which is not defined"));
  }
  const KubeCluster& c = cluster->second;
  // The server first: a cluster without one is the error to report.
  RestConfig rc =
      RestConfigFor({overrides.server.empty() ? c.server : overrides.server,
                     c.certificate_authority, ""});
  if (rc.server.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", files, ": cluster \"", cluster->first,
                     "\" has no server"));
  }
  rc.ca_data = c.certificate_authority_data;
  rc.insecure_skip_tls_verify = c.insecure_skip_tls_verify;
  rc.tls_server_name = c.tls_server_name;
  rc.proxy_url = c.proxy_url;
  if (!ctx->second.user.empty()) {
    auto user = config.users.find(ctx->second.user);
    if (user == config.users.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kubeconfig ", files, ": context \"", context_name,
          "\" names user \"", ctx->second.user, "\", which is not defined"));
    }
    const KubeUser& u = user->second;
    if (!u.auth_provider.empty()) {
      return absl::UnimplementedError(absl::StrCat(
          "kubeconfig ", files, ": user \"", user->first,
          "\" uses auth-provider \"", u.auth_provider,
          "\", which is not supported; use an exec credential plugin"));
    }
    rc.bearer_token = u.token;
    rc.bearer_token_file = u.token_file;
    rc.client_cert_file = u.client_certificate;
    rc.client_cert_data = u.client_certificate_data;
    rc.client_key_file = u.client_key;
    rc.client_key_data = u.client_key_data;
    rc.username = u.username;
    rc.password = u.password;
    rc.exec = u.exec;
  }
  if (!ctx->second.namespace_.empty()) rc.namespace_ = ctx->second.namespace_;
  ApplyOverrides(overrides, &rc);
  return rc;
}

absl::StatusOr<RestConfig> InClusterConfig(const InClusterOptions& options) {
  auto getenv = options.getenv;
  if (!getenv) {
    getenv = [](const std::string& name) -> absl::optional<std::string> {
      const char* v = std::getenv(name.c_str());
      if (v == nullptr) return absl::nullopt;
      return std::string(v);
    };
  }
  absl::optional<std::string> host = getenv("KUBERNETES_SERVICE_HOST");
  absl::optional<std::string> port = getenv("KUBERNETES_SERVICE_PORT");
  if (!host.has_value() || host->empty() || !port.has_value() ||
      port->empty()) {
    return absl::FailedPreconditionError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and "
        "KUBERNETES_SERVICE_PORT must be set");
  }
  absl::StatusOr<std::string> token = ReadFile(options.token_path);
  if (!token.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("in-cluster config: service account token: ",
                     token.status().message()));
  }
  // An IPv6 service address needs brackets in a URL.
  const std::string h =
      absl::StrContains(*host, ':') ? absl::StrCat("[", *host, "]") : *host;
  RestConfig rc = RestConfigFor(
      {absl::StrCat("https://", h, ":", *port), "", options.token_path});
  rc.bearer_token = std::string(absl::StripAsciiWhitespace(*token));
  // client-go: a missing ca.crt is logged, not fatal (system roots apply).
  if (CheckReadable(options.ca_path).ok()) rc.ca_file = options.ca_path;
  absl::StatusOr<std::string> ns = ReadFile(options.namespace_path);
  if (ns.ok()) {
    std::string trimmed(absl::StripAsciiWhitespace(*ns));
    if (!trimmed.empty()) rc.namespace_ = trimmed;
  }
  return rc;
}

}  // namespace client
}  // namespace informer
