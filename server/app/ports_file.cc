#include "server/app/ports_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace server {

absl::Status WritePortsFile(const std::string& path, int grpc_port,
                            int http_port, int kube_api_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "grpc=" << grpc_port << "\nhttp=" << http_port << "\n";
    if (kube_api_port > 0) out << "kube_api=" << kube_api_port << "\n";
    out.close();
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("--ports_file: cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("--ports_file: cannot rename ",
                                               tmp, " to ", path, ": ",
                                               std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace server
