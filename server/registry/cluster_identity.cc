#include "server/registry/cluster_identity.h"

#include <glog/logging.h>
#include <openssl/evp.h>

#include <array>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "informer/object/api_error.h"
#include "informer/object/object.h"
#include "informer/util/read_file.h"

namespace server {
namespace {

std::string Sha256Hex(absl::string_view data) {
  std::array<unsigned char, 32> out{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(),
                 nullptr) != 1) {
    LOG(FATAL) << "SHA-256 failed";
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(out.data()), out.size()));
}

}  // namespace

std::string FallbackClusterIdentity(
    const informer::client::RestConfig& config) {
  std::string ca = config.ca_data;
  if (ca.empty() && !config.ca_file.empty()) {
    absl::StatusOr<std::string> read = informer::ReadFile(config.ca_file);
    if (read.ok()) ca = *std::move(read);
  }
  return absl::StrCat("server:", config.server, " ca-sha256:",
                      ca.empty() ? std::string("none") : Sha256Hex(ca));
}

absl::StatusOr<std::string> ReadClusterIdentity(
    informer::client::HttpTransport* transport) {
  informer::client::HttpRequest req;
  req.path = "/api/v1/namespaces/kube-system";
  absl::StatusOr<informer::client::HttpResponse> resp = transport->Do(req);
  if (resp.ok()) {
    absl::StatusOr<informer::ObjectPtr> ns =
        informer::Object::Parse(resp->body);
    if (ns.ok() && !(*ns)->uid().empty()) {
      return absl::StrCat("uid:", (*ns)->uid());
    }
    LOG(WARNING) << "cluster identity: the kube-system namespace has no uid "
                    "in the answer; using the API server URL and CA";
    return FallbackClusterIdentity(transport->config());
  }
  const int code = informer::HttpCode(resp.status());
  if (code == 0 || code >= 500 || code == 429) return resp.status();
  LOG(INFO) << "cluster identity: cannot read the kube-system namespace ("
            << resp.status().message()
            << "); telling clusters apart by the API server URL and CA";
  return FallbackClusterIdentity(transport->config());
}

}  // namespace server
