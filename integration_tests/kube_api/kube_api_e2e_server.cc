// A sidecar-shaped process for the Kubernetes API facade's end-to-end
// tests: an API server emulator (v1.24 wire format) as the upstream, the
// real API client and informer registry in between, and the facade wired
// exactly as the sidecar wires it (StartKubeApiFromFlags). Prints one JSON
// line {"facade": PORT, "emulator": "URL"} when serving; exits when stdin
// closes.
//
//   kube_api_e2e_server --kube_api_listen=127.0.0.1:0
//       --resources=configmaps,pods [--tokens_file=F] [--kube_api_history=N]

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "emulator/emulator.h"
#include "informer/client/kube_client.h"
#include "server/kubeapi/kube_api_flags.h"
#include "server/ops/metrics.h"
#include "server/registry/informer_registry.h"
#include "server/registry/resource_resolver.h"
#include "server/security/authz.h"

ABSL_FLAG(std::string, resources, "configmaps,pods",
          "Resources the informers cache (comma-separated).");
ABSL_FLAG(std::string, tokens_file, "", "Bearer tokens (server/security).");
ABSL_FLAG(bool, allow_secrets, false, "Serve Secrets.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  emulator::EmulatorOptions eo;
  eo.v1_24 = true;
  eo.bookmark_interval = absl::Seconds(1);
  emulator::Emulator upstream(eo);
  if (absl::Status st = upstream.Start(); !st.ok()) {
    std::cerr << "emulator: " << st << "\n";
    return 1;
  }
  informer::client::RestConfig rest;
  rest.server = upstream.url();
  auto kube = informer::client::KubeClient::Create(rest);
  if (!kube.ok()) {
    std::cerr << kube.status() << "\n";
    return 1;
  }
  informer::client::KubeClient* client = kube->get();
  std::vector<server::ResourceConfig> configs;
  for (absl::string_view r :
       absl::StrSplit(absl::GetFlag(FLAGS_resources), ',', absl::SkipEmpty())) {
    server::ResourceConfig c;
    c.resource = std::string(r);
    configs.push_back(c);
  }
  server::DiscoveryResolver resolver(client->discovery());
  server::InformerRegistry::Options ro;
  ro.resolver = &resolver;
  auto registry = server::InformerRegistry::Create(
      configs,
      [client](const server::ResourceConfig& c)
          -> absl::StatusOr<std::unique_ptr<informer::ListerWatcher>> {
        auto rc = client->ForResource(c.resource, c.namespace_);
        if (!rc.ok()) return rc.status();
        return std::unique_ptr<informer::ListerWatcher>(*std::move(rc));
      },
      ro);
  if (!registry.ok()) {
    std::cerr << registry.status() << "\n";
    return 1;
  }
  server::Authorizer::Options ao;
  ao.allow_secrets = absl::GetFlag(FLAGS_allow_secrets);
  ao.configured_resources = (*registry)->ResourceNames();
  std::unique_ptr<server::Authorizer> authorizer;
  if (absl::GetFlag(FLAGS_tokens_file).empty()) {
    authorizer = server::Authorizer::AllowAll(ao);
  } else {
    auto loaded = server::Authorizer::FromTokensFile(
        absl::GetFlag(FLAGS_tokens_file), ao);
    if (!loaded.ok()) {
      std::cerr << loaded.status() << "\n";
      return 1;
    }
    authorizer = *std::move(loaded);
  }
  server::metrics::Registry metrics;
  if (absl::Status st = (*registry)->Start(); !st.ok()) {
    std::cerr << st << "\n";
    return 1;
  }
  // The sidecar's wiring: these lines are what main.cc adds.
  auto facade = server::kubeapi::StartKubeApiFromFlags(
      registry->get(), client->discovery(), authorizer.get(), &metrics);
  if (!facade.ok()) {
    std::cerr << "informer_sidecar: " << facade.status().message() << "\n";
    return 1;
  }
  if (*facade == nullptr) {
    std::cerr << "--kube_api_listen is not set\n";
    return 1;
  }
  (*facade)->WaitForSync(absl::Seconds(30));
  std::cout << "{\"facade\": " << (*facade)->port() << ", \"emulator\": \""
            << upstream.url() << "\"}" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "metrics") std::cout << metrics.Render() << "END" << std::endl;
  }
  (*facade)->Shutdown();
  (*registry)->Stop();
  upstream.Stop();
  return 0;
}
