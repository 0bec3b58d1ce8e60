// --ports_file: the ports the sidecar listens on, for whoever started it
// with port 0 (tests, supervisors) to read back.
#ifndef SERVER_APP_PORTS_FILE_H_
#define SERVER_APP_PORTS_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace server {

// Writes "grpc=PORT\nhttp=PORT\n" (and "kube_api=PORT\n" when the facade
// serves: kube_api_port > 0) to `path` atomically (a temporary file
// renamed), so a reader never sees half of it; a later call replaces it.
// Unavailable, naming the file, when it cannot be written or renamed.
// Thread-compatible: one writer per path.
absl::Status WritePortsFile(const std::string& path, int grpc_port,
                            int http_port, int kube_api_port = 0);

}  // namespace server

#endif  // SERVER_APP_PORTS_FILE_H_
