#include "client_sdk/cpp/remote_informer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace client_sdk {

using informer::ObjectPtr;
using informer::v1::Event;

RemoteInformer::RemoteInformer(std::shared_ptr<grpc::ChannelInterface> channel,
                               Options options)
    : options_(std::move(options)),
      stub_(informer::v1::Informer::NewStub(std::move(channel))),
      mirror_(options_.indexers) {}

RemoteInformer::~RemoteInformer() { Stop(); }

void RemoteInformer::AddEventHandler(informer::ResourceEventHandler* handler) {
  absl::MutexLock lock(&mu_);
  CHECK(!started_) << "RemoteInformer: AddEventHandler after Start";
  handlers_.push_back(handler);
}

absl::Status RemoteInformer::Start() {
  if (options_.resource.empty()) {
    return absl::InvalidArgumentError("resource: required");
  }
  absl::MutexLock lock(&mu_);
  if (started_) return absl::FailedPreconditionError("already started");
  started_ = true;
  active_handlers_ = handlers_;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void RemoteInformer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

bool RemoteInformer::HasSynced() const {
  absl::MutexLock lock(&mu_);
  return synced_;
}

bool RemoteInformer::WaitForSync(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return options_.clock->AwaitWithTimeout(&mu_, absl::Condition(&synced_),
                                          timeout);
}

ObjectPtr RemoteInformer::Get(absl::string_view ns,
                              absl::string_view name) const {
  return mirror_.GetByKey(informer::MetaNamespaceKey(ns, name));
}

std::vector<ObjectPtr> RemoteInformer::List() const { return mirror_.List(); }

absl::StatusOr<std::vector<ObjectPtr>> RemoteInformer::ByIndex(
    absl::string_view index_name, absl::string_view value) const {
  return mirror_.ByIndex(index_name, value);
}

std::string RemoteInformer::resume_token() const {
  absl::MutexLock lock(&mu_);
  return token_;
}

int64_t RemoteInformer::connects() const {
  absl::MutexLock lock(&mu_);
  return connects_;
}

int64_t RemoteInformer::resets() const {
  absl::MutexLock lock(&mu_);
  return resets_;
}

int64_t RemoteInformer::sync_generation() const {
  absl::MutexLock lock(&mu_);
  return sync_generation_;
}

bool RemoteInformer::WaitForSyncGeneration(int64_t generation,
                                           absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return sync_generation_ >= generation;
  };
  return options_.clock->AwaitWithTimeout(&mu_, absl::Condition(&reached),
                                          timeout);
}

absl::Status RemoteInformer::last_stream_status() const {
  absl::MutexLock lock(&mu_);
  return last_status_;
}

int64_t RemoteInformer::failures() const {
  absl::MutexLock lock(&mu_);
  return failures_;
}

