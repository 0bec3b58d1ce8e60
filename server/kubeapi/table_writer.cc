#include "server/kubeapi/table_writer.h"

#include <event2/buffer.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/kubeapi/api_status.h"
#include "simdjson.h"

namespace server {
namespace kubeapi {
namespace {

using simdjson::dom::element;

struct Column {
  const char* name;
  const char* format;
  const char* description;
  int priority;
};

// ObjectMeta's documentation, as the API server's printers describe these
// columns.
constexpr char kNameDoc[] =
    "Name must be unique within a namespace. Is required when creating "
    "resources, although some resources may allow a client to request the "
    "generation of an appropriate name automatically. Name is primarily "
    "intended for creation idempotence and configuration definition. Cannot "
    "be updated. More info: "
    "http://kubernetes.io/docs/user-guide/identifiers#names";
constexpr char kAgeDoc[] =
    "CreationTimestamp is a timestamp representing the server time when "
    "this object was created. It is not guaranteed to be set in "
    "happens-before order across separate operations. Clients may not set "
    "this value. It is represented in RFC3339 form and is in UTC.\n\n"
    "Populated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#metadata";

const std::vector<Column>& GenericColumns() {
  static const auto* columns = new std::vector<Column>{
      {"Name", "name", kNameDoc, 0},
      {"Age", "", kAgeDoc, 0},
  };
  return *columns;
}

const std::vector<Column>& PodColumns() {
  static const auto* columns = new std::vector<Column>{
      {"Name", "name", kNameDoc, 0},
      {"Ready", "",
       "The aggregate readiness state of this pod for accepting traffic.", 0},
      {"Status", "", "The aggregate status of the containers in this pod.", 0},
      {"Restarts", "",
       "The number of times the containers in this pod have been restarted "
       "and when the last container in this pod has restarted.",
       0},
      {"Age", "", kAgeDoc, 0},
      {"IP", "",
       "IP address allocated to the pod. Routable at least within the "
       "cluster. Empty if not yet allocated.",
       1},
      {"Node", "",
       "NodeName is a request to schedule this pod onto a specific node. If "
       "it is non-empty, the scheduler simply schedules this pod onto that "
       "node, assuming that it fits resource requirements.",
       1},
      {"Nominated Node", "",
       "nominatedNodeName is set only when this pod preempts other pods on "
       "the node, but it cannot be scheduled right away as preemption "
       "victims receive their graceful termination periods.",
       1},
      {"Readiness Gates", "",
       "If specified, all readiness gates will be evaluated for pod "
       "readiness.",
       1},
  };
  return *columns;
}

// The element at `path` below `e`.
bool At(element e, std::initializer_list<const char*> path, element* out) {
  for (const char* key : path) {
    if (e.at_key(key).get(e) != simdjson::SUCCESS) return false;
  }
  *out = e;
  return true;
}

std::string Str(element e, std::initializer_list<const char*> path) {
  element v;
  std::string_view s;
  if (!At(e, path, &v) || v.get_string().get(s) != simdjson::SUCCESS) {
    return "";
  }
  return std::string(s);
}

int64_t Int(element e, std::initializer_list<const char*> path) {
  element v;
  int64_t n = 0;
  if (!At(e, path, &v) || v.get_int64().get(n) != simdjson::SUCCESS) return 0;
  return n;
}

bool Bool(element e, std::initializer_list<const char*> path) {
  element v;
  bool b = false;
  return At(e, path, &v) && v.get_bool().get(b) == simdjson::SUCCESS && b;
}

std::vector<element> Array(element e, std::initializer_list<const char*> path) {
  element v;
  simdjson::dom::array a;
  std::vector<element> out;
  if (!At(e, path, &v) || v.get_array().get(a) != simdjson::SUCCESS) {
    return out;
  }
  for (element x : a) out.push_back(x);
  return out;
}

absl::Time Timestamp(const std::string& rfc3339) {
  absl::Time t;
  std::string err;
  if (rfc3339.empty() ||
      !absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &err)) {
    return absl::InfinitePast();
  }
  return t;
}

// The printers' translateTimestampSince.
std::string Since(const std::string& rfc3339, absl::Time now) {
  absl::Time t = Timestamp(rfc3339);
  if (t == absl::InfinitePast()) return "<unknown>";
  return HumanDuration(now - t);
}

bool ConditionTrue(element pod, const std::string& type) {
  for (element c : Array(pod, {"status", "conditions"})) {
    if (Str(c, {"type"}) == type) return Str(c, {"status"}) == "True";
  }
  return false;
}

// The reason of a terminated state without one, as the pod printer words
// it ("ExitCode:1", "Signal:9").
std::string TerminatedWithoutReason(element terminated) {
  int64_t signal = Int(terminated, {"signal"});
  return signal != 0 ? absl::StrCat("Signal:", signal)
                     : absl::StrCat("ExitCode:", Int(terminated, {"exitCode"}));
}

// The init containers' part of the pod printer's status: true when the pod
// is still initialising (`reason` set accordingly).
bool InitStatus(element pod, std::string* reason, int64_t* restarts) {
  std::vector<element> inits = Array(pod, {"status", "initContainerStatuses"});
  const size_t declared = Array(pod, {"spec", "initContainers"}).size();
  for (size_t i = 0; i < inits.size(); ++i) {
    element c = inits[i];
    *restarts += Int(c, {"restartCount"});
    element state;
    if (At(c, {"state", "terminated"}, &state)) {
      if (Int(state, {"exitCode"}) == 0) continue;
      std::string why = Str(state, {"reason"});
      *reason = why.empty()
                    ? absl::StrCat("Init:", TerminatedWithoutReason(state))
                    : absl::StrCat("Init:", why);
      return true;
    }
    std::string waiting = Str(c, {"state", "waiting", "reason"});
    if (!waiting.empty() && waiting != "PodInitializing") {
      *reason = absl::StrCat("Init:", waiting);
    } else {
      *reason = absl::StrCat("Init:", i, "/", declared);
    }
    return true;
  }
  return false;
}

// The API server's pod printer: Ready, Status, Restarts (then Age) and the
// wide columns.
std::vector<std::string> PodCells(element pod, absl::Time now) {
  std::string reason = Str(pod, {"status", "phase"});
  const std::string status_reason = Str(pod, {"status", "reason"});
  if (!status_reason.empty()) reason = status_reason;
  int64_t restarts = 0;
  int64_t ready = 0;
  absl::Time last_restart = absl::InfinitePast();
  if (!InitStatus(pod, &reason, &restarts)) {
    restarts = 0;
    bool has_running = false;
    std::vector<element> statuses = Array(pod, {"status", "containerStatuses"});
    for (auto it = statuses.rbegin(); it != statuses.rend(); ++it) {
      element c = *it;
      restarts += Int(c, {"restartCount"});
      element state;
      if (At(c, {"lastState", "terminated"}, &state)) {
        last_restart =
            std::max(last_restart, Timestamp(Str(state, {"finishedAt"})));
      }
      const std::string waiting = Str(c, {"state", "waiting", "reason"});
      if (!waiting.empty()) {
        reason = waiting;
      } else if (At(c, {"state", "terminated"}, &state)) {
        std::string why = Str(state, {"reason"});
        reason = why.empty() ? TerminatedWithoutReason(state) : why;
      } else if (Bool(c, {"ready"}) && At(c, {"state", "running"}, &state)) {
        has_running = true;
        ++ready;
      }
    }
    // A completed container beside a running one: the pod still runs.
    if (reason == "Completed" && has_running) {
      reason = ConditionTrue(pod, "Ready") ? "Running" : "NotReady";
    }
  }
  if (!Str(pod, {"metadata", "deletionTimestamp"}).empty()) {
    reason = status_reason == "NodeLost" ? "Unknown" : "Terminating";
  }
  std::string restarts_text = absl::StrCat(restarts);
  if (last_restart != absl::InfinitePast()) {
    absl::StrAppend(&restarts_text, " (", HumanDuration(now - last_restart),
                    " ago)");
  }
  auto or_none = [](std::string s) { return s.empty() ? "<none>" : s; };
  std::string ip;
  std::vector<element> ips = Array(pod, {"status", "podIPs"});
  if (!ips.empty()) ip = Str(ips[0], {"ip"});
  std::string gates = "<none>";
  std::vector<element> declared = Array(pod, {"spec", "readinessGates"});
  if (!declared.empty()) {
    int met = 0;
    for (element g : declared) {
      met += ConditionTrue(pod, Str(g, {"conditionType"})) ? 1 : 0;
    }
    gates = absl::StrCat(met, "/", declared.size());
  }
  return {absl::StrCat(ready, "/", Array(pod, {"spec", "containers"}).size()),
          reason,
          restarts_text,
          Since(Str(pod, {"metadata", "creationTimestamp"}), now),
          or_none(ip),
          or_none(Str(pod, {"spec", "nodeName"})),
          or_none(Str(pod, {"status", "nominatedNodeName"})),
          gates};
}

std::string ColumnsJson(const std::vector<Column>& columns) {
  std::string out;
  for (const Column& c : columns) {
    absl::StrAppend(&out, out.empty() ? "" : ",", R"({"name":)",
                    JsonQuote(c.name), R"(,"type":"string","format":)",
                    JsonQuote(c.format), R"(,"description":)",
                    JsonQuote(c.description), R"(,"priority":)", c.priority,
                    "}");
  }
  return out;
}

}  // namespace

std::string HumanDuration(absl::Duration d) {
  const int64_t seconds = absl::ToInt64Seconds(d);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return absl::StrCat(seconds, "s");
  const int64_t minutes = seconds / 60;
  if (minutes < 10) {
    const int64_t s = seconds % 60;
    return s == 0 ? absl::StrCat(minutes, "m")
                  : absl::StrCat(minutes, "m", s, "s");
  }
  if (minutes < 60 * 3) return absl::StrCat(minutes, "m");
  const int64_t hours = minutes / 60;
  if (hours < 8) {
    const int64_t m = minutes % 60;
    return m == 0 ? absl::StrCat(hours, "h") : absl::StrCat(hours, "h", m, "m");
  }
  if (hours < 48) return absl::StrCat(hours, "h");
  if (hours < 24 * 8) {
    const int64_t h = hours % 24;
    return h == 0 ? absl::StrCat(hours / 24, "d")
                  : absl::StrCat(hours / 24, "d", h, "h");
  }
  if (hours < 24 * 365 * 2) return absl::StrCat(hours / 24, "d");
  if (hours < 24 * 365 * 8) {
    const int64_t dy = (hours / 24) % 365;
    return dy == 0 ? absl::StrCat(hours / 24 / 365, "y")
                   : absl::StrCat(hours / 24 / 365, "y", dy, "d");
  }
  return absl::StrCat(hours / 24 / 365, "y");
}

void AppendTable(const ObjectForm& form,
                 const std::vector<informer::ObjectPtr>& objects,
                 absl::string_view list_meta, IncludeObject include,
                 absl::Time now, evbuffer* out) {
  const bool pods = form.kind == "Pod" && form.api_version == "v1" &&
                    !form.cache_metadata_only;
  std::string head = absl::StrCat(
      R"({"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":)", list_meta,
      R"(,"columnDefinitions":[)",
      ColumnsJson(pods ? PodColumns() : GenericColumns()), R"(],"rows":[)");
  evbuffer_add(out, head.data(), head.size());
  ObjectForm metadata_form = form;
  metadata_form.metadata_only = true;
  simdjson::dom::parser parser;
  bool first = true;
  for (const informer::ObjectPtr& obj : objects) {
    element doc;
    const std::string json = obj->json().str();
    if (parser.parse(json).get(doc) != simdjson::SUCCESS) continue;
    std::vector<std::string> cells = {std::string(obj->name())};
    if (pods) {
      std::vector<std::string> pod = PodCells(doc, now);
      cells.insert(cells.end(), pod.begin(), pod.end());
    } else {
      cells.push_back(Since(Str(doc, {"metadata", "creationTimestamp"}), now));
    }
    std::string row = absl::StrCat(first ? "" : ",", R"({"cells":[)");
    first = false;
    for (size_t i = 0; i < cells.size(); ++i) {
      absl::StrAppend(&row, i == 0 ? "" : ",", JsonQuote(cells[i]));
    }
    absl::StrAppend(&row, R"(],"object":)");
    evbuffer_add(out, row.data(), row.size());
    switch (include) {
      case IncludeObject::kNone:
        evbuffer_add(out, "null", 4);
        break;
      case IncludeObject::kMetadata:
        AppendObject(metadata_form, obj, /*type_meta=*/true, 0, out);
        break;
      case IncludeObject::kObject:
        AppendObject(form, obj, /*type_meta=*/true, 0, out);
        break;
    }
    evbuffer_add(out, "}", 1);
  }
  evbuffer_add(out, "]}", 2);
}

}  // namespace kubeapi
}  // namespace server
