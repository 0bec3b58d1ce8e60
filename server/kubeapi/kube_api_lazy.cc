// KubeApiServer: lazy resources (served on first request when the sidecar
// runs without a resource list) and the worker thread their informer
// lookups block on.

#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <glog/logging.h>
#include <sys/queue.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "server/kubeapi/kube_api_internal.h"
#include "server/kubeapi/kube_api_server.h"
#include "server/registry/resource_resolver.h"

namespace server {
namespace kubeapi {
namespace {

using informer::client::ApiResource;

bool Readable(const ApiResource& r) {
  auto has = [&r](const char* verb) {
    return std::find(r.verbs.begin(), r.verbs.end(), verb) != r.verbs.end();
  };
  return has("list") && has("watch") && has("get");
}

// timeoutSeconds of a raw query, if set and valid.
absl::optional<absl::Duration> TimeoutSeconds(const std::string& raw_query) {
  evkeyvalq params;
  TAILQ_INIT(&params);
  absl::optional<absl::Duration> out;
  if (evhttp_parse_query_str(raw_query.c_str(), &params) == 0) {
    const char* v = evhttp_find_header(&params, "timeoutSeconds");
    int64_t seconds = 0;
    if (v != nullptr && absl::SimpleAtoi(v, &seconds) && seconds > 0) {
      out = absl::Seconds(seconds);
    }
  }
  evhttp_clear_headers(&params);
  return out;
}

}  // namespace

std::vector<ApiResource> KubeApiServer::DiscoveryResources() const {
  std::vector<ApiResource> out = options_.resources;
  if (!options_.lazy || options_.discovery == nullptr) return out;
  std::set<std::string> seen;
  for (const ApiResource& r : out) seen.insert(r.group + "/" + r.resource);
  // Discovery's order puts a group's preferred version first: that is the
  // version a lazy informer of the resource watches.
  for (ApiResource& r : options_.discovery->Resources()) {
    if (!Readable(r) || !seen.insert(r.group + "/" + r.resource).second) {
      continue;
    }
    out.push_back(std::move(r));
  }
  return out;
}

bool KubeApiServer::RouteLazy(Request& r) {
  if (!r.path.subresource.empty()) return false;
  absl::Duration wait = options_.lazy_sync_wait;
  if (absl::optional<absl::Duration> t = TimeoutSeconds(r.raw_query)) {
    wait = std::min(wait, *t);
  }
  r.deadline = absl::Now() + wait;
  auto job = std::make_shared<LazyStart>();
  // Discovery may need a refresh (read at start-up failed, or a CRD came
  // later) and Find() builds and starts the informer and waits (boundedly)
  // for its sync: never on the event loop.
  PostToWorker([this, job, group = r.path.group, version = r.path.version,
                resource = r.path.resource] {
    absl::optional<ApiResource> api = LookUpLazy(group, version, resource);
    absl::StatusOr<InformerRef> ref =
        api ? options_.registry->Find(CanonicalResourceName(*api))
            : absl::NotFoundError("no such resource");
    {
      absl::MutexLock lock(&job->mu);
      if (api) job->api = *api;
      job->result = std::move(ref);
      job->done = true;
    }
    Wake();
  });
  Park(r, kWaitForLazy, wait);
  parked_.back()->lazy = std::move(job);
  return true;
}

absl::optional<ApiResource> KubeApiServer::LookUpLazy(
    const std::string& group, const std::string& version,
    const std::string& resource) {
  auto find = [&]() -> absl::optional<ApiResource> {
    // The first match is the group's preferred version: the one a lazy
    // informer of the resource watches.
    for (ApiResource& known : options_.discovery->Resources()) {
      if (known.group != group || known.resource != resource) continue;
      if (known.version != version || !Readable(known)) return absl::nullopt;
      return std::move(known);
    }
    return absl::nullopt;
  };
  absl::optional<ApiResource> api = find();
  const absl::Time now = absl::Now();
  if (!api && now - last_discovery_refresh_ >= absl::Seconds(10)) {
    last_discovery_refresh_ = now;
    absl::Status st = options_.discovery->Refresh();
    if (!st.ok()) LOG(WARNING) << "Kubernetes API facade: discovery: " << st;
    api = find();
  }
  return api;
}

void KubeApiServer::ResumeLazy(Request& r, absl::StatusOr<InformerRef> ref) {
  if (!ref.ok()) {
    if (absl::IsNotFound(ref.status())) {
      ReplyStatus(r.req, nullptr, "", UnknownPathStatus());
      return;
    }
    ApiStatus st = NotReadyStatus(CanonicalResourceName(r.lazy_api));
    st.message = absl::StrCat("the sidecar could not start an informer for ",
                              CanonicalResourceName(r.lazy_api), ": ",
                              ref.status().message());
    ReplyStatus(r.req, nullptr, "", st);
    return;
  }
  r.served = LazyServed(r.lazy_api, *ref);
  r.lease = *std::move(ref);
  if (r.served == nullptr) {
    ApiStatus st = NotReadyStatus(CanonicalResourceName(r.lazy_api));
    ReplyStatus(r.req, nullptr, "", st);
    return;
  }
  HandleRouted(r);
}

KubeApiServer::Served* KubeApiServer::LazyServed(const ApiResource& api,
                                                 const InformerRef& ref) {
  const std::string key =
      absl::StrCat(api.group, "/", api.version, "/", api.resource);
  auto it = by_path_.find(key);
  if (it != by_path_.end() && it->second->entry == ref.get()) {
    return it->second;
  }
  if (it != by_path_.end()) OnLazyRetired(it->second->entry);
  auto served = std::make_unique<Served>();
  served->api = api;
  served->name = CanonicalResourceName(api);
  served->group_version = api.GroupVersion();
  served->entry = ref.get();
  served->lazy = true;
  for (auto& e : options_.registry->entries()) {
    if (e.get() == ref.get()) served->keep = e;
  }
  if (served->keep == nullptr) return nullptr;  // retired meanwhile
  served->informer_namespace = ref->config.namespace_;
  served->metadata_only = ref->config.metadata_only;
  served->cache = std::make_unique<ResourceCache>(options_.history_limit,
                                                  [this] { Wake(); });
  informer::HandlerOptions ho;
  ho.non_blocking = true;
  absl::StatusOr<informer::HandlerRegistration*> reg =
      ref->informer->AddEventHandler(served->cache.get(), ho);
  if (!reg.ok()) {
    LOG(WARNING) << "Kubernetes API facade: " << served->name << ": "
                 << reg.status();
    return nullptr;
  }
  served->registration = *reg;
  LOG(INFO) << "Kubernetes API facade: serving lazily started " << served->name;
  Served* raw = served.get();
  by_path_[key] = raw;
  served_.push_back(std::move(served));
  return raw;
}

void KubeApiServer::OnLazyRetired(InformerEntry* entry) {
  auto drop = [](KubeApiServer* self, InformerEntry* e) {
    for (size_t i = self->configured_; i < self->served_.size(); ++i) {
      Served* s = self->served_[i].get();
      if (s->entry != e) continue;
      // An open watch keeps its informer from retiring; end any anyway.
      std::vector<Watcher*> mine;
      for (Watcher* w : self->watchers_) {
        if (w->served == s) mine.push_back(w);
      }
      for (Watcher* w : mine) self->EndWatch(w, nullptr);
      if (s->registration != nullptr) {
        (void)e->informer->RemoveEventHandler(s->registration);
      }
      auto path = self->by_path_.find(absl::StrCat(
          s->api.group, "/", s->api.version, "/", s->api.resource));
      if (path != self->by_path_.end() && path->second == s) {
        self->by_path_.erase(path);
      }
      self->served_.erase(self->served_.begin() + i);
      return;
    }
  };
  if (loop_.get_id() == std::this_thread::get_id()) {
    drop(this, entry);
    return;
  }
  // From the registry's idle thread: drop it on the loop, and wait, since
  // the informer stops right after this returns.
  struct Call {
    KubeApiServer* self;
    InformerEntry* entry;
    decltype(drop) fn;
    absl::Notification done;
  };
  Call call{this, entry, drop, {}};
  int queued = event_base_once(
      base_, -1, EV_TIMEOUT,
      [](int, short, void* arg) {
        auto* c = static_cast<Call*>(arg);
        c->fn(c->self, c->entry);
        c->done.Notify();
      },
      &call, nullptr);
  if (queued == 0) call.done.WaitForNotification();
}

void KubeApiServer::StartWorker() {
  worker_ = std::thread([this] {
    while (true) {
      std::vector<std::function<void()>> jobs;
      {
        absl::MutexLock lock(&worker_mu_);
        while (!worker_stop_ && jobs_.empty()) worker_cv_.Wait(&worker_mu_);
        if (worker_stop_) return;
        jobs.swap(jobs_);
      }
      for (auto& job : jobs) job();
    }
  });
  if (options_.discovery->Resources().empty()) {
    // Lazy mode with nothing configured: discovery may not have been read
    // yet; /api/v1 and /apis list what it knows.
    PostToWorker([this] {
      last_discovery_refresh_ = absl::Now();
      absl::Status st = options_.discovery->Refresh();
      if (!st.ok()) LOG(WARNING) << "Kubernetes API facade: discovery: " << st;
    });
  }
}

void KubeApiServer::StopWorker() {
  if (!worker_.joinable()) return;
  {
    absl::MutexLock lock(&worker_mu_);
    worker_stop_ = true;
    worker_cv_.SignalAll();
  }
  worker_.join();
}

void KubeApiServer::PostToWorker(std::function<void()> job) {
  absl::MutexLock lock(&worker_mu_);
  jobs_.push_back(std::move(job));
  worker_cv_.Signal();
}

}  // namespace kubeapi
}  // namespace server
