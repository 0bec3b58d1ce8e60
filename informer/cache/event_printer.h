#ifndef INFORMER_CACHE_EVENT_PRINTER_H_
#define INFORMER_CACHE_EVENT_PRINTER_H_

#include <cstdio>
#include <string>

#include "absl/synchronization/mutex.h"
#include "informer/cache/event_handler.h"

namespace informer {

// EventPrinter is a ResourceEventHandler that writes one line per
// notification: type, `label`, namespace/name, resourceVersion(s) and
// whether the add came from the initial list or the delete was inferred by a
// relist. It prints identity only, never object contents (a cache may hold
// Secrets). Used by the demos so a newcomer sees events stream.
//
// Thread-safe: lines from several informers sharing one printer never
// interleave. `out` is not owned and must outlive the printer; each line is
// flushed.
class EventPrinter final : public ResourceEventHandler {
 public:
  explicit EventPrinter(FILE* out, std::string label = "")
      : out_(out), label_(std::move(label)) {}

  void OnAdd(const ObjectPtr& obj, bool is_in_initial_list) override;
  void OnUpdate(const ObjectPtr& old_obj, const ObjectPtr& new_obj) override;
  void OnDelete(const ObjectPtr& obj, bool final_state_unknown) override;

 private:
  void Print(const char* type, const ObjectPtr& obj, const std::string& rv,
             const char* note);

  FILE* const out_;
  const std::string label_;
  absl::Mutex mu_;
};

}  // namespace informer

#endif  // INFORMER_CACHE_EVENT_PRINTER_H_
