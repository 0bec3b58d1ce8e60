#ifndef INFORMER_OBJECT_STREAMING_LIST_DECODER_H_
#define INFORMER_OBJECT_STREAMING_LIST_DECODER_H_

// Decoding of a list response body (e.g. a PodList page) WHILE it arrives:
// the API client hands each received chunk to a StreamingListDecoder, which
// decodes every item of the "items" array as soon as its last byte is in.
//
// Why: a list page used to be received into one large buffer (megabytes of
// freshly faulted memory), then split and decoded after the transfer. Decoding
// from the receive chunks overlaps decoding with the server sending the rest,
// and the only bytes ever copied are an item that straddles two chunks.
//
// Strictness is that of DecodeList (wire.h): the body is accepted only if
// it is valid JSON as a whole. ListItemSplitter checks the separators of the
// items array (commas, whitespace, the closing bracket); each item is
// validated by simdjson when it is decoded; everything outside the items
// (the "envelope": kind, apiVersion, metadata, with "items":[] left in
// place) is validated and read by DecodeList at the end. Valid envelope +
// valid items + valid separators = a valid body.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "informer/object/object.h"
#include "informer/object/ordered_batch_decoder.h"
#include "informer/object/wire.h"

namespace informer {
namespace json_internal {
struct DropNode;
}  // namespace json_internal

// Splits a JSON list body, fed in chunks of any size (down to one byte),
// into the complete texts of the elements of its top-level "items" array and
// the rest (the envelope). It tracks strings, escapes and nesting depth, so
// braces and quotes inside strings never confuse it. It does not validate
// JSON beyond what it needs to find item boundaries: see the file comment
// for who validates what.
//
// Items are handed to `on_item` (a view valid only during the call): one that
// lies within a single chunk is passed without copying, one that straddles
// chunks is assembled in an internal buffer first.
//
// The first top-level member named "items" whose value is an array is the
// one split; a second top-level "items" member is an error (a JSON decoder
// keeps the last duplicate, so the items seen would not be the list's). An
// "items" value that is not an array (null) stays in the envelope.
//
// Not thread-safe. After an error the splitter stays failed.
class ListItemSplitter {
 public:
  using ItemFn = std::function<absl::Status(absl::string_view item)>;

  explicit ListItemSplitter(ItemFn on_item);

  // Consumes `chunk`. Returns the first error of on_item, or InvalidArgument
  // for a body the splitter cannot split (e.g. a missing comma between
  // items), naming the item index.
  absl::Status Feed(absl::string_view chunk);
  // The body is complete: InvalidArgument when it ended inside the items
  // array (truncated).
  absl::Status Finish();

  // Everything outside the items' texts, with the array left as "[]".
  const std::string& envelope() const { return envelope_; }
  // True once an "items" array was found (its items went to on_item).
  bool found_items() const { return found_items_; }
  // The envelope's length when the items array started: its first
  // head_size() bytes are everything before the items, plus "[]".
  size_t head_size() const { return head_size_; }
  // Items handed to on_item so far.
  size_t item_count() const { return item_count_; }

 private:
  enum class Phase {
    kEnvelope,    // outside the items array
    kBeforeItem,  // in the array, expecting an item (or ']' if first)
    kInItem,      // inside an item's text
    kAfterItem,   // after an item, expecting ',' or ']'
  };
  // Where the envelope scanner is at depth 1 (the list object's members).
  enum class KeyState { kExpectKey, kInKey, kAfterKey, kExpectValue, kValue };

  // Each returns the position after what it consumed in [p, end).
  const char* ScanEnvelope(const char* p, const char* end);
  const char* ScanItem(const char* p, const char* end);
  // ScanEnvelope's byte handlers (see the .cc).
  void EnvelopeStringByte(char c);
  const char* EnvelopeOpen(char c, const char* p, const char* end);
  absl::Status Fail(absl::string_view what);

  ItemFn on_item_;
  absl::Status status_;
  Phase phase_ = Phase::kEnvelope;
  std::string envelope_;
  bool found_items_ = false;
  size_t head_size_ = 0;
  size_t item_count_ = 0;

  // Envelope scanner state.
  int env_depth_ = 0;
  bool env_in_string_ = false;
  bool env_escape_ = false;
  KeyState key_state_ = KeyState::kValue;
  std::string key_;  // the depth-1 key being read (bounded)

