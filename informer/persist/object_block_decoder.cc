#include "informer/persist/object_block_decoder.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "informer/persist/snapshot_format.h"

namespace informer {

ObjectBlockDecoder::ObjectBlockDecoder(const TransformOptions& transform,
                                       int threads,
                                       const object_records::Decoder* records)
    : transform_(transform),
      records_(records),
      max_in_flight_(threads > 0 ? 2 * static_cast<size_t>(threads) : 0) {
  for (int i = 0; i < threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

ObjectBlockDecoder::~ObjectBlockDecoder() { StopWorkers(); }

void ObjectBlockDecoder::StopWorkers() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void ObjectBlockDecoder::Decode(Block* block) const {
  snapshot_format::PayloadCursor cursor(block->payload);
  uint64_t number = block->first_record;
  for (; !cursor.done(); ++number) {
    absl::string_view record;
    absl::StatusOr<ObjectPtr> obj =
        !cursor.ReadString(&record)
            ? absl::InvalidArgumentError("its record overruns the block")
        : records_ != nullptr ? records_->Decode(record)
                              : Object::Parse(record, transform_);
    if (!obj.ok()) {
      block->status = absl::InvalidArgumentError(
          absl::StrCat(records_ != nullptr ? "record " : "object ", number,
                       " (in the RECORDS frame at offset ", block->offset,
                       ") does not decode: ", obj.status().message()));
      break;
    }
    if (*obj != nullptr) block->objects.push_back(*std::move(obj));
  }
  std::string().swap(block->payload);
}

void ObjectBlockDecoder::WorkerLoop() {
  for (;;) {
    Block* block;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ObjectBlockDecoder* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) {
            return d->closing_ || d->taken_ < d->blocks_.size();
          },
          this));
      if (taken_ == blocks_.size()) return;  // closing, nothing left
      block = &blocks_[taken_++];
    }
    Decode(block);
    absl::MutexLock lock(&mu_);
    ++decoded_;
    if (!block->status.ok()) failed_ = true;
  }
}

bool ObjectBlockDecoder::Add(std::string payload, uint64_t first_record,
                             uint64_t offset) {
  absl::MutexLock lock(&mu_);
  if (workers_.empty()) {
    blocks_.emplace_back();
    Block& block = blocks_.back();
    block.payload = std::move(payload);
    block.first_record = first_record;
    block.offset = offset;
    Decode(&block);  // no worker shares the lock; holding it is harmless
    failed_ = failed_ || !block.status.ok();
    return !failed_;
  }
  mu_.Await(absl::Condition(
      +[](ObjectBlockDecoder* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) {
        return d->failed_ ||
               d->blocks_.size() - d->decoded_ < d->max_in_flight_;
      },
      this));
  if (failed_) return false;
  Block& block = blocks_.emplace_back();
  block.payload = std::move(payload);
  block.first_record = first_record;
  block.offset = offset;
  return true;
}

absl::StatusOr<std::vector<ObjectPtr>> ObjectBlockDecoder::Finish() {
  StopWorkers();  // the workers drain the queue before they exit
  absl::MutexLock lock(&mu_);
  size_t total = 0;
  for (const Block& block : blocks_) {
    if (!block.status.ok()) return block.status;
    total += block.objects.size();
  }
  std::vector<ObjectPtr> out;
  out.reserve(total);
  for (Block& block : blocks_) {
    for (ObjectPtr& obj : block.objects) out.push_back(std::move(obj));
    std::vector<ObjectPtr>().swap(block.objects);
  }
  blocks_.clear();
  return out;
}

}  // namespace informer
