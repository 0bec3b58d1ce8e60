#include "emulator/continue_token.h"

#include "absl/strings/escaping.h"
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

absl::StatusOr<std::pair<int64_t, std::string>> DecodeContinueToken(
    absl::string_view token) {
  std::string json;
  if (!absl::WebSafeBase64Unescape(token, &json)) {
    return absl::InvalidArgumentError(
        "continue key is not valid: illegal base64 data");
  }
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("rv") ||
      !doc["rv"].IsInt64() || !doc.HasMember("start") ||
      !doc["start"].IsString()) {
    return absl::InvalidArgumentError("continue key is not valid");
  }
  return std::make_pair(
      doc["rv"].GetInt64(),
      std::string(doc["start"].GetString(), doc["start"].GetStringLength()));
}

}  // namespace emulator
