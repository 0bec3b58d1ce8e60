#include "emulator/seed.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace emulator {
namespace {

std::string ContainerFields() {
  std::string env;
  for (int i = 0; i < 8; ++i) {
    absl::StrAppend(&env, i ? "," : "", "\"k:{\\\"name\\\":\\\"VAR_", i,
                    "\\\"}\":{\".\":{},\"f:name\":{},\"f:value\":{}}");
  }
  return absl::StrCat(
      "{\".\":{},\"f:env\":{\".\":{},", env,
      "},\"f:image\":{},\"f:imagePullPolicy\":{},\"f:name\":{},\"f:ports\":{"
      "\".\":{},\"k:{\\\"containerPort\\\":8080,\\\"protocol\\\":\\\"TCP\\\"}"
      "\":{\".\":{},\"f:containerPort\":{},\"f:protocol\":{}}},"
      "\"f:readinessProbe\":{\".\":{},\"f:failureThreshold\":{},\"f:httpGet\":"
      "{\".\":{},\"f:path\":{},\"f:port\":{},\"f:scheme\":{}},"
      "\"f:periodSeconds\":{},\"f:successThreshold\":{},\"f:timeoutSeconds\":{"
      "}},\"f:resources\":{\".\":{},\"f:limits\":{\".\":{},\"f:cpu\":{},\"f:"
      "memory\":{}},\"f:requests\":{\".\":{},\"f:cpu\":{},\"f:memory\":{}}},"
      "\"f:terminationMessagePath\":{},\"f:terminationMessagePolicy\":{},\"f:"
      "volumeMounts\":{\".\":{},\"k:{\\\"mountPath\\\":\\\"/etc/"
      "config\\\"}\":{\".\":{},\"f:mountPath\":{},\"f:name\":{}}}}");
}

std::string Container(absl::string_view name, absl::string_view image, int app,
                      absl::string_view token_volume) {
  std::string env;
  for (int i = 0; i < 8; ++i) {
    absl::StrAppend(&env, i ? "," : "", "{\"name\":\"VAR_", i,
                    "\",\"value\":\"value-", app, "-", i, "\"}");
  }
  return absl::StrCat(
      "{\"name\":\"", name, "\",\"image\":\"", image,
      "\",\"ports\":[{\"containerPort\":8080,\"protocol\":\"TCP\"}],\"env\":[",
      env,
      "],\"resources\":{\"limits\":{\"cpu\":\"500m\",\"memory\":\"256Mi\"},"
      "\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"}},\"volumeMounts\":"
      "[{\"name\":\"config\",\"mountPath\":\"/etc/config\"},{\"name\":\"",
      token_volume,
      "\",\"readOnly\":true,\"mountPath\":\"/var/run/secrets/"
      "kubernetes.io/serviceaccount\"}],\"readinessProbe\":{\"httpGet\":{"
      "\"path\":\"/ready\",\"port\":8080,\"scheme\":\"HTTP\"},"
      "\"timeoutSeconds\":1,\"periodSeconds\":10,\"successThreshold\":1,"
      "\"failureThreshold\":3},\"terminationMessagePath\":\"/dev/"
      "termination-log\",\"terminationMessagePolicy\":\"File\","
      "\"imagePullPolicy\":\"IfNotPresent\"}");
}

const ResourceInfo& MustFind(const ResourceRegistry& registry,
                             absl::string_view name) {
  const ResourceInfo* r = registry.FindByName(name);
  CHECK(r != nullptr) << "built-in resource missing: " << name;
  return *r;
}

// Creates unless it exists already (seeding twice is harmless).
absl::StatusOr<StoredObjectPtr> Ensure(ObjectStore& store,
                                       const ResourceInfo& r,
                                       absl::string_view ns,
                                       absl::string_view json) {
  absl::StatusOr<StoredObjectPtr> created = store.Create(r, ns, json);
  if (created.status().code() == absl::StatusCode::kAlreadyExists) {
    return StoredObjectPtr(nullptr);
  }
  return created;
}

