#include "informer/cache/event_printer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace informer {

void EventPrinter::Print(const char* type, const ObjectPtr& obj,
                         const std::string& rv, const char* note) {
  const std::string line =
      label_.empty() ? absl::StrFormat("%-8s %-32s rv=%-12s%s\n", type,
                                       obj->Key(), rv, note)
                     : absl::StrFormat("%-8s %-16s %-32s rv=%-12s%s\n", type,
                                       label_, obj->Key(), rv, note);
  absl::MutexLock lock(&mu_);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

void EventPrinter::OnAdd(const ObjectPtr& obj, bool is_in_initial_list) {
  Print("ADDED", obj, std::string(obj->resource_version()),
        is_in_initial_list ? " (initial list)" : "");
}

void EventPrinter::OnUpdate(const ObjectPtr& old_obj,
                            const ObjectPtr& new_obj) {
  // Resyncs arrive as updates whose old and new are the same version.
  const bool sync = old_obj->resource_version() == new_obj->resource_version();
  Print(sync ? "SYNC" : "MODIFIED", new_obj,
        sync ? std::string(new_obj->resource_version())
             : absl::StrCat(old_obj->resource_version(), "->",
                            new_obj->resource_version()),
        "");
}

void EventPrinter::OnDelete(const ObjectPtr& obj, bool final_state_unknown) {
  Print("DELETED", obj, std::string(obj->resource_version()),
        final_state_unknown ? " (tombstone: inferred by a relist)" : "");
}

}  // namespace informer
