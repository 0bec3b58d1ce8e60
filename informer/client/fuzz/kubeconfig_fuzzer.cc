// libFuzzer target: the kubeconfig loader must turn any input into either a
// config or an error (yaml-cpp exceptions caught, no crash, leak or hang).

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "informer/client/kubeconfig.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view yaml(reinterpret_cast<const char*>(data), size);
  auto config = informer::client::ParseKubeconfig(yaml, "/fuzz/kubeconfig");
  if (!config.ok()) return 0;
  informer::client::Kubeconfig merged = *config;
  informer::client::MergeKubeconfig(*config, &merged);
  auto rest = informer::client::RestConfigFromKubeconfig(merged);
  (void)rest;
  return 0;
}
