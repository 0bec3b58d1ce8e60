#include "emulator/continue_token.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace emulator {

std::string EncodeContinueToken(int64_t rv, absl::string_view start_key) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("v");
  w.String("meta.k8s.io/v1");
  w.Key("rv");
  w.Int64(rv);
  w.Key("start");
  w.String(start_key.data(),
           static_cast<rapidjson::SizeType>(start_key.size()));
  w.EndObject();
  return absl::WebSafeBase64Escape(
      absl::string_view(buf.GetString(), buf.GetSize()));
}

namespace {

// Go's quoteChar in encoding/json's syntax errors.
std::string QuoteChar(unsigned char c) {
  if (c == '\'') return "'\\''";
  if (c == '"') return "'\"'";
  if (c >= 0x20 && c < 0x7f) return absl::StrCat("'", std::string(1, c), "'");
  return absl::StrFormat("'\\u%04x'", c);
}

absl::Status Invalid(absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid continue token: continue key is not valid", why));
}

}  // namespace

absl::StatusOr<std::pair<int64_t, std::string>> DecodeContinueToken(
    absl::string_view token) {
  std::string json;
  if (!absl::WebSafeBase64Unescape(token, &json)) {
    return Invalid(": illegal base64 data");
  }
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    size_t first = json.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && json[first] != '{' &&
        json[first] != '[' && json[first] != '"') {
      return Invalid(absl::StrCat(": invalid character ",
                                  QuoteChar(json[first]),
                                  " looking for beginning of value"));
    }
    return Invalid("");
  }
  if (!doc.HasMember("v") || !doc["v"].IsString() ||
      absl::string_view(doc["v"].GetString()) != "meta.k8s.io/v1") {
    return Invalid(": server does not recognize this encoded version");
  }
  if (!doc.HasMember("rv") || !doc["rv"].IsInt64() ||
      doc["rv"].GetInt64() == 0) {
    return Invalid(
        ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  }
  if (!doc.HasMember("start") || !doc["start"].IsString() ||
      doc["start"].GetStringLength() == 0) {
    return Invalid(": encoded start key empty (version meta.k8s.io/v1)");
  }
  // v1.37's keys start with "/", v1.24's do not: both name the same key.
  absl::string_view start(doc["start"].GetString(),
                          doc["start"].GetStringLength());
  absl::ConsumePrefix(&start, "/");
  if (absl::StrContains(start, "..") || absl::StrContains(start, "//")) {
    return Invalid(absl::StrCat(": ", doc["start"].GetString()));
  }
  return std::make_pair(doc["rv"].GetInt64(), std::string(start));
}

}  // namespace emulator
