#include "client_sdk/cpp/remote_informer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace client_sdk {

using informer::ObjectPtr;
using informer::v1::Event;

bool IsFinalWatchCode(absl::StatusCode code) {
  return code == absl::StatusCode::kNotFound ||
         code == absl::StatusCode::kPermissionDenied ||
         code == absl::StatusCode::kInvalidArgument;
}

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

bool RemoteInformer::IsStale() const {
  absl::MutexLock lock(&mu_);
  return stale_;
}

bool RemoteInformer::WaitForSync(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return synced_ || gave_up_;
  };
  options_.clock->AwaitWithTimeout(&mu_, absl::Condition(&done), timeout);
  return synced_;
}

ObjectPtr RemoteInformer::Get(absl::string_view ns,
                              absl::string_view name) const {
  return mirror_.GetByKey(informer::MetaNamespaceKey(ns, name));
}

std::vector<ObjectPtr> RemoteInformer::List() const { return mirror_.List(); }

std::vector<std::string> RemoteInformer::Keys() const {
  std::vector<std::string> keys = mirror_.ListKeys();
  std::sort(keys.begin(), keys.end());
  return keys;
}

absl::StatusOr<std::vector<ObjectPtr>> RemoteInformer::ByIndex(
    absl::string_view index_name, absl::string_view value) const {
  return mirror_.ByIndex(index_name, value);
}

absl::StatusOr<std::vector<std::string>> RemoteInformer::IndexValues(
    absl::string_view index_name) const {
  absl::StatusOr<std::vector<std::string>> values =
      mirror_.ListIndexFuncValues(index_name);
  if (values.ok()) std::sort(values->begin(), values->end());
  return values;
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

bool RemoteInformer::gave_up() const {
  absl::MutexLock lock(&mu_);
  return gave_up_;
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
    if (gave_up_) return;
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
  // With a token taken inside an initial state, the sidecar sends the rest
  // of it: a reconciliation in progress goes on.
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

void RemoteInformer::ReportFailure(const grpc::Status& status, int64_t failures,
                                   absl::Duration retry_in) {
  StreamError error;
  error.status = FromGrpcStatus(status);
  error.failures = failures;
  error.final = IsFinalWatchCode(error.status.code());
  error.retry_in = error.final ? absl::ZeroDuration() : retry_in;
  std::string token;
  {
    absl::MutexLock lock(&mu_);
    failures_ = failures;
    gave_up_ = error.final;
    token = token_;
  }
  // WARNING when an outage starts or its cause changes; repeats of the same
  // failure at INFO (OnError still sees every one).
  const bool repeat = failures > 1 && error.status == last_reported_;
  last_reported_ = error.status;
  const std::string what =
      absl::StrCat("RemoteInformer(", options_.resource, "): Watch failed: ",
                   status.ok() ? "OK: the sidecar ended the stream"
                               : error.status.ToString());
  if (error.final) {
    LOG(ERROR) << what << " (final: not retried)";
  } else {
    const std::string message =
        absl::StrCat(what, " (", failures, " in a row; retrying in ",
                     absl::FormatDuration(retry_in),
                     ", resuming after token \"", token, "\")");
    if (repeat) {
      LOG(INFO) << message;
    } else {
      LOG(WARNING) << message;
    }
  }
  if (options_.error_handler != nullptr) {
    options_.error_handler->OnError(error);
  }
}

void RemoteInformer::Apply(const Event& event) {
  switch (event.type()) {
    case informer::v1::EVENT_TYPE_RESET: {
      relisting_ = true;
      relist_.clear();
      absl::MutexLock lock(&mu_);
      ++resets_;
      break;
    }
    case informer::v1::EVENT_TYPE_INITIAL_STATE_DONE: {
      if (relisting_) Reconcile();
      absl::MutexLock lock(&mu_);
      synced_ = true;
      stale_ = event.stale();
      ++sync_generation_;
      break;
    }
    case informer::v1::EVENT_TYPE_FRESH: {
      absl::MutexLock lock(&mu_);
      stale_ = false;
      break;
    }
    case informer::v1::EVENT_TYPE_ADDED:
    case informer::v1::EVENT_TYPE_MODIFIED:
    case informer::v1::EVENT_TYPE_SYNC:
    case informer::v1::EVENT_TYPE_DELETED: {
      absl::StatusOr<ObjectPtr> parsed =
          informer::Object::Parse(event.object().json());
      if (!parsed.ok()) {
        LOG(WARNING) << "RemoteInformer(" << options_.resource
                     << "): skipping undecodable object: " << parsed.status();
        break;
      }
      ApplyObject(event, *parsed);
      break;
    }
    default:  // BOOKMARK: nothing but the token.
      break;
  }
  absl::MutexLock lock(&mu_);
  token_ = event.resume_token();
}

void RemoteInformer::ApplyObject(const Event& event, const ObjectPtr& obj) {
  const std::string& key = obj->Key();
  if (event.type() == informer::v1::EVENT_TYPE_ADDED && event.initial()) {
    bool synced;
    {
      absl::MutexLock lock(&mu_);
      synced = synced_;
    }
    if (relisting_ || synced) {
      // A fresh initial state over a mirror with content: collected,
      // applied as differences at INITIAL_STATE_DONE.
      relisting_ = true;
      relist_[key] = obj;
      return;
    }
  }
  ObjectPtr old_obj = mirror_.GetByKey(key);
  if (event.type() == informer::v1::EVENT_TYPE_DELETED) {
    if (old_obj == nullptr) return;  // not held: nothing to tell
    mirror_.Delete(*obj);
    NotifyDelete(obj, event.tombstone());
    return;
  }
  mirror_.Update(obj);
  if (old_obj == nullptr) {
    NotifyAdd(obj, event.initial());
  } else if (event.type() == informer::v1::EVENT_TYPE_SYNC ||
             old_obj->json() != obj->json()) {
    NotifyUpdate(old_obj, obj);
  }
}

void RemoteInformer::Reconcile() {
  absl::flat_hash_map<std::string, ObjectPtr> fresh;
  fresh.swap(relist_);
  relisting_ = false;
  bool initial;
  {
    absl::MutexLock lock(&mu_);
    initial = !synced_;
  }
  // Vanished while we were away: their delete was never observed.
  std::vector<ObjectPtr> gone;
  for (const ObjectPtr& old_obj : mirror_.List()) {
    if (!fresh.contains(old_obj->Key())) gone.push_back(old_obj);
  }
  auto by_key = [](const ObjectPtr& a, const ObjectPtr& b) {
    return a->Key() < b->Key();
  };
  std::sort(gone.begin(), gone.end(), by_key);
  for (const ObjectPtr& old_obj : gone) {
    mirror_.Delete(*old_obj);
    NotifyDelete(old_obj, /*unknown=*/true);
  }
  std::vector<ObjectPtr> objs;
  objs.reserve(fresh.size());
  for (auto& entry : fresh) objs.push_back(entry.second);
  std::sort(objs.begin(), objs.end(), by_key);
  for (const ObjectPtr& obj : objs) {
    ObjectPtr old_obj = mirror_.GetByKey(obj->Key());
    mirror_.Update(obj);
    if (old_obj == nullptr) {
      NotifyAdd(obj, initial);
    } else if (old_obj->json() != obj->json()) {
      NotifyUpdate(old_obj, obj);
    }
  }
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
