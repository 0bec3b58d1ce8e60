#include "server/registry/cluster_gate.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace server {

void ClusterCheck::Trust(std::string identity) {
  absl::MutexLock lock(&mu_);
  trusted_ = std::move(identity);
}

namespace {

// "uid" or "server" (cluster_identity.h): what an identity is made of.
absl::string_view KindOf(absl::string_view identity) {
  return identity.substr(0, identity.find(':'));
}

}  // namespace

std::string ClusterCheck::Comparable(const std::string& read,
                                     absl::Status* why) const {
  if (KindOf(read) == KindOf(trusted_)) return read;
  if (KindOf(trusted_) != "uid" && fallback_) return fallback_();
  if (KindOf(trusted_) != "uid") return read;  // no fallback: compared as is
  *why = absl::UnavailableError(absl::StrCat(
      "cannot confirm the cluster of the snapshots (", trusted_,
      "): the API server answered as ", read,
      ", its kube-system namespace not readable now; serving stale"));
  return "";
}

absl::Status ClusterCheck::Verify() {
  bool mismatch = false;
  std::string actual;
  std::string trusted;
  {
    absl::MutexLock lock(&mu_);
    if (trusted_.empty()) return absl::OkStatus();
    if (actual_.empty()) {
      absl::StatusOr<std::string> read = read_();
      if (!read.ok()) return read.status();
      absl::Status unsettled;
      actual_ = Comparable(*read, &unsettled);
      if (actual_.empty()) return unsettled;
      mismatch = actual_ != trusted_;
    }
    if (actual_ == trusted_) return absl::OkStatus();
    actual = actual_;
    trusted = trusted_;
  }
  if (mismatch && on_mismatch_) on_mismatch_(actual);
  return absl::FailedPreconditionError(
      absl::StrCat("the API server is another cluster (", actual,
                   ") than the snapshots' (", trusted, ")"));
}

absl::StatusOr<informer::ObjectList> ClusterGatedSource::List(
    const informer::ListOptions& options) {
  if (absl::Status st = check_->Verify(); !st.ok()) return st;
  return inner_->List(options);
}

absl::StatusOr<informer::ObjectList> ClusterGatedSource::ListWithItems(
    const informer::ListOptions& options, const ItemFn& on_item) {
  if (absl::Status st = check_->Verify(); !st.ok()) return st;
  return inner_->ListWithItems(options, on_item);
}

absl::StatusOr<std::unique_ptr<informer::WatchStream>>
ClusterGatedSource::Watch(const informer::WatchOptions& options) {
  if (absl::Status st = check_->Verify(); !st.ok()) return st;
  return inner_->Watch(options);
}

}  // namespace server
