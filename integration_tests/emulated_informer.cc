#include "integration_tests/emulated_informer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "emulator/seed.h"
#include "glog/logging.h"

namespace integration {

EmulatedInformer::EmulatedInformer(emulator::EmulatorWithFaults* emu,
                                   informer::Clock* clock, Options options)
    : emu_(emu), resource_(&emu->Resource(options.resource)) {
  options.rest.server = emu->url();
  options.rest.ca_data = emu->ca_cert_pem();
  absl::StatusOr<std::unique_ptr<informer::client::KubeClient>> kube =
      informer::client::KubeClient::Create(options.rest, clock);
  CHECK(kube.ok()) << kube.status();
  kube_ = *std::move(kube);
  absl::StatusOr<std::unique_ptr<informer::client::ResourceClient>> client =
      kube_->ForResource(options.resource, "", options.client);
  CHECK(client.ok()) << client.status();
  client_ = *std::move(client);
  recorder_ = std::make_unique<RecordingListerWatcher>(client_.get());
  informer::SharedIndexInformer::Options io;
  io.name = absl::StrCat("it-", options.resource);
  io.reflector = std::move(options.reflector);
  if (io.reflector.random_seed == 0) io.reflector.random_seed = 42;
  informer_ = std::make_unique<informer::SharedIndexInformer>(recorder_.get(),
                                                              io, clock);
  CHECK(informer_->AddEventHandler(&handler_).ok());
  CHECK(informer_
            ->SetWatchErrorHandler(
                [this](const absl::Status& s) { errors_.Add(s); })
            .ok());
}

EmulatedInformer::~EmulatedInformer() { informer_->Stop(); }

bool EmulatedInformer::AwaitConverged() {
  return handler_.AwaitView(ToKeyRvMap(emu_->store().Snapshot(*resource_)));
}

bool PollUntil(const std::function<bool()>& condition,
               absl::Duration safety_net) {
  const absl::Time deadline = absl::Now() + safety_net;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

void CreatePod(emulator::EmulatorWithFaults* emu, const std::string& ns,
               const std::string& name) {
  emulator::PodParams p;
  p.ns = ns;
  p.name = name;
  p.node = "node-1";
  p.app = 1;
  p.pod_ip = "10.0.0.7";
  absl::StatusOr<emulator::StoredObjectPtr> created =
      emu->store().Create(emu->Resource("pods"), ns, emulator::PodJson(p));
  CHECK(created.ok()) << name << ": " << created.status();
}

}  // namespace integration