  // Item scanner state.
  int item_depth_ = 0;  // 0: a scalar item
  bool item_in_string_ = false;
  bool item_escape_ = false;
  bool after_comma_ = false;  // kBeforeItem after a ',': ']' is an error
  std::string item_buffer_;   // an item that straddles chunks
};

// Decodes a list body fed in chunks into an ObjectList, as DecodeList does
// for a whole body (same errors, same transform), decoding items as they
// complete.
//
// Parallel decoding (Options::decode_threads > 0): complete items are
// copied into batches that worker threads decode (OrderedBatchDecoder)
// while the feeding thread keeps receiving; the feeding thread also decodes a
// batch itself whenever work piles up, and drains the rest in Finish. Why: on a
// paged initial list, decoding and building the objects (and faulting in their
// fresh memory) is most of the client's CPU, and the API server's core is idle
// between pages. Items keep their order. Workers start only once a body
// spans more than one batch, so small bodies never start a thread.
//
// Thread-safety: Feed, Finish and failed are called from one thread (the
// feeding thread); the workers are internal. The destructor waits for them.
class StreamingListDecoder {
 public:
  struct Options {
    // Threads decoding besides the feeding one. 0: decode inline in Feed.
    int decode_threads = 0;
    // A batch is handed to the decoders once it holds this many bytes of
    // item text (or the body ends). Small enough that its buffer comes from
    // malloc's heap (below the mmap threshold), where a freed buffer is
    // reused warm instead of being mapped and faulted in afresh.
    size_t batch_bytes = 64 << 10;
    // Optional: called once, on the feeding thread, when the items array
    // starts, with the list metadata that came before it (no items). The
    // API server writes metadata (continue token, resourceVersion) first,
    // so a pager can request the next page before this one is decoded.
    // Metadata written after the items is not in it (the final result has
    // it); not called when the part before the items does not decode on
    // its own. Either way the final result is unaffected.
    std::function<void(const ObjectList& head)> on_head;
    // Optional: called on the feeding thread with every item, in list
    // order, once it and every item before it are decoded: from Feed while
    // the body still arrives, the rest from Finish. The items are in
    // Finish's result as well. An error fails the body as a bad item does
    // (Feed returns it, and so does Finish).
    std::function<absl::Status(const ObjectPtr& item)> on_item;
    // With on_item: false = the items go to on_item only, and each is let
    // go once handed over (Finish's result has none), so that a caller
    // that keeps few of them (a relist compared with a cache) never holds
    // the whole list. Ignored without on_item.
    bool keep_items = true;
  };

  explicit StreamingListDecoder(const TransformOptions& transform = {});
  StreamingListDecoder(const TransformOptions& transform, Options options);
  ~StreamingListDecoder();

  StreamingListDecoder(const StreamingListDecoder&) = delete;
  StreamingListDecoder& operator=(const StreamingListDecoder&) = delete;

  // Splits (and decodes, or queues for decoding) the items completed by
  // `chunk`. Returns an error once the body is known to be bad (malformed
  // item, unsplittable body); every later call returns an error too.
  absl::Status Feed(absl::string_view chunk);
  // The body is complete: waits for the decoders, validates the envelope and
  // returns the list. On error, the error of the first bad item (or the
  // body's), and nothing of the body may be used. Call at most once.
  absl::StatusOr<ObjectList> Finish();

  // True once Feed returned an error (so the caller's transfer was aborted
  // by the decoder, not by the network): Finish then returns that error.
  bool failed() const { return failed_; }

 private:
  using Pool = OrderedBatchDecoder<ObjectPtr>;

  absl::Status OnItem(absl::string_view text);
  // Hands a decoded item to Options::on_item and/or keeps it.
  absl::Status Deliver(ObjectPtr obj);
  // Threaded decoding: delivers the items of the batches decoded so far, in
  // list order, up to the first one still pending (wait = false) or all of
  // them (wait = true, decoding here too). Returns the first bad item's
  // error (list order), or on_item's.
  absl::Status TakeDecoded(bool wait);

  const TransformOptions transform_;
  const Options options_;
  const std::shared_ptr<const json_internal::DropNode> drops_;
  std::unique_ptr<Pool> pool_;    // decode_threads > 0
  size_t inline_index_ = 0;       // list index of the next inline item
  std::vector<ObjectPtr> items_;  // for Finish's result
  ListItemSplitter splitter_;
  absl::Status status_;  // the feeding thread's first error
  bool failed_ = false;
  bool finished_ = false;
  bool head_reported_ = false;
};

}  // namespace informer

#endif  // INFORMER_OBJECT_STREAMING_LIST_DECODER_H_
