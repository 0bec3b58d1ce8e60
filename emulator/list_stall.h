#ifndef EMULATOR_LIST_STALL_H_
#define EMULATOR_LIST_STALL_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/optional.h"
#include "emulator/resource_registry.h"

namespace emulator {

// ListStalls is the "server stops mid-response" fault for lists: while a
// resource is stalled, each list of it sends the first half of its body
// and then nothing, holding the connection open (as an API server or a
// proxy that hangs mid-response), until Resume() or Shutdown(); the
// connection is then dropped.
//
// Thread-safety: all methods are thread-safe. AwaitResume blocks the
// calling connection thread; Shutdown releases every such wait for good.
class ListStalls {
 public:
  // Lists of `resource` (null: every resource) stall from now on.
  void Stall(const ResourceInfo* resource);
  // Ends every stall; lists started later are served normally.
  void Resume();
  // Resume, and no list stalls any more (the emulator is stopping).
  void Shutdown();

  // The stall a list of `resource` starting now is part of, if any: the
  // token AwaitResume takes.
  absl::optional<int64_t> Check(const ResourceInfo& resource) const;
  // Blocks until the stall `token` ended (Resume or Shutdown).
  void AwaitResume(int64_t token);

 private:
  struct Wait {
    const ListStalls* self;
    int64_t token;
  };
  // absl::Condition's callback for AwaitResume; runs with mu_ held.
  static bool Resumed(Wait* wait);

  mutable absl::Mutex mu_;
  bool all_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<const ResourceInfo*> resources_ ABSL_GUARDED_BY(mu_);
  // Bumped by every Resume, so that a wait knows its stall ended.
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace emulator

#endif  // EMULATOR_LIST_STALL_H_
