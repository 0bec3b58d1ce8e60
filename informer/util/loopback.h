#ifndef INFORMER_UTIL_LOOPBACK_H_
#define INFORMER_UTIL_LOOPBACK_H_

#include "absl/strings/string_view.h"

namespace informer {

// The one rule for "is this host on this machine only", used wherever the
// sidecar relaxes a security warning or default for loopback:
//   - an IPv4 literal in 127.0.0.0/8, in dotted-quad form ("127.0.0.1",
//     "127.1.2.3"; not "127.1" nor leading zeros);
//   - the IPv6 loopback literal "::1" (any spelling of that address), with
//     or without brackets ("[::1]");
//   - the name "localhost" (any case).
// Nothing else: a name is never resolved, so "127.evil.example" or
// "localhost.example" are not loopback. `host` is a host alone, without a
// port (see ParseHostPort / ParseUrl). Pure function; thread-safe.
bool IsLoopbackHost(absl::string_view host);

}  // namespace informer

#endif  // INFORMER_UTIL_LOOPBACK_H_