std::string NamespaceJson(absl::string_view name) {
  return absl::StrCat(
      "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"",
      name, "\",\"labels\":{\"kubernetes.io/metadata.name\":\"", name,
      "\"}},\"spec\":{\"finalizers\":[\"kubernetes\"]},\"status\":{\"phase\":"
      "\"Active\"}}");
}

std::string OwnerRef(absl::string_view api_version, absl::string_view kind,
                     absl::string_view name, absl::string_view uid) {
  return absl::StrCat("[{\"apiVersion\":\"", api_version, "\",\"kind\":\"",
                      kind, "\",\"name\":\"", name, "\",\"uid\":\"", uid,
                      "\",\"controller\":true,\"blockOwnerDeletion\":true}]");
}

}  // namespace

std::string PodJson(const PodParams& p) {
  std::string owner;
  if (!p.owner_kind.empty()) {
    owner = absl::StrCat(
        ",\"ownerReferences\":",
        OwnerRef("apps/v1", p.owner_kind, p.owner_name, p.owner_uid));
  }
  std::string fields = ContainerFields();
  const std::string hash_label =
      p.template_hash.empty()
          ? ""
          : absl::StrCat("\"pod-template-hash\":\"", p.template_hash, "\",");
  const std::string generate_name =
      p.template_hash.empty()
          ? ""
          : absl::StrCat("\"generateName\":\"", p.owner_name, "-\",");
  const std::string hash_field =
      p.template_hash.empty() ? "" : "\"f:pod-template-hash\":{},";
  const std::string owner_field =
      p.owner_kind.empty()
          ? ""
          : absl::StrCat(
                ",\"f:ownerReferences\":{\".\":{},\"k:{\\\"uid\\\":"
                "\\\"",
                p.owner_uid, "\\\"}\":{}}");
  const std::string token_volume =
      absl::StrCat("kube-api-access", p.token_volume_suffix.empty() ? "" : "-",
                   p.token_volume_suffix);
  return absl::StrCat(
      "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"",
      p.name, "\",", generate_name, "\"namespace\":\"", p.ns,
      "\",\"labels\":{\"app\":\"app-", p.app, "\",", hash_label, "\"shard\":\"",
      p.app % 4,
      "\",\"tier\":\"web\"},\"annotations\":{\"example.com/owner\":\"team-",
      p.app, "\"}", owner,
      ",\"managedFields\":[{\"manager\":\"kube-controller-manager\","
      "\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"",
      p.timestamp,
      "\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:"
      "annotations\":{\".\":{},\"f:example.com/owner\":{}},",
      p.template_hash.empty() ? "" : "\"f:generateName\":{},",
      "\"f:labels\":{\".\":{},\"f:app\":{},", hash_field,
      "\"f:shard\":{},\"f:tier\":{}}", owner_field,
      "},\"f:spec\":{\"f:"
      "containers\":{\"k:{\\\"name\\\":\\\"main\\\"}\":",
      fields, ",\"k:{\\\"name\\\":\\\"sidecar\\\"}\":", fields,
      "},\"f:dnsPolicy\":{},\"f:enableServiceLinks\":{},\"f:nodeName\":{},"
      "\"f:restartPolicy\":{},\"f:schedulerName\":{},\"f:securityContext\":{},"
      "\"f:terminationGracePeriodSeconds\":{},\"f:volumes\":{\".\":{},\"k:{"
      "\\\"name\\\":\\\"config\\\"}\":{\".\":{},\"f:configMap\":{\".\":{},\"f:"
      "defaultMode\":{},\"f:name\":{}},\"f:name\":{}}}}}}]},"
      "\"spec\":{\"volumes\":[{\"name\":\"config\",\"configMap\":{\"name\":"
      "\"app-",
      p.app, "-config\",\"defaultMode\":420}},{\"name\":\"", token_volume,
      "\",\"projected\":{\"sources\":[{\"serviceAccountToken\":{"
      "\"expirationSeconds\":3607,\"path\":\"token\"}},{\"configMap\":{"
      "\"name\":\"kube-root-ca.crt\",\"items\":[{\"key\":\"ca.crt\",\"path\":"
      "\"ca.crt\"}]}},{\"downwardAPI\":{\"items\":[{\"path\":\"namespace\","
      "\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"metadata."
      "namespace\"}}]}}],\"defaultMode\":420}}],\"containers\":[",
      Container("main", absl::StrCat("registry.example/app-", p.app, ":1.0"),
                p.app, token_volume),
      ",",
      Container("sidecar", "registry.example/proxy:2.1", p.app, token_volume),
      "],\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,"
      "\"dnsPolicy\":\"ClusterFirst\",\"serviceAccountName\":\"default\","
      "\"serviceAccount\":\"default\",\"nodeName\":\"",
      p.node,
      "\",\"securityContext\":{},\"schedulerName\":\"default-scheduler\","
      "\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\","
      "\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":"
      "300},{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":"
      "\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],"
      "\"priority\":0,\"enableServiceLinks\":true,\"preemptionPolicy\":"
      "\"PreemptLowerPriority\"},\"status\":{\"phase\":\"Running\","
      "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
      "\"lastProbeTime\":null,\"lastTransitionTime\":\"",
      p.timestamp, "\"}],\"hostIP\":\"10.0.0.1\",\"podIP\":\"", p.pod_ip,
      "\",\"startTime\":\"", p.timestamp, "\",\"qosClass\":\"Burstable\"}}");
}

