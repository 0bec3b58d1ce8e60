#ifndef EMULATOR_EMULATOR_HTTP_H_
#define EMULATOR_EMULATOR_HTTP_H_

// HTTP reply helpers shared by the emulator's handlers (internal to the
// :emulator library): the API server's common headers, JSON and Status
// replies, and the query parameters every handler reads.

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "emulator/api_status.h"
#include "emulator/resource_registry.h"
#include "emulator/selector.h"
#include "httplib.h"

namespace emulator {

// The bucket of a response's Pacer (a list body, a WatchList's initial
// events): a sleep that overshoots (a busy machine wakes the thread late) is
// made up by the next chunks, up to this many bytes, so the average rate
// holds.
constexpr size_t kPaceBurstBytes = 1 << 20;

// Audit-Id and Cache-Control, as the API server sends them.
void CommonHeaders(httplib::Response& res);
void ReplyJson(httplib::Response& res, int code, const std::string& body);
// A metav1.Status body with its code (and Retry-After for a 429).
void ReplyStatus(httplib::Response& res, const ApiStatus& status);
// How the API server fails a watch it accepted: HTTP 200, then a single
// ERROR event carrying `status`, then the end of the stream.
void ReplyErrorEvent(httplib::Response& res, const ApiStatus& status);
// Content-Encoding: gzip and Vary: Accept-Encoding, as the API server marks
// a body it compressed.
void SetGzipHeaders(httplib::Response& res);
// Gzips a body built in memory when it is larger than kGzipThresholdBytes,
// as the API server does for a client that asked; streamed bodies (content
// providers: watches, large lists) are left alone, they decide themselves.
void GzipBufferedBody(httplib::Response& res);
// Accept asks for PartialObjectMetadata(List).
bool MetadataOnly(const httplib::Request& req);
// ?key=1 or ?key=true.
bool BoolParam(const httplib::Request& req, const char* key);
// The name part of a store error's key ("ns/name" or "name").
std::string NameFromKey(absl::string_view key);

// The labelSelector and fieldSelector query parameters shared by list and
// watch; the error's message is what the API server's 400 says.
absl::Status ParseSelectors(const ResourceInfo& r, const httplib::Request& req,
                            LabelSelector* labels, FieldSelector* fields);

}  // namespace emulator

#endif  // EMULATOR_EMULATOR_HTTP_H_
