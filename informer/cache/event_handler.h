#ifndef INFORMER_CACHE_EVENT_HANDLER_H_
#define INFORMER_CACHE_EVENT_HANDLER_H_

#include <functional>
#include <utility>

#include "informer/object/object.h"

namespace informer {

// Receives an informer's notifications (client-go's ResourceEventHandler).
//
// Calls for one object arrive in the order the informer applied them.
// OnUpdate is also how periodic resyncs arrive (old == new then).
// OnDelete's `final_state_unknown` is client-go's DeletedFinalStateUnknown:
// the delete was inferred by a relist and `obj` is the last state the cache
// knew, not the state at deletion.
class ResourceEventHandler {
 public:
  virtual ~ResourceEventHandler() = default;
  virtual void OnAdd(const ObjectPtr& obj, bool is_in_initial_list) = 0;
  virtual void OnUpdate(const ObjectPtr& old_obj, const ObjectPtr& new_obj) = 0;
  virtual void OnDelete(const ObjectPtr& obj, bool final_state_unknown) = 0;
};

// A handler made of optional functions; missing ones ignore the event.
struct ResourceEventHandlerFuncs final : ResourceEventHandler {
  std::function<void(const ObjectPtr&, bool)> add;
  std::function<void(const ObjectPtr&, const ObjectPtr&)> update;
  std::function<void(const ObjectPtr&, bool)> del;

  void OnAdd(const ObjectPtr& obj, bool initial) override {
    if (add) add(obj, initial);
  }
  void OnUpdate(const ObjectPtr& o, const ObjectPtr& n) override {
    if (update) update(o, n);
  }
  void OnDelete(const ObjectPtr& obj, bool unknown) override {
    if (del) del(obj, unknown);
  }
};

}  // namespace informer

#endif  // INFORMER_CACHE_EVENT_HANDLER_H_