void RemoteInformer::Run() {
  absl::Duration backoff = options_.initial_backoff;
  int64_t failures = 0;
  while (true) {
    std::optional<grpc::Status> ended = RunStream(&failures);
    if (!ended.has_value()) return;
    // failures == 0: the stream delivered data (or it is the first one), so
    // the back-off starts over.
    if (failures == 0) backoff = options_.initial_backoff;
    ++failures;
    ReportFailure(*ended, failures, backoff);
    absl::MutexLock lock(&mu_);
    options_.clock->AwaitWithTimeout(&mu_, absl::Condition(&stopped_), backoff);
    if (stopped_) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

std::optional<grpc::Status> RemoteInformer::RunStream(int64_t* failures) {
  grpc::ClientContext ctx;
  informer::v1::WatchRequest request;
  request.set_resource(options_.resource);
  request.set_namespace_(options_.namespace_);
  request.set_label_selector(options_.label_selector);
  request.set_index_name(options_.index_name);
  request.set_index_value(options_.index_value);
  request.set_encoding(informer::v1::ENCODING_JSON);
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return std::nullopt;
    ctx_ = &ctx;
    request.set_resume_token(token_);
    ++connects_;
  }
  // Without a token the stream starts with an initial state but no RESET:
  // reconcile it against whatever the mirror holds (nothing on the first
  // connect, so that is plain adds). With a token taken inside an initial
  // state, the sidecar sends the rest of it: the reconciliation in progress
  // goes on.
  if (request.resume_token().empty()) {
    reconciling_ = true;
    reconcile_seen_.clear();
  }
  std::unique_ptr<grpc::ClientReader<informer::v1::WatchResponse>> reader =
      stub_->Watch(&ctx, request);
  informer::v1::WatchResponse response;
  while (reader->Read(&response)) {
    if (*failures > 0) {
      const int64_t failed = *failures;
      *failures = 0;
      {
        absl::MutexLock lock(&mu_);
        failures_ = 0;
      }
      LOG(WARNING) << "RemoteInformer(" << options_.resource
                   << "): Watch stream works again after " << failed
                   << " failed attempt(s)";
      if (options_.error_handler != nullptr) {
        options_.error_handler->OnRecovered(failed);
      }
    }
    for (const Event& event : response.events()) Apply(event);
  }
  grpc::Status status = reader->Finish();
  absl::MutexLock lock(&mu_);
  ctx_ = nullptr;
  last_status_ = FromGrpcStatus(status);
  if (stopped_) return std::nullopt;
  return status;
}

void RemoteInformer::ReportFailure(const grpc::Status& status,
                                   int64_t failures, absl::Duration retry_in) {
  StreamError error;
  error.status = FromGrpcStatus(status);
  error.failures = failures;
  error.retry_in = retry_in;
  std::string token;
  {
    absl::MutexLock lock(&mu_);
    failures_ = failures;
    token = token_;
  }
  // WARNING when an outage starts or its cause changes; repeats of the same
  // failure at INFO (OnError still sees every one).
  const bool repeat = failures > 1 && error.status == last_reported_;
  last_reported_ = error.status;
  const std::string message = absl::StrCat(
      "RemoteInformer(", options_.resource, "): Watch failed: ",
      status.ok() ? "OK: the sidecar ended the stream"
                  : error.status.ToString(),
      " (", failures, " in a row; retrying in ",
      absl::FormatDuration(retry_in), ", resuming after token \"", token,
      "\")");
  if (repeat) {
    LOG(INFO) << message;
  } else {
    LOG(WARNING) << message;
  }
  if (options_.error_handler != nullptr) {
    options_.error_handler->OnError(error);
  }
}

void RemoteInformer::Apply(const Event& event) {
  ObjectPtr obj;
  if (event.has_object()) {
    absl::StatusOr<ObjectPtr> parsed =
        informer::Object::Parse(event.object().json());
    if (!parsed.ok()) {
      LOG(WARNING) << "RemoteInformer(" << options_.resource
                   << "): skipping undecodable object: " << parsed.status();
    } else {
      obj = *std::move(parsed);
    }
  }
  switch (event.type()) {
    case informer::v1::EVENT_TYPE_RESET: {
      absl::MutexLock lock(&mu_);
      ++resets_;
      reconciling_ = true;
      reconcile_seen_.clear();
      break;
    }
    case informer::v1::EVENT_TYPE_INITIAL_STATE_DONE: {
      if (reconciling_) {
        // Objects the fresh state no longer holds vanished while we were
        // away: their delete was never observed.
        for (const ObjectPtr& old_obj : mirror_.List()) {
          if (reconcile_seen_.contains(old_obj->Key())) continue;
          mirror_.Delete(*old_obj);
          NotifyDelete(old_obj, /*unknown=*/true);
        }
        reconcile_seen_.clear();
      }
      reconciling_ = false;
      absl::MutexLock lock(&mu_);
      synced_ = true;
      ++sync_generation_;
      break;
    }
    case informer::v1::EVENT_TYPE_ADDED:
    case informer::v1::EVENT_TYPE_MODIFIED:
    case informer::v1::EVENT_TYPE_SYNC: {
      if (obj == nullptr) break;
      std::string key = obj->Key();
      ObjectPtr old_obj = mirror_.GetByKey(key);
      if (reconciling_ && event.initial()) reconcile_seen_.insert(key);
      mirror_.Update(obj);
      if (old_obj == nullptr) {
        NotifyAdd(obj, event.initial());
      } else if (event.type() == informer::v1::EVENT_TYPE_SYNC ||
                 !event.initial() ||
                 old_obj->resource_version() != obj->resource_version()) {
        // Initial ADDEDs of a reconciliation that match the mirror are not
        // news; everything else on a known key is an update (never a second
        // add).
        NotifyUpdate(old_obj, obj);
      }
      break;
    }
    case informer::v1::EVENT_TYPE_DELETED: {
      if (obj == nullptr) break;
      ObjectPtr old_obj = mirror_.GetByKey(obj->Key());
      if (old_obj == nullptr) break;  // never seen: nothing to tell
      mirror_.Delete(*obj);
      NotifyDelete(obj, event.tombstone());
      break;
    }
    default:  // BOOKMARK: nothing but the token.
      break;
  }
  absl::MutexLock lock(&mu_);
  token_ = event.resume_token();
}

void RemoteInformer::NotifyAdd(const ObjectPtr& obj, bool initial) {
  for (informer::ResourceEventHandler* h : active_handlers_) {
    h->OnAdd(obj, initial);
  }
}

void RemoteInformer::NotifyUpdate(const ObjectPtr& old_obj,
                                  const ObjectPtr& new_obj) {
  for (informer::ResourceEventHandler* h : active_handlers_) {
    h->OnUpdate(old_obj, new_obj);
  }
}

void RemoteInformer::NotifyDelete(const ObjectPtr& obj, bool unknown) {
  for (informer::ResourceEventHandler* h : active_handlers_) {
    h->OnDelete(obj, unknown);
  }
}

}  // namespace client_sdk
