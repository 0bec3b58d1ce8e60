// The README's grpcurl examples, run as printed against the real sidecar in
// demo mode. grpcurl itself is not packaged in Debian 12, so this test does
// what grpcurl does with each command line: resolve the method by name in
// the service descriptors, turn the -d JSON into the request message with
// protobuf's JSON mapping (as grpcurl does), call the method and check that
// it succeeds. A README example that names a wrong field, method or enum
// value, or that fails against the demo cluster, fails this test.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "integration_tests/sidecar_process.h"
#include "proto/informer/v1/events.grpc.pb.h"
#include "proto/informer/v1/informer.grpc.pb.h"
#include "proto/informer/v1/workqueue.grpc.pb.h"

namespace integration {
namespace {

namespace pb = ::google::protobuf;

// The README's shell commands that start with grpcurl, continuation lines
// joined.
std::vector<std::string> GrpcurlCommands(const std::string& readme) {
  std::vector<std::string> out;
  std::string current;
  for (absl::string_view line : absl::StrSplit(readme, '\n')) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    // Commands are in indented code blocks; prose may mention grpcurl too.
    if (current.empty() &&
        (!absl::StartsWith(line, "    ") || !absl::StartsWith(l, "grpcurl "))) {
      continue;
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

// Shell words: single and double quotes, no escapes inside single quotes.
std::vector<std::string> ShellWords(absl::string_view s) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\'' || c == '"') {
      const size_t end = s.find(c, i + 1);
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

struct Invocation {
  std::string data;  // -d
  bool stdin_data = false;
  std::string verb;  // "list", "describe" or empty
  std::string target;  // "pkg.Service/Method" or the described symbol
};

Invocation Parse(const std::string& command) {
  Invocation inv;
  std::vector<std::string> words = ShellWords(command);
  bool address_seen = false;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "|" || w == ";" || w == "#") break;
    if (w == "-d") {
      inv.data = words[++i];
      inv.stdin_data = inv.data == "@";
    } else if (w == "-H") {
      ++i;
    } else if (absl::StartsWith(w, "-")) {
      continue;
    } else if (!address_seen) {
      address_seen = true;
    } else if (w == "list" || w == "describe") {
      inv.verb = w;
    } else if (inv.target.empty()) {
      inv.target = w;
    }
  }
  return inv;
}

class ReadmeGrpcurlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::string> binary =
        FindRunfile("server/informer_sidecar");
    ASSERT_TRUE(binary.ok()) << binary.status();
    SidecarProcess::Options options;
    options.flags = {"--demo", "--print_events=false",
                     "--http_listen=127.0.0.1:0"};
    options.quiet = true;
    auto sidecar = SidecarProcess::Start(*binary, std::move(options));
    ASSERT_TRUE(sidecar.ok()) << sidecar.status();
    sidecar_ = sidecar->release();
  }
  static void TearDownTestSuite() {
    delete sidecar_;
    sidecar_ = nullptr;
  }

  static SidecarProcess* sidecar_;
};
SidecarProcess* ReadmeGrpcurlTest::sidecar_ = nullptr;