absl::Status SeedPods(ObjectStore& store, const ResourceRegistry& registry,
                      int count, absl::string_view ns) {
  const ResourceInfo& namespaces = MustFind(registry, "namespaces");
  const ResourceInfo& pods = MustFind(registry, "pods");
  absl::StatusOr<StoredObjectPtr> s =
      Ensure(store, namespaces, "", NamespaceJson(ns));
  if (!s.ok()) return s.status();
  for (int i = 0; i < count; ++i) {
    PodParams p;
    p.ns = std::string(ns);
    p.name = absl::StrFormat("pod-%06d", i);
    p.node = absl::StrFormat("node-%03d", i % 100);
    p.app = i % 10;
    p.pod_ip = absl::StrFormat("10.%d.%d.%d", (i >> 16) & 255, (i >> 8) & 255,
                               i & 255);
    absl::StatusOr<StoredObjectPtr> pod = store.Create(pods, ns, PodJson(p));
    if (!pod.ok()) return pod.status();
  }
  return absl::OkStatus();
}

namespace {

// A deterministic stand-in for a random string of `n` characters of
// `alphabet` (the same for the same seed, so every run seeds alike).
std::string Pseudo(uint64_t seed, int n, absl::string_view alphabet) {
  std::string out;
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  for (int i = 0; i < n; ++i) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    out.push_back(alphabet[x % alphabet.size()]);
  }
  return out;
}

// The UID of the ReplicaSet of app `app` in namespace number `ns`.
std::string ReplicaSetUid(int ns, int app) {
  const std::string h =
      Pseudo(static_cast<uint64_t>(ns) * 1000 + app, 32, "0123456789abcdef");
  return absl::StrCat(h.substr(0, 8), "-", h.substr(8, 4), "-", h.substr(12, 4),
                      "-", h.substr(16, 4), "-", h.substr(20, 12));
}

// kube-controller-manager's alphabets: pod-template-hash (SafeEncodeString
// of a hash) and generateName suffixes (utilrand.String).
constexpr absl::string_view kSafeAlphabet = "bcdfghjklmnpqrstvwxz2456789";

}  // namespace

PodParams SpreadPodParams(int i, const PodSpread& spread) {
  const int ns = i % spread.namespaces;
  const int app = (i / spread.namespaces) % spread.apps_per_namespace;
  PodParams p;
  p.ns = absl::StrFormat("tenant-%03d", ns);
  p.app = app;
  p.template_hash =
      Pseudo(static_cast<uint64_t>(ns) * 1000 + app, 10, kSafeAlphabet);
  p.owner_kind = "ReplicaSet";
  p.owner_name = absl::StrCat("app-", app, "-", p.template_hash);
  p.owner_uid = ReplicaSetUid(ns, app);
  p.name = absl::StrCat(p.owner_name, "-",
                        Pseudo(0x100000000ull + i, 5, kSafeAlphabet));
  p.token_volume_suffix = Pseudo(0x200000000ull + i, 5, kSafeAlphabet);
  p.node = absl::StrFormat("node-%04d", i % spread.nodes);
  p.pod_ip = absl::StrFormat("10.%d.%d.%d", 64 + ((i >> 16) & 63),
                             (i >> 8) & 255, i & 255);
  return p;
}

