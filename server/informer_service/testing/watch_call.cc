#include "server/informer_service/testing/watch_call.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "informer/object/object.h"

namespace server {

namespace v1 = ::informer::v1;

std::string DescribeEvent(const v1::Event& event) {
  constexpr size_t kPrefix = sizeof("EVENT_TYPE_") - 1;
  std::string out = v1::EventType_Name(event.type()).substr(kPrefix);
  if (event.has_object()) {
    absl::StatusOr<informer::ObjectPtr> obj =
        informer::Object::Parse(event.object().json());
    if (obj.ok()) absl::StrAppend(&out, " ", (*obj)->Key());
  }
  if (event.initial()) absl::StrAppend(&out, " initial");
  if (event.stale()) absl::StrAppend(&out, " stale");
  return out;
}

WatchCall::WatchCall(v1::Informer::StubInterface* stub,
                     const v1::WatchRequest& request, absl::Duration deadline) {
  context_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  reader_ = stub->Watch(&context_, request);
}

WatchCall::~WatchCall() {
  context_.TryCancel();
  v1::WatchResponse response;
  while (reader_->Read(&response)) {
  }
  reader_->Finish();
}

absl::StatusOr<WatchEvents> WatchCall::ReadUntil(v1::EventType last) {
  WatchEvents out;
  while (true) {
    if (pending_.empty()) {
      v1::WatchResponse response;
      if (!reader_->Read(&response)) {
        return absl::UnavailableError(
            absl::StrCat("the Watch ended before ", v1::EventType_Name(last),
                         " after [", absl::StrJoin(out.events, ", "), "]"));
      }
      for (v1::Event& event : *response.mutable_events()) {
        pending_.push_back(std::move(event));
      }
      continue;
    }
    const v1::Event event = std::move(pending_.front());
    pending_.pop_front();
    if (event.type() == v1::EVENT_TYPE_BOOKMARK) continue;
    out.events.push_back(DescribeEvent(event));
    out.resume_tokens.push_back(event.resume_token());
    if (event.type() == last) return out;
  }
}

}  // namespace server
