#include "informer/client/credentials.h"

#include <glog/logging.h>

#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "informer/client/exec_credential.h"
#include "informer/util/read_file.h"

namespace informer {
namespace client {

TokenFileCredentialProvider::TokenFileCredentialProvider(std::string path,
                                                         Credentials base,
                                                         Clock* clock,
                                                         absl::Duration period)
    : path_(std::move(path)),
      base_(std::move(base)),
      clock_(clock),
      period_(period) {}

absl::StatusOr<Credentials> TokenFileCredentialProvider::Get() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (now >= next_read_) {
    absl::StatusOr<std::string> text = ReadFile(path_);
    std::string token =
        text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
    if (!token.empty()) {
      token_ = std::move(token);
      next_read_ = now + period_;
    } else if (token_.empty()) {
      return absl::UnauthenticatedError(absl::StrCat(
          "token file ", path_, ": ",
          text.ok() ? "empty" : std::string(text.status().message())));
    } else {
      LOG(WARNING) << "re-reading token file " << path_
                   << " failed; keeping the previous token";
    }
  }
  Credentials c = base_;
  c.bearer_token = token_;
  return c;
}

void TokenFileCredentialProvider::Invalidate(const Credentials& rejected) {
  absl::MutexLock lock(&mu_);
  if (rejected.bearer_token == token_) next_read_ = absl::InfinitePast();
}

absl::StatusOr<std::unique_ptr<CredentialProvider>> MakeCredentialProvider(
    const RestConfig& config, Clock* clock) {
  Credentials base;
  base.bearer_token = config.bearer_token;
  base.client_cert_pem = config.client_cert_data;
  base.client_key_pem = config.client_key_data;
  if (base.client_cert_pem.empty() && !config.client_cert_file.empty()) {
    absl::StatusOr<std::string> pem = ReadFile(config.client_cert_file);
    if (!pem.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("client-certificate: ", pem.status().message()));
    }
    base.client_cert_pem = *std::move(pem);
  }
  if (base.client_key_pem.empty() && !config.client_key_file.empty()) {
    absl::StatusOr<std::string> pem = ReadFile(config.client_key_file);
    if (!pem.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("client-key: ", pem.status().message()));
    }
    base.client_key_pem = *std::move(pem);
  }
  if (base.client_cert_pem.empty() != base.client_key_pem.empty()) {
    return absl::InvalidArgumentError(
        "client-certificate and client-key must be given together");
  }
  if (config.exec.has_value()) {
    return std::unique_ptr<CredentialProvider>(
        new ExecCredentialProvider(*config.exec, config, clock));
  }
  if (!config.bearer_token_file.empty()) {
    base.bearer_token.clear();
    return std::unique_ptr<CredentialProvider>(new TokenFileCredentialProvider(
        config.bearer_token_file, std::move(base), clock));
  }
  return std::unique_ptr<CredentialProvider>(
      new StaticCredentialProvider(std::move(base)));
}

}  // namespace client
}  // namespace informer
