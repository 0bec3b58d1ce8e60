// Which pods run on node X? A C++ client of the informer sidecar that keeps a
// local mirror of every pod (client_sdk::RemoteInformer) with a
// spec.nodeName index, answers from it, then follows the changes on that
// node until --watch_seconds elapse.
//
// Against the demo sidecar:
//   bazel run //server:informer_sidecar -- --demo      (terminal 1)
//   bazel run //client_sdk/cpp/examples:pods_on_node --
//       --target=127.0.0.1:50051 --node=node-1         (terminal 2,
//                                                       one command line)

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client_sdk/cpp/remote_informer.h"
#include "informer/cache/event_handler.h"
#include "informer/cache/index.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051",
          "The sidecar's gRPC address (host:port or unix:/path).");
ABSL_FLAG(std::string, node, "node-1", "The node whose pods to list.");
ABSL_FLAG(std::string, namespace, "", "Only pods of this namespace.");
ABSL_FLAG(absl::Duration, sync_timeout, absl::Seconds(30),
          "How long to wait for the initial state.");
ABSL_FLAG(absl::Duration, watch_seconds, absl::ZeroDuration(),
          "After answering, print pods arriving on / leaving the node for "
          "this long (0: exit at once).");

namespace {

std::string PodLine(const informer::ObjectPtr& pod) {
  std::vector<std::string> phase = pod->FieldValues("status.phase");
  return absl::StrCat(pod->Key(), " (", phase.empty() ? "?" : phase[0], ")");
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string node = absl::GetFlag(FLAGS_node);
  if (node.empty()) {
    std::cerr << "--node: required\n";
    return 2;
  }
  const std::string index = informer::FieldIndexName("spec.nodeName");

  client_sdk::RemoteInformer::Options options;
  options.resource = "pods";
  options.namespace_ = absl::GetFlag(FLAGS_namespace);
  options.indexers[index] = informer::FieldIndexFunc("spec.nodeName");
  client_sdk::RemoteInformer pods(
      grpc::CreateChannel(absl::GetFlag(FLAGS_target),
                          grpc::InsecureChannelCredentials()),
      options);

  // Changes on the node, printed once the answer is out.
  informer::ResourceEventHandlerFuncs on_node;
  auto runs_here = [&node](const informer::ObjectPtr& p) {
    std::vector<std::string> n = p->FieldValues("spec.nodeName");
    return std::find(n.begin(), n.end(), node) != n.end();
  };
  absl::Notification answered;
  on_node.add = [&](const informer::ObjectPtr& p, bool) {
    if (answered.HasBeenNotified() && runs_here(p)) {
      std::cout << "+ " << PodLine(p) << std::endl;
    }
  };
  on_node.update = [&](const informer::ObjectPtr& o,
                       const informer::ObjectPtr& n) {
    if (!answered.HasBeenNotified()) return;
    if (!runs_here(o) && runs_here(n)) std::cout << "+ " << PodLine(n) << "\n";
    if (runs_here(o) && !runs_here(n)) std::cout << "- " << PodLine(o) << "\n";
  };
  on_node.del = [&](const informer::ObjectPtr& p, bool) {
    if (answered.HasBeenNotified() && runs_here(p)) {
      std::cout << "- " << PodLine(p) << std::endl;
    }
  };
  pods.AddEventHandler(&on_node);

  if (absl::Status st = pods.Start(); !st.ok()) {
    std::cerr << "pods_on_node: " << st << "\n";
    return 1;
  }
  if (!pods.WaitForSync(absl::GetFlag(FLAGS_sync_timeout))) {
    std::cerr << "pods_on_node: no initial state from "
              << absl::GetFlag(FLAGS_target)
              << " within --sync_timeout (last stream status: "
              << pods.last_stream_status() << ")\n";
    return 1;
  }
  absl::StatusOr<std::vector<informer::ObjectPtr>> here =
      pods.ByIndex(index, node);
  if (!here.ok()) {
    std::cerr << "pods_on_node: " << here.status() << "\n";
    return 1;
  }
  std::sort(here->begin(), here->end(),
            [](const informer::ObjectPtr& a, const informer::ObjectPtr& b) {
              return a->Key() < b->Key();
            });
  std::cout << here->size() << " pod(s) on node " << node << " (of "
            << pods.List().size() << " pods):\n";
  for (const informer::ObjectPtr& p : *here) {
    std::cout << "  " << PodLine(p) << "\n";
  }
  std::cout << std::flush;
  answered.Notify();

  const absl::Duration watch = absl::GetFlag(FLAGS_watch_seconds);
  if (watch > absl::ZeroDuration()) {
    absl::Notification never;
    never.WaitForNotificationWithTimeout(watch);
  }
  pods.Stop();
  return 0;
}
