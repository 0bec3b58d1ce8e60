#include "emulator/emulator_http.h"

#include "absl/base/const_init.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "emulator/gzip_encoder.h"

namespace emulator {
namespace {

std::string NewAuditId() {
  static absl::Mutex mu(absl::kConstInit);
  static absl::BitGen* gen = new absl::BitGen();
  absl::MutexLock lock(&mu);
  return absl::StrFormat("%08x-%04x-4%03x-%04x-%012x",
                         absl::Uniform<uint32_t>(*gen),
                         absl::Uniform<uint32_t>(*gen) & 0xffff,
                         absl::Uniform<uint32_t>(*gen) & 0xfff,
                         (absl::Uniform<uint32_t>(*gen) & 0x3fff) | 0x8000,
                         absl::Uniform<uint64_t>(*gen) & 0xffffffffffffULL);
}

}  // namespace

void CommonHeaders(httplib::Response& res) {
  res.set_header("Audit-Id", NewAuditId());
  res.set_header("Cache-Control", "no-cache, private");
}

void ReplyJson(httplib::Response& res, int code, const std::string& body) {
  CommonHeaders(res);
  res.status = code;
  res.set_content(body, "application/json");
}

void ReplyStatus(httplib::Response& res, const ApiStatus& status) {
  // As the API server's ErrorNegotiated: any status whose details carry
  // retryAfterSeconds also gets the header (429, 503, 504 too-large RV).
  if (status.retry_after_seconds > 0) {
    res.set_header("Retry-After", absl::StrCat(status.retry_after_seconds));
  }
  ReplyJson(res, status.code, StatusJson(status));
}

void SetGzipHeaders(httplib::Response& res) {
  res.set_header("Content-Encoding", "gzip");
  res.set_header("Vary", "Accept-Encoding");
}

void GzipBufferedBody(httplib::Response& res) {
  if (res.content_provider_ || res.body.size() <= kGzipThresholdBytes) return;
  res.body = GzipAll(res.body);
  SetGzipHeaders(res);
}

bool MetadataOnly(const httplib::Request& req) {
  return absl::StrContains(req.get_header_value("Accept"),
                           "as=PartialObjectMetadata");
}

bool BoolParam(const httplib::Request& req, const char* key) {
  std::string v = req.get_param_value(key);
  return v == "1" || v == "true";
}

// The name part of a store error's key ("ns/name" or "name").
std::string NameFromKey(absl::string_view key) {
  size_t slash = key.rfind('/');
  return std::string(slash == absl::string_view::npos ? key
                                                      : key.substr(slash + 1));
}

void ReplyErrorEvent(httplib::Response& res, const ApiStatus& status) {
  CommonHeaders(res);
  std::string line = absl::StrCat(
      "{\"type\":\"ERROR\",\"object\":", StatusJson(status), "}\n");
  res.set_chunked_content_provider("application/json",
                                   [line](size_t, httplib::DataSink& sink) {
                                     if (!sink.write(line.data(), line.size()))
                                       return false;
                                     sink.done();
                                     return true;
                                   });
}

// The labelSelector and fieldSelector query parameters shared by list and
// watch; the error's message is what the API server's 400 says.
absl::Status ParseSelectors(const ResourceInfo& r, const httplib::Request& req,
                            LabelSelector* labels, FieldSelector* fields) {
  absl::StatusOr<LabelSelector> l =
      LabelSelector::Parse(req.get_param_value("labelSelector"));
  if (!l.ok()) return l.status();
  absl::StatusOr<FieldSelector> f = FieldSelector::Parse(
      req.get_param_value("fieldSelector"), r.selectable_fields);
  if (!f.ok()) return f.status();
  *labels = *std::move(l);
  *fields = *std::move(f);
  return absl::OkStatus();
}

}  // namespace emulator
