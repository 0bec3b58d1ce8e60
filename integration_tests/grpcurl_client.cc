#include "integration_tests/grpcurl_client.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace integration {
namespace {

namespace pb = ::google::protobuf;
namespace refl = ::grpc::reflection::v1alpha;

absl::Status FromGrpc(const grpc::Status& status, absl::string_view what) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

void* Tag(intptr_t i) { return reinterpret_cast<void*>(i); }

// Shell words: single and double quotes, no escapes inside single quotes.
std::vector<std::string> ShellWords(absl::string_view s) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\'' || c == '"') {
      size_t end = s.find(c, i + 1);
      if (end == absl::string_view::npos) end = s.size();
      absl::StrAppend(&word, s.substr(i + 1, end - i - 1));
      i = end;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

}  // namespace

GrpcurlClient::GrpcurlClient(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      stub_(refl::ServerReflection::NewStub(channel_)) {}

absl::StatusOr<refl::ServerReflectionResponse> GrpcurlClient::Ask(
    const refl::ServerReflectionRequest& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub_->ServerReflectionInfo(&ctx);
  refl::ServerReflectionResponse response;
  const bool sent = stream->Write(request) && stream->WritesDone();
  const bool got = sent && stream->Read(&response);
  refl::ServerReflectionResponse extra;
  while (got && stream->Read(&extra)) {
  }
  const grpc::Status status = stream->Finish();
  if (!status.ok()) return FromGrpc(status, "reflection");
  if (!got) return absl::UnavailableError("reflection: no response");
  if (response.has_error_response()) {
    return absl::Status(
        static_cast<absl::StatusCode>(response.error_response().error_code()),
        absl::StrCat("reflection: ",
                     response.error_response().error_message()));
  }
  return response;
}

absl::StatusOr<std::vector<std::string>> GrpcurlClient::ListServices() {
  refl::ServerReflectionRequest request;
  request.set_list_services("*");
  absl::StatusOr<refl::ServerReflectionResponse> response = Ask(request);
  if (!response.ok()) return response.status();
  std::vector<std::string> names;
  for (const refl::ServiceResponse& s :
       response->list_services_response().service()) {
    names.push_back(s.name());
  }
  return names;
}

absl::Status GrpcurlClient::AddFiles(
    const refl::ServerReflectionResponse& response) {
  std::vector<std::string> imports;
  for (const std::string& bytes :
       response.file_descriptor_response().file_descriptor_proto()) {
    pb::FileDescriptorProto file;
    if (!file.ParseFromString(bytes)) {
      return absl::DataLossError("reflection sent an unparsable file");
    }
    pb::FileDescriptorProto known;
    if (!database_.FindFileByName(file.name(), &known) &&
        !database_.Add(file)) {
      return absl::InternalError(
          absl::StrCat("reflection sent a conflicting file ", file.name()));
    }
    for (const std::string& dep : file.dependency()) imports.push_back(dep);
  }
  for (const std::string& name : imports) {
    pb::FileDescriptorProto known;
    if (database_.FindFileByName(name, &known)) continue;
    if (absl::Status st = FetchFile(name); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status GrpcurlClient::FetchFile(const std::string& name) {
  refl::ServerReflectionRequest request;
  request.set_file_by_filename(name);
  absl::StatusOr<refl::ServerReflectionResponse> response = Ask(request);
  if (!response.ok()) return response.status();
  return AddFiles(*response);
}

absl::Status GrpcurlClient::Resolve(absl::string_view symbol) {
  refl::ServerReflectionRequest request;
  request.set_file_containing_symbol(std::string(symbol));
  absl::StatusOr<refl::ServerReflectionResponse> response = Ask(request);
  if (!response.ok()) {
    return absl::NotFoundError(absl::StrCat("Symbol not found: ", symbol, " (",
                                            response.status().message(), ")"));
  }
  if (absl::Status st = AddFiles(*response); !st.ok()) return st;
  const std::string name(symbol);
  if (pool_.FindServiceByName(name) == nullptr &&
      pool_.FindMessageTypeByName(name) == nullptr &&
      pool_.FindEnumTypeByName(name) == nullptr &&
      pool_.FindMethodByName(name) == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "reflection's files do not build a descriptor for ", symbol));
  }
  return absl::OkStatus();
}

absl::Status GrpcurlClient::ResolveMessage(const pb::Descriptor* type,
                                           std::set<std::string>* seen) {
  if (!seen->insert(type->full_name()).second) return absl::OkStatus();
  // Each type on its own, as grpcurl does when it describes or builds one.
  if (absl::Status st = Resolve(type->full_name()); !st.ok()) return st;
  for (int i = 0; i < type->field_count(); ++i) {
    const pb::Descriptor* field_type = type->field(i)->message_type();
    if (field_type == nullptr) continue;
    if (absl::Status st = ResolveMessage(field_type, seen); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const pb::ServiceDescriptor*> GrpcurlClient::ResolveService(
    absl::string_view service) {
  if (absl::Status st = Resolve(service); !st.ok()) return st;
  const pb::ServiceDescriptor* sd =
      pool_.FindServiceByName(std::string(service));
  if (sd == nullptr) {
    return absl::NotFoundError(absl::StrCat(service, " is not a service"));
  }
  std::set<std::string> seen;
  for (int i = 0; i < sd->method_count(); ++i) {
    for (const pb::Descriptor* type :
         {sd->method(i)->input_type(), sd->method(i)->output_type()}) {
      if (absl::Status st = ResolveMessage(type, &seen); !st.ok()) {
        return absl::NotFoundError(
            absl::StrCat(sd->method(i)->full_name(), ": ", st.message()));
      }
    }
  }
  return sd;
}

absl::StatusOr<const pb::MethodDescriptor*> GrpcurlClient::ResolveMethod(
    absl::string_view full_method) {
  const std::vector<std::string> parts =
      absl::StrSplit(full_method, absl::MaxSplits('/', 1));
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not pkg.Service/Method: ", full_method));
  }
  absl::StatusOr<const pb::ServiceDescriptor*> sd = ResolveService(parts[0]);
  if (!sd.ok()) {
    return absl::NotFoundError(
        absl::StrCat("target server does not expose service \"", parts[0],
                     "\": ", sd.status().message()));
  }
  const pb::MethodDescriptor* md = (*sd)->FindMethodByName(parts[1]);
  if (md == nullptr) {
    return absl::NotFoundError(absl::StrCat("service \"", parts[0],
                                            "\" does not include a method "
                                            "named \"",
                                            parts[1], "\""));
  }
  return md;
}

absl::StatusOr<std::vector<std::string>> GrpcurlClient::Call(
    absl::string_view full_method, absl::string_view json, int max_messages,
    absl::Duration stream_deadline) {
  absl::StatusOr<const pb::MethodDescriptor*> md = ResolveMethod(full_method);
  if (!md.ok()) return md.status();
  std::unique_ptr<pb::Message> request(
      factory_.GetPrototype((*md)->input_type())->New());
  if (!json.empty()) {
    auto st = pb::util::JsonStringToMessage(std::string(json), request.get());
    if (!st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("-d does not parse as ",
                       (*md)->input_type()->full_name(), ": ", st.ToString()));
    }
  }
  const bool streaming = (*md)->server_streaming();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   absl::ToChronoMilliseconds(streaming ? stream_deadline
                                                        : absl::Seconds(30)));
  grpc::GenericStub stub(channel_);
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(
      &ctx,
      absl::StrCat("/", (*md)->service()->full_name(), "/", (*md)->name()),
      &cq);
  void* tag;
  bool ok = false;
  std::string bytes = request->SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer buffer(&slice, 1);
  call->StartCall(Tag(1));
  bool alive = cq.Next(&tag, &ok) && ok;
  if (alive) {
    call->Write(buffer, Tag(2));
    alive = cq.Next(&tag, &ok) && ok;
  }
  if (alive) {
    call->WritesDone(Tag(3));
    alive = cq.Next(&tag, &ok) && ok;
  }
  std::vector<std::string> responses;
  absl::Status decode_error;
  while (alive &&
         (!streaming || static_cast<int>(responses.size()) < max_messages)) {
    grpc::ByteBuffer received;
    call->Read(&received, Tag(4));
    if (!cq.Next(&tag, &ok) || !ok) break;
    grpc::Slice whole;
    std::unique_ptr<pb::Message> response(
        factory_.GetPrototype((*md)->output_type())->New());
    std::string out;
    if (!received.DumpToSingleSlice(&whole).ok() ||
        !response->ParseFromArray(whole.begin(),
                                  static_cast<int>(whole.size())) ||
        !pb::util::MessageToJsonString(*response, &out).ok()) {
      decode_error = absl::DataLossError(absl::StrCat(
          "response does not decode as ", (*md)->output_type()->full_name()));
      break;
    }
    responses.push_back(std::move(out));
  }
  const bool cancelled_by_us =
      streaming && static_cast<int>(responses.size()) >= max_messages;
  if (cancelled_by_us || !decode_error.ok()) ctx.TryCancel();
  grpc::Status status;
  call->Finish(&status, Tag(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!decode_error.ok()) return decode_error;
  if (cancelled_by_us) return responses;
  // A live stream still open at its deadline was accepted.
  if (streaming && status.error_code() == grpc::DEADLINE_EXCEEDED) {
    return responses;
  }
  if (!status.ok()) return FromGrpc(status, full_method);
  return responses;
}

std::vector<std::string> GrpcurlCommandsOf(absl::string_view markdown) {
  std::vector<std::string> out;
  std::string current;
  bool fenced = false;
  for (absl::string_view line : absl::StrSplit(markdown, '\n')) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(l, "```")) {
      fenced = !fenced;
      current.clear();
      continue;
    }
    if (current.empty()) {
      // Commands are in code blocks; prose may mention grpcurl too.
      const bool code = fenced || absl::StartsWith(line, "    ");
      absl::ConsumePrefix(&l, "$ ");
      if (!code || !absl::StartsWith(l, "grpcurl ")) continue;
    }
    absl::StrAppend(&current, current.empty() ? "" : " ", l);
    if (absl::EndsWith(current, "\\")) {
      current.pop_back();
      continue;
    }
    // A quoted -d argument may span lines (the newline is in the string).
    if (std::count(current.begin(), current.end(), '\'') % 2 == 1) continue;
    out.push_back(current);
    current.clear();
  }
  return out;
}

GrpcurlInvocation ParseGrpcurl(absl::string_view command) {
  GrpcurlInvocation inv;
  std::vector<std::string> words = ShellWords(command);
  bool address_seen = false;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "|" || w == ";" || w == "#") break;
    if (w == "-d" && i + 1 < words.size()) {
      inv.data = words[++i];
      inv.stdin_data = inv.data == "@";
    } else if ((w == "-H" || w == "-import-path" || w == "-proto" ||
                w == "-cacert" || w == "-cert" || w == "-key" ||
                w == "-authority" || w == "-servername") &&
               i + 1 < words.size()) {
      ++i;
    } else if (absl::StartsWith(w, "-")) {
      continue;
    } else if (!address_seen) {
      address_seen = true;
    } else if (inv.verb.empty() && inv.target.empty() &&
               (w == "list" || w == "describe")) {
      inv.verb = w;
    } else if (inv.target.empty()) {
      inv.target = w;
    }
  }
  return inv;
}

}  // namespace integration
