#ifndef SERVER_KUBEAPI_TABLE_WRITER_H_
#define SERVER_KUBEAPI_TABLE_WRITER_H_

// Server-side tables (meta.k8s.io/v1 Table), what `kubectl get` asks for
// with "Accept: application/json;as=Table;v=v1;g=meta.k8s.io": column
// definitions and one row of printed cells per object, in the API server's
// JSON layout (Table, TableColumnDefinition, TableRow field order).
//
// Columns: for Pods the API server's own printer columns (Name, Ready,
// Status, Restarts, Age; with priority 1, shown by `-o wide`: IP, Node,
// Nominated Node, Readiness Gates), computed as its pod printer does; for
// every other kind Name and Age (the API server has a printer per built-in
// kind with more columns; kubectl shows whatever columns it gets). A cache
// that holds metadata only gets Name and Age for Pods too.
//
// Pure functions; thread-safe.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "informer/object/object.h"
#include "server/kubeapi/list_options.h"
#include "server/kubeapi/object_writer.h"

struct evbuffer;

namespace server {
namespace kubeapi {

// apimachinery's duration.HumanDuration: "45s", "3m20s", "5h10m", "3d4h".
std::string HumanDuration(absl::Duration d);

// Appends the Table of `objects` to `out`. `list_meta` is the ListMeta
// object ({"resourceVersion":..}); `now` ages the objects.
void AppendTable(const ObjectForm& form,
                 const std::vector<informer::ObjectPtr>& objects,
                 absl::string_view list_meta, IncludeObject include,
                 absl::Time now, evbuffer* out);

}  // namespace kubeapi
}  // namespace server

#endif  // SERVER_KUBEAPI_TABLE_WRITER_H_
