#include "informer/util/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace informer {

bool IsLoopbackHost(absl::string_view host) {
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return false;
  }
  const std::string literal(host);
  in_addr v4{};
  // inet_pton takes exactly four decimal octets, no leading zeros.
  if (inet_pton(AF_INET, literal.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  return inet_pton(AF_INET6, literal.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace informer
