#include "server/workqueue_service/workqueue_spec.h"

#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace server {
namespace workqueue_internal {

namespace v1 = ::informer::v1;

absl::StatusOr<absl::Duration> FromProto(const google::protobuf::Duration& d,
                                         absl::string_view field) {
  const bool bad_sign =
      (d.seconds() > 0 && d.nanos() < 0) || (d.seconds() < 0 && d.nanos() > 0);
  if (bad_sign || d.nanos() <= -1000000000 || d.nanos() >= 1000000000) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": malformed google.protobuf.Duration"));
  }
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

void ToProto(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' ||
          c == '-' || c == '_')) {
      return false;
    }
  }
  return true;
}

absl::Status ValidateKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("key is required");
  if (key.size() > kMaxKeyLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("key: longer than ", kMaxKeyLength, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status NoQueue(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("work queue \"", name,
                                          "\" does not exist (CreateQueue it "
                                          "first; idle queues are removed)"));
}

namespace {

// The events a queue takes (default: all four), into `events` and
// spec->event_mask.
absl::Status NormalizeEvents(const v1::CreateQueueRequest& in,
                             std::set<int>* events_out, QueueSpec* spec) {
  std::set<int>& events = *events_out;
  for (int i = 0; i < in.events_size(); ++i) {
    const int e = in.events(i);
    if (e <= v1::QUEUE_EVENT_UNSPECIFIED || e > v1::QUEUE_EVENT_SYNC) {
      return absl::InvalidArgumentError(absl::StrCat(
          "events[", i, "]: must be ADDED, MODIFIED, DELETED or SYNC"));
    }
    if (!events.insert(e).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("events[", i, "]: duplicate ", v1::QueueEvent_Name(e)));
    }
  }
  if (events.empty()) {
    events = {v1::QUEUE_EVENT_ADDED, v1::QUEUE_EVENT_MODIFIED,
              v1::QUEUE_EVENT_DELETED, v1::QUEUE_EVENT_SYNC};
  }
  for (int e : events) spec->event_mask |= 1u << e;
  return absl::OkStatus();
}

// The rate limiter's settings with the defaults filled in, into `spec`.
absl::Status NormalizeRateLimiter(const v1::RateLimiter& rl, QueueSpec* spec) {
  absl::StatusOr<absl::Duration> base =
      FromProto(rl.base_delay(), "rate_limiter.base_delay");
  if (!base.ok()) return base.status();
  absl::StatusOr<absl::Duration> max =
      FromProto(rl.max_delay(), "rate_limiter.max_delay");
  if (!max.ok()) return max.status();
  if (*base < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "rate_limiter.base_delay: must not be negative");
  }
  if (*max < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "rate_limiter.max_delay: must not be negative");
  }
  spec->base_delay = *base == absl::ZeroDuration() ? kDefaultBaseDelay : *base;
  spec->max_delay = *max == absl::ZeroDuration() ? kDefaultMaxDelay : *max;
  if (spec->max_delay < spec->base_delay) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rate_limiter.max_delay: ", absl::FormatDuration(spec->max_delay),
        " is below base_delay ", absl::FormatDuration(spec->base_delay)));
  }
  if (!(rl.qps() >= 0) || std::isinf(rl.qps())) {
    return absl::InvalidArgumentError(
        "rate_limiter.qps: must be a finite number >= 0");
  }
  if (rl.burst() < 0) {
    return absl::InvalidArgumentError(
        "rate_limiter.burst: must not be negative");
  }
  spec->qps = rl.qps() == 0 ? kDefaultQps : rl.qps();
  spec->burst = rl.burst() == 0 ? kDefaultBurst : rl.burst();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QueueSpec> Normalize(const v1::CreateQueueRequest& in) {
  QueueSpec spec;
  if (in.name().empty()) return absl::InvalidArgumentError("name is required");
  if (!ValidName(in.name())) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: \"", in.name(), "\" must be 1 to ", kMaxNameLength,
                     " characters of [a-z0-9._-]"));
  }
  if (in.resource().empty()) {
    return absl::InvalidArgumentError("resource is required");
  }
  absl::StatusOr<informer::LabelSelector> selector =
      informer::LabelSelector::Parse(in.label_selector());
  if (!selector.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("label_selector: ", selector.status().message()));
  }
  spec.selector = *std::move(selector);
  std::set<int> events;
  if (absl::Status st = NormalizeEvents(in, &events, &spec); !st.ok()) {
    return st;
  }

  absl::StatusOr<absl::Duration> resync =
      FromProto(in.resync_period(), "resync_period");
  if (!resync.ok()) return resync.status();
  if (*resync < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("resync_period: must not be negative");
  }
  if (*resync > absl::ZeroDuration()) {
    if (*resync < kMinResyncPeriod) {
      return absl::InvalidArgumentError("resync_period: the minimum is 1s");
    }
    if (!(spec.event_mask & (1u << v1::QUEUE_EVENT_SYNC))) {
      return absl::InvalidArgumentError(
          "resync_period: set, but events does not include QUEUE_EVENT_SYNC");
    }
  }
  spec.resync_period = *resync;

  if (absl::Status st = NormalizeRateLimiter(in.rate_limiter(), &spec);
      !st.ok()) {
    return st;
  }

  absl::StatusOr<absl::Duration> lease =
      FromProto(in.lease_timeout(), "lease_timeout");
  if (!lease.ok()) return lease.status();
  if (*lease < absl::ZeroDuration() || *lease > kMaxDelay) {
    return absl::InvalidArgumentError(
        "lease_timeout: must be between 0 (default 5m) and 24h");
  }
  spec.lease_timeout =
      *lease == absl::ZeroDuration() ? kDefaultLeaseTimeout : *lease;

  v1::CreateQueueRequest& n = spec.request;
  n.set_name(in.name());
  n.set_resource(in.resource());
  n.set_namespace_(in.namespace_());
  n.set_label_selector(in.label_selector());
  for (int e : events) n.add_events(static_cast<v1::QueueEvent>(e));
  ToProto(spec.resync_period, n.mutable_resync_period());
  ToProto(spec.base_delay, n.mutable_rate_limiter()->mutable_base_delay());
  ToProto(spec.max_delay, n.mutable_rate_limiter()->mutable_max_delay());
  n.mutable_rate_limiter()->set_qps(spec.qps);
  n.mutable_rate_limiter()->set_burst(spec.burst);
  ToProto(spec.lease_timeout, n.mutable_lease_timeout());
  return spec;
}