absl::Status SeedSpreadPods(ObjectStore& store,
                            const ResourceRegistry& registry, int count,
                            const PodSpread& spread) {
  if (spread.namespaces < 1 || spread.nodes < 1 ||
      spread.apps_per_namespace < 1) {
    return absl::InvalidArgumentError(
        "pod spread: namespaces, nodes and apps must be >= 1");
  }
  const ResourceInfo& namespaces = MustFind(registry, "namespaces");
  const ResourceInfo& pods = MustFind(registry, "pods");
  for (int n = 0; n < spread.namespaces; ++n) {
    absl::StatusOr<StoredObjectPtr> s =
        Ensure(store, namespaces, "",
               NamespaceJson(absl::StrFormat("tenant-%03d", n)));
    if (!s.ok()) return s.status();
  }
  for (int i = 0; i < count; ++i) {
    const PodParams p = SpreadPodParams(i, spread);
    absl::StatusOr<StoredObjectPtr> pod = store.Create(pods, p.ns, PodJson(p));
    if (!pod.ok()) {
      return absl::Status(pod.status().code(),
                          absl::StrCat("pod ", p.ns, "/", p.name, ": ",
                                       pod.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::Status SeedConfigMaps(ObjectStore& store,
                            const ResourceRegistry& registry, int count,
                            absl::string_view ns, int data_bytes) {
  const ResourceInfo& namespaces = MustFind(registry, "namespaces");
  const ResourceInfo& configmaps = MustFind(registry, "configmaps");
  absl::StatusOr<StoredObjectPtr> s =
      Ensure(store, namespaces, "", NamespaceJson(ns));
  if (!s.ok()) return s.status();
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t state = 0x9e3779b97f4a7c15ull;  // fixed: the same data each run
  std::string data;
  for (int i = 0; i < count; ++i) {
    data.clear();
    for (int b = 0; b < data_bytes; ++b) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      data.push_back(kAlphabet[(state >> 33) % (sizeof(kAlphabet) - 1)]);
    }
    const std::string json = absl::StrCat(
        "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{"
        "\"name\":\"",
        absl::StrFormat("cm-%06d", i), "\",\"namespace\":\"", ns,
        "\",\"labels\":{\"app\":\"app-", i % 10,
        "\"},\"managedFields\":[{\"manager\":\"kubectl-create\","
        "\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":"
        "\"2026-11-30T18:06:29Z\",\"fieldsType\":\"FieldsV1\","
        "\"fieldsV1\":{\"f:data\":{\".\":{},\"f:payload\":{}},"
        "\"f:metadata\":{\"f:labels\":{\".\":{},\"f:app\":{}}}}}]},"
        "\"data\":{\"payload\":\"",
        data, "\"}}");
    absl::StatusOr<StoredObjectPtr> cm = store.Create(configmaps, ns, json);
    if (!cm.ok()) return cm.status();
  }
  return absl::OkStatus();
}

namespace {

// The built-in resources the demo seeds, looked up once.
struct DemoResources {
  const ResourceInfo& namespaces;
  const ResourceInfo& nodes;
  const ResourceInfo& deployments;
  const ResourceInfo& replicasets;
  const ResourceInfo& pods;
  const ResourceInfo& configmaps;
};

// One demo application: a ConfigMap, a Deployment, its ReplicaSet and pods.
struct DemoApp {
  const char* ns;
  const char* name;
  int replicas;
};

absl::Status SeedDemoNamespacesAndNodes(ObjectStore& store,
                                        const DemoResources& res) {
  for (absl::string_view ns : {"default", "kube-system", "demo", "shop"}) {
    auto s = Ensure(store, res.namespaces, "", NamespaceJson(ns));
    if (!s.ok()) return s.status();
  }
  for (int i = 1; i <= 3; ++i) {
    auto s = Ensure(
        store, res.nodes, "",
        absl::StrCat("{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{"
                     "\"name\":\"node-",
                     i, "\",\"labels\":{\"kubernetes.io/hostname\":\"node-", i,
                     "\",\"topology.kubernetes.io/zone\":\"zone-", i % 2,
                     "\"}},\"spec\":{\"podCIDR\":\"10.244.", i,
                     ".0/24\"},\"status\":{\"conditions\":[{\"type\":"
                     "\"Ready\",\"status\":\"True\"}]}}"));
    if (!s.ok()) return s.status();
  }
  return absl::OkStatus();
}

// Seeds `app` (the `app_index`th, from 1: it spreads names, nodes and pod
// IPs). A Deployment seeded before leaves its ReplicaSet and pods alone.
absl::Status SeedDemoApp(ObjectStore& store, const DemoResources& res,
                         const DemoApp& app, int app_index) {
  auto cm = Ensure(
      store, res.configmaps, app.ns,
      absl::StrCat("{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":"
                   "{\"name\":\"",
                   app.name, "-config\",\"labels\":{\"app\":\"", app.name,
                   "\"}},\"data\":{\"LOG_LEVEL\":\"info\",\"tick\":\"0\"}}"));
  if (!cm.ok()) return cm.status();
  auto dep = Ensure(
      store, res.deployments, app.ns,
      absl::StrCat("{\"kind\":\"Deployment\",\"apiVersion\":\"apps/v1\","
                   "\"metadata\":{\"name\":\"",
                   app.name, "\",\"labels\":{\"app\":\"", app.name,
                   "\"}},\"spec\":{\"replicas\":", app.replicas,
                   ",\"selector\":{\"matchLabels\":{\"app\":\"", app.name,
                   "\"}}},\"status\":{\"replicas\":", app.replicas,
                   ",\"readyReplicas\":", app.replicas, "}}"));
  if (!dep.ok()) return dep.status();
  if (*dep == nullptr) return absl::OkStatus();  // seeded before
  std::string rs_name = absl::StrCat(app.name, "-5d8f7c", app_index);
  auto rs = Ensure(
      store, res.replicasets, app.ns,
      absl::StrCat("{\"kind\":\"ReplicaSet\",\"apiVersion\":\"apps/v1\","
                   "\"metadata\":{\"name\":\"",
                   rs_name, "\",\"labels\":{\"app\":\"", app.name,
                   "\"},\"ownerReferences\":",
                   OwnerRef("apps/v1", "Deployment", app.name, (*dep)->uid),
                   "},\"spec\":{\"replicas\":", app.replicas,
                   "},\"status\":{\"replicas\":", app.replicas, "}}"));
  if (!rs.ok()) return rs.status();
  for (int i = 0; i < app.replicas; ++i) {
    PodParams p;
    p.ns = app.ns;
    p.name = absl::StrCat(rs_name, "-", "p", i);
    p.node = absl::StrCat("node-", 1 + (app_index + i) % 3);
    p.app = app_index;
    p.owner_kind = "ReplicaSet";
    p.owner_name = rs_name;
    p.owner_uid = (*rs)->uid;
    p.pod_ip = absl::StrCat("10.244.", 1 + (app_index + i) % 3, ".",
                            10 * app_index + i);
    auto pod = Ensure(store, res.pods, app.ns, PodJson(p));
    if (!pod.ok()) return pod.status();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SeedDemo(ObjectStore& store, const ResourceRegistry& registry) {
  const DemoResources res{MustFind(registry, "namespaces"),
                          MustFind(registry, "nodes"),
                          MustFind(registry, "deployments.apps"),
                          MustFind(registry, "replicasets.apps"),
                          MustFind(registry, "pods"),
                          MustFind(registry, "configmaps")};
  absl::Status st = SeedDemoNamespacesAndNodes(store, res);
  if (!st.ok()) return st;
  const DemoApp apps[] = {{"demo", "web", 3},
                          {"demo", "api", 2},
                          {"shop", "cart", 2},
                          {"shop", "checkout", 1}};
  int app_index = 0;
  for (const DemoApp& app : apps) {
    st = SeedDemoApp(store, res, app, ++app_index);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

Churner::Churner(ObjectStore* store, const ResourceRegistry* registry,
                 informer::Clock* clock, absl::Duration interval)
    : store_(store), registry_(registry), clock_(clock), interval_(interval) {}

Churner::~Churner() { Stop(); }

void Churner::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Churner::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int64_t Churner::ticks() const {
  absl::MutexLock lock(&mu_);
  return ticks_;
}

bool Churner::AwaitTicks(int64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ticks_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

void Churner::Run() {
  absl::Time next = clock_->Now() + interval_;
  while (true) {
    int64_t n;
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      if (clock_->AwaitWithDeadline(&mu_, absl::Condition(&stopping), next)) {
        return;
      }
      n = ticks_ + 1;
    }
    Tick(n);
    next += interval_;
    absl::MutexLock lock(&mu_);
    ticks_ = n;
  }
}

void Churner::Tick(int64_t n) {
  const ResourceInfo& configmaps = MustFind(*registry_, "configmaps");
  const ResourceInfo& pods = MustFind(*registry_, "pods");
  const ResourceInfo& deployments = MustFind(*registry_, "deployments.apps");
  const ResourceInfo& events = MustFind(*registry_, "events");
  // 1. A ConfigMap changes.
  absl::Status s =
      store_
          ->Patch(configmaps, "demo", "web-config", PatchType::kMerge,
                  absl::StrCat("{\"data\":{\"tick\":\"", n, "\"}}"))
          .status();
  if (!s.ok()) VLOG(1) << "churn configmap: " << s;
  // 2. A web Pod is replaced by a new one (rolling restart).
  std::vector<std::pair<std::string, int64_t>> all = store_->Snapshot(pods);
  std::vector<std::string> web;
  for (const auto& [key, rv] : all) {
    if (absl::StartsWith(key, "demo/web-")) web.push_back(key.substr(5));
  }
  if (!web.empty()) {
    const std::string victim = web[n % web.size()];
    absl::StatusOr<StoredObjectPtr> old = store_->Get(pods, "demo", victim);
    if (old.ok()) {
      (void)store_->Delete(pods, "demo", victim);
      std::string rs = victim.substr(0, victim.rfind('-'));
      absl::StatusOr<StoredObjectPtr> rs_obj =
          store_->Get(MustFind(*registry_, "replicasets.apps"), "demo", rs);
      PodParams p;
      p.ns = "demo";
      p.name = absl::StrCat(rs, "-r", n);
      p.node = absl::StrCat("node-", 1 + n % 3);
      p.app = 1;
      p.owner_kind = "ReplicaSet";
      p.owner_name = rs;
      p.owner_uid = rs_obj.ok() ? (*rs_obj)->uid : "";
      p.pod_ip = absl::StrCat("10.244.", 1 + n % 3, ".", 100 + n % 150);
      s = store_->Create(pods, "demo", PodJson(p)).status();
      if (!s.ok()) VLOG(1) << "churn pod: " << s;
      // 3. An Event records it.
      s = store_
              ->Create(
                  events, "demo",
                  absl::StrCat("{\"metadata\":{\"generateName\":\"", p.name,
                               ".\"},\"involvedObject\":{\"kind\":\"Pod\","
                               "\"namespace\":\"demo\",\"name\":\"",
                               p.name,
                               "\"},\"reason\":\"Scheduled\",\"message\":"
                               "\"Successfully assigned demo/",
                               p.name, " to ", p.node,
                               "\",\"type\":\"Normal\",\"count\":1,\"source\":{"
                               "\"component\":\"kube-emulator\"}}"))
              .status();
      if (!s.ok()) VLOG(1) << "churn event: " << s;
    }
  }
  // 4. A Deployment's status moves.
  s = store_
          ->Patch(deployments, "shop", "cart", PatchType::kMerge,
                  absl::StrCat("{\"status\":{\"observedGeneration\":1,"
                               "\"updatedReplicas\":",
                               2 - n % 2, "}}"))
          .status();
  if (!s.ok()) VLOG(1) << "churn deployment: " << s;
}

}  // namespace emulator