TEST_F(ReadmeGrpcurlTest, EveryExampleRunsAsPrinted) {
  // Reference every service so that the linker keeps their descriptors.
  const std::set<std::string> services = {
      informer::v1::Informer::service_full_name(),
      informer::v1::WorkQueue::service_full_name(),
      informer::v1::Events::service_full_name(),
  };
  absl::StatusOr<std::string> path = FindRunfile("README.md");
  ASSERT_TRUE(path.ok()) << path.status();
  std::ifstream f(*path);
  std::stringstream readme;
  readme << f.rdbuf();
  const std::vector<std::string> commands = GrpcurlCommands(readme.str());
  ASSERT_GE(commands.size(), 10u) << "README lost its grpcurl examples?";

  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  auto channel = sidecar_->NewChannel();
  grpc::GenericStub stub(channel);
  int called = 0;
  int streamed_stdin = 0;
  for (const std::string& command : commands) {
    SCOPED_TRACE(command);
    const Invocation inv = Parse(command);
    if (inv.verb == "list") continue;  // lists services: nothing to check
    if (inv.verb == "describe") {
      EXPECT_TRUE(services.count(inv.target) == 1 ||
                  pool->FindMessageTypeByName(inv.target) != nullptr)
          << inv.target;
      continue;
    }
    ASSERT_TRUE(absl::StrContains(inv.target, "/")) << inv.target;
    const std::string service = inv.target.substr(0, inv.target.find('/'));
    const std::string method_name =
        inv.target.substr(inv.target.find('/') + 1);
    std::string request_bytes;
    bool server_streaming = false;
    if (service == "grpc.health.v1.Health") {
      // Health's descriptors are not linked; its request here is empty
      // (service "") or names a service.
      ASSERT_EQ(method_name, "Check");
      ASSERT_TRUE(inv.data.empty() || absl::StrContains(inv.data, "\"\""))
          << inv.data;
    } else {
      const pb::ServiceDescriptor* sd = pool->FindServiceByName(service);
      ASSERT_NE(sd, nullptr) << "unknown service " << service;
      const pb::MethodDescriptor* md = sd->FindMethodByName(method_name);
      ASSERT_NE(md, nullptr) << "unknown method " << inv.target;
      if (inv.stdin_data) {
        // Streams fed from stdin (Lease, RecordStream) by a shell
        // pipeline: the method must take a stream.
        EXPECT_TRUE(md->client_streaming());
        ++streamed_stdin;
        continue;
      }
      pb::DynamicMessageFactory factory(pool);
      std::unique_ptr<pb::Message> request(
          factory.GetPrototype(md->input_type())->New());
      if (!inv.data.empty()) {
        pb::util::Status st =
            pb::util::JsonStringToMessage(inv.data, request.get());
        ASSERT_TRUE(st.ok()) << "-d does not parse as "
                             << md->input_type()->full_name() << ": " << st;
      }
      request->SerializeToString(&request_bytes);
      server_streaming = md->server_streaming();
      ASSERT_FALSE(md->client_streaming()) << "needs -d @";
    }
    grpc::ClientContext ctx;
    // A live stream may stay quiet (Events/Watch until something is
    // recorded): a stream still open at its deadline was accepted.
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(server_streaming ? 5 : 30));
    grpc::Slice slice(request_bytes);
    grpc::ByteBuffer request_buffer(&slice, 1);
    const std::string full = absl::StrCat("/", inv.target);
    if (server_streaming) {
      // Read the first message (a live stream never ends by itself).
      grpc::CompletionQueue cq;
      auto call = stub.PrepareCall(&ctx, full, &cq);
      void* tag;
      bool ok = false;
      call->StartCall(reinterpret_cast<void*>(1));
      ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
      call->Write(request_buffer, reinterpret_cast<void*>(2));
      ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
      call->WritesDone(reinterpret_cast<void*>(3));
      ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
      grpc::ByteBuffer response;
      call->Read(&response, reinterpret_cast<void*>(4));
      ASSERT_TRUE(cq.Next(&tag, &ok));
      const bool got_message = ok;
      if (got_message) ctx.TryCancel();
      grpc::Status status;
      call->Finish(&status, reinterpret_cast<void*>(5));
      cq.Next(&tag, &ok);
      if (got_message) {
        EXPECT_GT(response.Length(), 0u);
      } else {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
            << "stream ended: " << status.error_message();
      }
      cq.Shutdown();
      while (cq.Next(&tag, &ok)) {
      }
    } else {
      grpc::ByteBuffer response;
      grpc::Status status;
      absl::Notification done;
      stub.UnaryCall(&ctx, full, grpc::StubOptions(), &request_buffer,
                     &response, [&](grpc::Status s) {
                       status = std::move(s);
                       done.Notify();
                     });
      done.WaitForNotification();
      EXPECT_TRUE(status.ok()) << status.error_code() << " "
                               << status.error_message();
    }
    ++called;
  }
  EXPECT_GE(called, 10);
  EXPECT_GE(streamed_stdin, 1);
}

}  // namespace
}  // namespace integration
