#ifndef SERVER_WORKQUEUE_SERVICE_WORKQUEUE_SPEC_H_
#define SERVER_WORKQUEUE_SERVICE_WORKQUEUE_SPEC_H_

// informer.v1.WorkQueue's declarations and limits: a CreateQueueRequest
// validated and normalized (QueueSpec), key and name rules, and the Duration
// conversions the service uses. Pure functions, no state.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "informer/labels/label_selector.h"
#include "proto/informer/v1/workqueue.pb.h"

namespace server {
namespace workqueue_internal {

inline constexpr size_t kMaxNameLength = 253;
inline constexpr size_t kMaxKeyLength = 1024;
inline constexpr int64_t kMaxStreamCredit = 10000;
inline constexpr size_t kMaxPendingRejections = 10000;
inline constexpr absl::Duration kDefaultBaseDelay = absl::Milliseconds(5);
inline constexpr absl::Duration kDefaultMaxDelay = absl::Seconds(1000);
inline constexpr double kDefaultQps = 10;
inline constexpr int kDefaultBurst = 100;
inline constexpr absl::Duration kDefaultLeaseTimeout = absl::Minutes(5);
inline constexpr absl::Duration kMinResyncPeriod = absl::Seconds(1);
inline constexpr absl::Duration kMaxDelay = absl::Hours(24);

// A validated declaration with every default filled in. `request` is the
// normalized form compared for idempotency.
struct QueueSpec {
  informer::v1::CreateQueueRequest request;
  informer::LabelSelector selector;
  uint32_t event_mask = 0;  // bit (1 << QueueEvent)
  absl::Duration resync_period = absl::ZeroDuration();
  absl::Duration base_delay;
  absl::Duration max_delay;
  double qps = 0;
  int burst = 0;
  absl::Duration lease_timeout;
};

// A proto Duration as absl, or InvalidArgument naming `field`.
absl::StatusOr<absl::Duration> FromProto(const google::protobuf::Duration& d,
                                         absl::string_view field);
void ToProto(absl::Duration d, google::protobuf::Duration* out);
// 1 to kMaxNameLength characters of [a-z0-9._-].
bool ValidName(absl::string_view name);
// InvalidArgument for an empty or too long key.
absl::Status ValidateKey(absl::string_view key);
// NotFound naming the queue (and how queues come and go).
absl::Status NoQueue(absl::string_view name);
// Validates `in` and fills every default; InvalidArgument naming the field.
absl::StatusOr<QueueSpec> Normalize(const informer::v1::CreateQueueRequest& in);
// The first field in which two normalized declarations differ, or "".
std::string FirstDifference(const informer::v1::CreateQueueRequest& a,
                            const informer::v1::CreateQueueRequest& b);

}  // namespace workqueue_internal
}  // namespace server

#endif  // SERVER_WORKQUEUE_SERVICE_WORKQUEUE_SPEC_H_