std::string FirstDifference(const v1::CreateQueueRequest& a,
                            const v1::CreateQueueRequest& b) {
  if (a.resource() != b.resource()) return "resource";
  if (a.namespace_() != b.namespace_()) return "namespace";
  if (a.label_selector() != b.label_selector()) return "label_selector";
  if (std::vector<int>(a.events().begin(), a.events().end()) !=
      std::vector<int>(b.events().begin(), b.events().end())) {
    return "events";
  }
  if (a.resync_period().SerializeAsString() !=
      b.resync_period().SerializeAsString()) {
    return "resync_period";
  }
  if (a.rate_limiter().base_delay().SerializeAsString() !=
      b.rate_limiter().base_delay().SerializeAsString()) {
    return "rate_limiter.base_delay";
  }
  if (a.rate_limiter().max_delay().SerializeAsString() !=
      b.rate_limiter().max_delay().SerializeAsString()) {
    return "rate_limiter.max_delay";
  }
  if (a.rate_limiter().qps() != b.rate_limiter().qps()) {
    return "rate_limiter.qps";
  }
  if (a.rate_limiter().burst() != b.rate_limiter().burst()) {
    return "rate_limiter.burst";
  }
  if (a.lease_timeout().SerializeAsString() !=
      b.lease_timeout().SerializeAsString()) {
    return "lease_timeout";
  }
  return "";
}

}  // namespace workqueue_internal
}  // namespace server
