// Emulator::HandleControl: the /_emulator/ endpoints of the serving core
// (stream faults, restart, compaction, inspection). Others are offered to
// the hooks (fault injection, load generation).

#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "emulator/api_status.h"
#include "emulator/emulator.h"
#include "emulator/emulator_http.h"
#include "httplib.h"

namespace emulator {
namespace {

int IntParam(const httplib::Request& req, const char* key, int def) {
  int v = def;
  std::string s = req.get_param_value(key);
  if (!s.empty() && !absl::SimpleAtoi(s, &v)) v = def;
  return v;
}

}  // namespace

bool Emulator::HandleStreamControl(absl::string_view op,
                                   const ResourceInfo* resource) {
  if (op == "cut_watches") {
    CutWatches(resource);
  } else if (op == "stall_watches") {
    StallWatches(resource);
  } else if (op == "stall_lists") {
    StallLists(resource);
  } else if (op == "resume_lists") {
    ResumeLists();
  } else if (op == "resume_watches" || op == "clear_faults") {
    // clear_faults also ends stalls; the hooks disarm the rest.
    ResumeWatches(resource);
    if (op == "clear_faults") ResumeLists();
  } else if (op == "malformed_event") {
    InjectMalformedEvent(resource);
  } else if (op == "restart") {
    Restart();
  } else if (op == "compact") {
    store_->Compact();
  } else {
    return false;
  }
  return true;
}

void Emulator::HandleInspection(absl::string_view op,
                                const ResourceInfo* resource,
                                const httplib::Request& req,
                                httplib::Response& res) {
  if (op == "large_object") {
    std::string ns = req.get_param_value("namespace");
    std::string name = req.get_param_value("name");
    absl::StatusOr<StoredObjectPtr> obj = CreateLargeObject(
        ns.empty() ? "default" : ns, name.empty() ? "large" : name,
        static_cast<size_t>(IntParam(req, "bytes", (1 << 20) + 4096)));
    if (!obj.ok()) {
      return ReplyStatus(
          res, FromStoreError(obj.status(), Resource("configmaps"), name));
    }
    return ReplyJson(res, 201, ObjectJson(Resource("configmaps"), **obj, true));
  }
  if (op == "watchers") {
    int min = IntParam(req, "min", 0);
    int timeout_ms = IntParam(req, "timeout_ms", 0);
    if (min > 0) {
      store_->AwaitWatchers(resource, min, absl::Milliseconds(timeout_ms));
    }
    return ReplyJson(
        res, 200,
        absl::StrCat("{\"watchers\":", store_->NumWatchers(resource), "}"));
  }
  if (op == "state") {
    if (resource == nullptr) {
      return ReplyStatus(res, BadRequestStatus("state needs ?resource="));
    }
    std::string out = absl::StrCat("{\"resourceVersion\":\"",
                                   store_->CurrentRv(), "\",\"objects\":[");
    bool first = true;
    for (const auto& [key, rv] : store_->Snapshot(*resource)) {
      absl::StrAppend(&out, first ? "" : ",", "{\"key\":\"", key,
                      "\",\"resourceVersion\":\"", rv, "\"}");
      first = false;
    }
    out += "]}";
    return ReplyJson(res, 200, out);
  }
  if (op == "requests") {
    const RequestCounts counts = request_counts();
    return ReplyJson(
        res, 200,
        absl::StrCat("{\"list\":", counts.list, ",\"watch\":", counts.watch,
                     ",\"other\":", counts.other, "}"));
  }
  if (op == "ca.crt") {
    res.set_content(ca_cert_pem_, "application/x-pem-file");
    return;
  }
  ReplyStatus(res, ResourceNotFoundStatus());
}

void Emulator::HandleControl(const httplib::Request& req,
                             httplib::Response& res) {
  const std::string op = req.path.substr(strlen("/_emulator/"));
  const ResourceInfo* resource = nullptr;
  std::string rname = req.get_param_value("resource");
  if (!rname.empty() && rname != "*") {
    resource = registry_->FindByName(rname);
    if (resource == nullptr) {
      return ReplyStatus(
          res, BadRequestStatus(absl::StrCat("unknown resource ", rname)));
    }
  }
  const bool core_op = HandleStreamControl(op, resource);
  EmulatorHooks::ControlRequest request;
  request.op = op;
  request.resource = resource;
  request.param = [&req](const std::string& key) {
    return req.get_param_value(key.c_str());
  };
  for (EmulatorHooks* hooks : hooks_) {
    absl::optional<EmulatorHooks::ControlReply> reply =
        hooks->HandleControl(request);
    if (reply.has_value()) return ReplyJson(res, reply->code, reply->body);
  }
  if (core_op) return ReplyJson(res, 200, "{\"ok\":true}");
  HandleInspection(op, resource, req, res);
}

}  // namespace emulator
