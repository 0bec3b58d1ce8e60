#ifndef INFORMER_PERSIST_OBJECT_BLOCK_DECODER_H_
#define INFORMER_PERSIST_OBJECT_BLOCK_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "informer/object/object.h"
#include "informer/persist/object_record_codec.h"

namespace informer {

// Decodes a snapshot's blocks of object records (the payload of a RECORDS
// frame: records of a varint size and that many bytes of JSON) into
// Objects with Object::Parse, on worker threads, keeping the blocks' order:
// the snapshot reader reads and verifies block n+1 while block n decodes,
// and decoding, most of a load's time, is spread over the cores.
//
// Memory: at most 2 * threads blocks wait or decode at a time (Add blocks
// the caller until one is done), and a block's bytes are freed once
// decoded, so only the Objects accumulate.
//
// Errors: the first failed block (in block order) is reported, naming the
// object's number in the section and the block's offset; blocks after a
// failure may or may not be decoded (Add reports it so the caller can stop).
//
// Thread-safety: Add and Finish are called by one thread, the owner; the
// workers are internal. Destroying the decoder without Finish stops and
// joins the workers.
class ObjectBlockDecoder {
 public:
  // `threads` == 0: each block is decoded by Add, on the caller's thread.
  // `records`: null for blocks of JSON records (the objects section's
  // version 1), else the decoder of tagged records (version 2; not owned,
  // must outlive this, and have every dictionary added before the first
  // Add of a block whose objects use it); dictionary records yield no
  // object.
  ObjectBlockDecoder(const TransformOptions& transform, int threads,
                     const object_records::Decoder* records = nullptr);
  ObjectBlockDecoder(const ObjectBlockDecoder&) = delete;
  ObjectBlockDecoder& operator=(const ObjectBlockDecoder&) = delete;
  ~ObjectBlockDecoder();

  // Queues one block. `first_record`: the 1-based number of its first
  // record in the section; `offset`: the frame's offset in the file (both
  // for error messages). False once some block has failed to decode.
  bool Add(std::string payload, uint64_t first_record, uint64_t offset)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Waits for every block and returns all objects in order, or the
  // earliest failed block's error (InvalidArgument). Call once.
  absl::StatusOr<std::vector<ObjectPtr>> Finish() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Block {
    std::string payload;
    uint64_t first_record = 0;
    uint64_t offset = 0;
    std::vector<ObjectPtr> objects;
    absl::Status status;
  };

  // Decodes `block` (outside the lock): fills its objects or its status
  // and frees its payload.
  void Decode(Block* block) const;
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void StopWorkers() ABSL_LOCKS_EXCLUDED(mu_);

  const TransformOptions transform_;
  const object_records::Decoder* const records_;
  const size_t max_in_flight_;
  absl::Mutex mu_;
  // Every block, in order. A deque: workers hold pointers to its elements
  // while Add appends (push_back never moves elements).
  std::deque<Block> blocks_ ABSL_GUARDED_BY(mu_);
  // Blocks handed to a worker / finished decoding.
  size_t taken_ ABSL_GUARDED_BY(mu_) = 0;
  size_t decoded_ ABSL_GUARDED_BY(mu_) = 0;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace informer

#endif  // INFORMER_PERSIST_OBJECT_BLOCK_DECODER_H_
