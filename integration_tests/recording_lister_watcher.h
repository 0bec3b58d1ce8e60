#ifndef INTEGRATION_TESTS_RECORDING_LISTER_WATCHER_H_
#define INTEGRATION_TESTS_RECORDING_LISTER_WATCHER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "informer/client/resource_client.h"
#include "informer/listwatch/lister_watcher.h"

namespace integration {

// A ListerWatcher that forwards to a ResourceClient and records the request
// path (with its query) of every List and Watch it forwards, in order, so a
// test can show which request a reflector sent in each case.
//
// Thread-safety: as ResourceClient; Requests() may be called from any
// thread. The client is not owned and must outlive this object.
class RecordingListerWatcher final : public informer::ListerWatcher {
 public:
  explicit RecordingListerWatcher(informer::client::ResourceClient* client)
      : client_(client) {}

  absl::StatusOr<informer::ObjectList> List(
      const informer::ListOptions& options) override {
    Record("LIST " + client_->ListPath(options));
    return client_->List(options);
  }
  absl::StatusOr<informer::ObjectList> ListWithItems(
      const informer::ListOptions& options, const ItemFn& on_item) override {
    Record("LIST " + client_->ListPath(options));
    return client_->ListWithItems(options, on_item);
  }
  absl::StatusOr<std::unique_ptr<informer::WatchStream>> Watch(
      const informer::WatchOptions& options) override {
    Record("WATCH " + client_->WatchPath(options));
    return client_->Watch(options);
  }
  uint64_t BytesReceived() const override { return client_->BytesReceived(); }

  // "LIST <path>" and "WATCH <path>" lines, oldest first.
  std::vector<std::string> Requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  void Record(std::string line) {
    absl::MutexLock lock(&mu_);
    requests_.push_back(std::move(line));
  }

  informer::client::ResourceClient* const client_;
  mutable absl::Mutex mu_;
  std::vector<std::string> requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace integration

#endif  // INTEGRATION_TESTS_RECORDING_LISTER_WATCHER_H_
