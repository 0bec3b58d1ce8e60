#include "server/registry/cluster_gate.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace server {

void ClusterCheck::Trust(std::string identity) {
  absl::MutexLock lock(&mu_);
  trusted_ = std::move(identity);
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
      actual_ = *std::move(read);
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
