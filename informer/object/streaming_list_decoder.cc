#include "informer/object/streaming_list_decoder.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "informer/object/json_decode.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace informer {
namespace {

using json_internal::kByteClasses;
using json_internal::kClose;
using json_internal::kOpen;
using json_internal::kOther;
using json_internal::kQuote;

inline bool IsSpace(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// The first '"' or '\\' in [p, end), or end. Most of a Kubernetes object's
// bytes are inside strings, so this loop is where the splitter spends its
// time: 16 bytes per step.
inline const char* FindQuoteOrBackslash(const char* p, const char* end) {
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const int mask = _mm_movemask_epi8(
        _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p < end && *p != '"' && *p != '\\') ++p;
  return p;
}

#ifdef __SSE2__
// Bit i of each mask is set when byte i of the 64-byte block at `p` is a
// quote, a backslash, an opening or a closing bracket ('{' '[' / '}' ']').
struct BlockMasks {
  uint64_t quote, backslash, open, close;
};

inline BlockMasks ClassifyBlock(const char* p) {
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  // '{' (0x7b) and '[' (0x5b), '}' (0x7d) and ']' (0x5d) differ only in
  // bit 0x20: one compare each after setting it.
  const __m128i bit = _mm_set1_epi8(0x20);
  const __m128i open = _mm_set1_epi8('{');
  const __m128i close = _mm_set1_epi8('}');
  BlockMasks m = {0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    const __m128i v =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i));
    const __m128i folded = _mm_or_si128(v, bit);
    const int shift = 16 * i;
    m.quote |= static_cast<uint64_t>(static_cast<uint32_t>(
                   _mm_movemask_epi8(_mm_cmpeq_epi8(v, quote))))
               << shift;
    m.backslash |= static_cast<uint64_t>(static_cast<uint32_t>(
                       _mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash))))
                   << shift;
    m.open |= static_cast<uint64_t>(static_cast<uint32_t>(
                  _mm_movemask_epi8(_mm_cmpeq_epi8(folded, open))))
              << shift;
    m.close |= static_cast<uint64_t>(static_cast<uint32_t>(
                   _mm_movemask_epi8(_mm_cmpeq_epi8(folded, close))))
               << shift;
  }
  return m;
}

// Bit i of the result is the XOR of bits 0..i of x: with x the quotes of a
// block, the bytes from an opening quote up to (not including) its closing
// quote.
inline uint64_t PrefixXor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}
#endif

std::string Printable(char c) {
  if (static_cast<unsigned char>(c) < 0x20 ||
      static_cast<unsigned char>(c) >= 0x7f) {
    return absl::StrCat(
        "byte 0x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
  }
  return absl::StrCat("'", std::string(1, c), "'");
}

absl::Status Prefixed(absl::string_view prefix, const absl::Status& st) {
  return absl::Status(st.code(), absl::StrCat(prefix, st.message()));
}

// ScanItem's state inside an item that may straddle chunks.
struct ItemScanState {
  int depth;
  bool in_string;
  bool escape;
};

#ifdef __SSE2__
// ScanItem's fast path: the 64 bytes at p, with st.depth > 0 (simdjson's
// stage-1 technique): escaped characters from the backslash runs, the
// string mask from the prefix XOR of the unescaped quotes; only brackets
// outside strings are then looked at one by one. Returns true when the
// item ended in the block, with p just after its last byte; else advances
// p by 64. Always inlined so that `st` stays in ScanItem's registers.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ScanItemBlock64(const char*& p,
                                                         ItemScanState& st) {
  constexpr uint64_t kEven = 0x5555555555555555ULL;
  const BlockMasks m = ClassifyBlock(p);
  const uint64_t prev_escaped = st.escape ? 1 : 0;
  const uint64_t backslash = m.backslash & ~prev_escaped;
  const uint64_t follows_escape = (backslash << 1) | prev_escaped;
  // Runs of backslashes starting on an odd bit, added to the backslashes
  // so that the carry ripples through each run: the parity of each run's
  // length decides which character after it is escaped.
  const uint64_t odd_starts = backslash & ~kEven & ~follows_escape;
  uint64_t even_starts = 0;
  const bool carry =
      __builtin_add_overflow(odd_starts, backslash, &even_starts);
  const uint64_t escaped = (kEven ^ (even_starts << 1)) & follows_escape;
  const uint64_t inside = PrefixXor(m.quote & ~escaped) ^
                          (st.in_string ? ~uint64_t{0} : uint64_t{0});
  uint64_t brackets = (m.open | m.close) & ~inside;
  while (brackets != 0) {
    const int i = __builtin_ctzll(brackets);
    if ((m.open >> i) & 1) {
      ++st.depth;
    } else if (--st.depth == 0) {
      p += i + 1;
      st.in_string = false;
      st.escape = false;
      return true;
    }
    brackets &= brackets - 1;
  }
  st.in_string = (inside >> 63) != 0;
  st.escape = carry;
  p += 64;
  return false;
}
#endif

}  // namespace

ListItemSplitter::ListItemSplitter(ItemFn on_item)
    : on_item_(std::move(on_item)) {}

absl::Status ListItemSplitter::Fail(absl::string_view what) {
  if (status_.ok()) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat("list: items[", item_count_, "]: ", what));
  }
  return status_;
}

// A byte inside an envelope string: tracks escapes and the end of the
// string, and collects a depth-1 key (only as far as needed to tell
// "items" apart).
void ListItemSplitter::EnvelopeStringByte(char c) {
  if (env_escape_) {
    env_escape_ = false;
    // An escaped key is never taken for "items" (the raw bytes differ);
    // it then stays in the envelope, where DecodeList sees it.
    if (key_state_ == KeyState::kInKey) key_.push_back('\\');
  } else if (c == '\\') {
    env_escape_ = true;
  } else if (c == '"') {
    env_in_string_ = false;
    if (key_state_ == KeyState::kInKey) key_state_ = KeyState::kAfterKey;
  } else if (key_state_ == KeyState::kInKey && key_.size() <= 5) {
    key_.push_back(c);
  }
}

// An opening bracket `c` ('[' or '{') at p outside strings. Returns where
// ScanEnvelope stops when this is the top-level "items" array (after it,
// or end on a duplicate), else nullptr after entering the container.
const char* ListItemSplitter::EnvelopeOpen(char c, const char* p,
                                           const char* end) {
  if (env_depth_ == 1 && key_state_ == KeyState::kExpectValue) {
    key_state_ = KeyState::kValue;
    if (c == '[' && key_ == "items") {
      if (found_items_) {
        // Feed returns status_, which Fail sets.
        Fail("duplicate top-level \"items\" member").IgnoreError();
        return end;
      }
      found_items_ = true;
      phase_ = Phase::kBeforeItem;
      return p + 1;
    }
  }
  ++env_depth_;
  if (env_depth_ == 1 && c == '{') key_state_ = KeyState::kExpectKey;
  return nullptr;
}

const char* ListItemSplitter::ScanEnvelope(const char* p, const char* end) {
  // The envelope is small (kind, apiVersion, metadata): a plain byte loop.
  for (; p < end; ++p) {
    const char c = *p;
    envelope_.push_back(c);
    if (env_in_string_) {
      EnvelopeStringByte(c);
      continue;
    }
    if (IsSpace(c)) continue;
    const bool member_level = env_depth_ == 1;
    switch (c) {
      case '"':
        env_in_string_ = true;
        if (member_level && key_state_ == KeyState::kExpectKey) {
          key_state_ = KeyState::kInKey;
          key_.clear();
        } else if (member_level && key_state_ == KeyState::kExpectValue) {
          key_state_ = KeyState::kValue;
        }
        break;
      case '[':
      case '{':
        if (const char* stop = EnvelopeOpen(c, p, end)) return stop;
        break;
      case '}':
      case ']':
        --env_depth_;
        break;
      case ':':
        if (member_level && key_state_ == KeyState::kAfterKey) {
          key_state_ = KeyState::kExpectValue;
        }
        break;
      case ',':
        if (member_level) key_state_ = KeyState::kExpectKey;
        break;
      default:
        if (member_level && key_state_ == KeyState::kExpectValue) {
          key_state_ = KeyState::kValue;
        }
        break;
    }
  }
  return end;
}

// Scans the current item from p; on its last byte, returns the position
// after it with phase_ = kAfterItem. Returns end when the item continues in
// the next chunk (the state is saved in the members).
const char* ListItemSplitter::ScanItem(const char* p, const char* end) {
  if (item_depth_ == 0 && !item_in_string_) {
    // A scalar item (invalid as an object; the decoder says so): it ends
    // before the next delimiter.
    while (p < end && !IsSpace(*p) && *p != ',' && *p != ']' && *p != '}') {
      ++p;
    }
    if (p < end) phase_ = Phase::kAfterItem;
    return p;
  }
  // Locals, not members, in the hot loop: they stay in registers.
  ItemScanState st{item_depth_, item_in_string_, item_escape_};
  while (p < end) {
#ifdef __SSE2__
    if (st.depth > 0 && end - p >= 64) {
      if (ScanItemBlock64(p, st)) {
        phase_ = Phase::kAfterItem;
        break;
      }
      continue;
    }
#endif
    if (st.in_string) {
      if (st.escape) {
        st.escape = false;
        ++p;
        continue;
      }
      p = FindQuoteOrBackslash(p, end);
      if (p == end) break;
      ++p;
      if (p[-1] == '\\') {
        st.escape = true;
        continue;
      }
      st.in_string = false;
      if (st.depth == 0) {  // the item was a string
        phase_ = Phase::kAfterItem;
        break;
      }
      continue;
    }
    const unsigned char cls = kByteClasses.c[static_cast<unsigned char>(*p)];
    ++p;
    if (cls == kQuote) {
      st.in_string = true;
    } else if (cls == kOpen) {
      ++st.depth;
    } else if (cls == kClose) {
      if (--st.depth == 0) {
        phase_ = Phase::kAfterItem;
        break;
      }
    }
  }
  item_depth_ = st.depth;
  item_in_string_ = st.in_string;
  item_escape_ = st.escape;
  return p;
}

absl::Status ListItemSplitter::Feed(absl::string_view chunk) {
  if (!status_.ok()) return status_;
  const char* p = chunk.data();
  const char* const end = p + chunk.size();
  // Where the current item's text starts in this chunk.
  const char* item_start = p;
  while (p < end) {
    switch (phase_) {
      case Phase::kEnvelope:
        p = ScanEnvelope(p, end);
        if (!status_.ok()) return status_;
        // The '[' is in the envelope; close the array there at once.
        if (phase_ == Phase::kBeforeItem) {
          envelope_.push_back(']');
          head_size_ = envelope_.size();
        }
        break;
      case Phase::kBeforeItem:
      case Phase::kAfterItem: {
        while (p < end && IsSpace(*p)) ++p;
        if (p == end) break;
        const char c = *p;
        if (phase_ == Phase::kAfterItem) {
          if (c == ',') {
            phase_ = Phase::kBeforeItem;
            after_comma_ = true;
            ++p;
          } else if (c == ']') {
            phase_ = Phase::kEnvelope;  // envelope_ already holds the "]"
            ++p;
          } else {
            return Fail(absl::StrCat("expected ',' or ']' after the item, got ",
                                     Printable(c)));
          }
          break;
        }
        if (c == ']' && !after_comma_) {
          phase_ = Phase::kEnvelope;
          ++p;
          break;
        }
        if (c == ',' || c == ']' || c == '}' || c == ':') {
          return Fail(absl::StrCat("expected an item, got ", Printable(c)));
        }
        after_comma_ = false;
        item_start = p;
        item_depth_ = (c == '{' || c == '[') ? 1 : 0;
        item_in_string_ = c == '"';
        item_escape_ = false;
        phase_ = Phase::kInItem;
        // A scalar's first byte is part of the scalar scan; a container's or
        // string's opening byte is accounted for above.
        if (item_depth_ > 0 || item_in_string_) ++p;
        break;
      }
      case Phase::kInItem: {
        p = ScanItem(p, end);
        if (phase_ != Phase::kAfterItem) break;  // continues in next chunk
        absl::string_view text(item_start, static_cast<size_t>(p - item_start));
        if (!item_buffer_.empty()) {
          item_buffer_.append(text.data(), text.size());
          text = item_buffer_;
        }
        absl::Status st = on_item_(text);
        item_buffer_.clear();
        if (!st.ok()) {
          status_ = st;
          return status_;
        }
        ++item_count_;
        break;
      }
    }
  }
  if (phase_ == Phase::kInItem) {
    // The item continues in the next chunk: keep what we have of it.
    item_buffer_.append(item_start, static_cast<size_t>(end - item_start));
  }
  return absl::OkStatus();
}

absl::Status ListItemSplitter::Finish() {
  if (!status_.ok()) return status_;
  if (phase_ != Phase::kEnvelope) {
    return Fail("the body ended inside the items array (truncated)");
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<ObjectPtr> DecodeItem(absl::string_view text, size_t index,
                                     const json_internal::DropNode& drops,
                                     JsonCompressor* compressor) {
  absl::StatusOr<ObjectPtr> obj = json_internal::WithParsedJson(
      text,
      [&](json_internal::ParsedJson& parsed) -> absl::StatusOr<ObjectPtr> {
        absl::Status st = parsed.Parse(text);
        if (!st.ok()) return st;
        return json_internal::BuildObject(parsed.root(), parsed.compact(),
                                          drops, "", compressor);
      });
  if (!obj.ok()) {
    return Prefixed(absl::StrCat("list: items[", index, "]: "), obj.status());
  }
  return obj;
}

}  // namespace

StreamingListDecoder::StreamingListDecoder(const TransformOptions& transform)
    : StreamingListDecoder(transform, Options()) {}

StreamingListDecoder::StreamingListDecoder(const TransformOptions& transform,
                                           Options options)
    : transform_(transform),
      options_(options),
      drops_(json_internal::BuildDropTree(transform)),
      splitter_([this](absl::string_view item) { return OnItem(item); }) {
  if (options_.decode_threads > 0) {
    Pool::Options pool;
    pool.threads = options_.decode_threads;
    pool.batch_bytes = options_.batch_bytes;
    // The pool's workers may outlive nothing of ours: it is destroyed (and
    // joins them) before drops_ and transform_.
    pool_ = std::make_unique<Pool>(
        pool, [drops = drops_, compressor = transform.compressor](
                  absl::string_view text, size_t index) {
          return DecodeItem(text, index, *drops, compressor.get());
        });
  }
}

StreamingListDecoder::~StreamingListDecoder() = default;

absl::Status StreamingListDecoder::OnItem(absl::string_view text) {
  if (pool_ != nullptr) {
    pool_->Add(text);
    return absl::OkStatus();
  }
  // Inline: decode straight from the received bytes, no copy.
  absl::StatusOr<ObjectPtr> obj =
      DecodeItem(text, inline_index_++, *drops_, transform_.compressor.get());
  if (!obj.ok()) return obj.status();
  return Deliver(*std::move(obj));
}

absl::Status StreamingListDecoder::Deliver(ObjectPtr obj) {
  if (options_.on_item) {
    absl::Status st = options_.on_item(obj);
    if (!st.ok()) return st;
    if (!options_.keep_items) return absl::OkStatus();
  }
  items_.push_back(std::move(obj));
  return absl::OkStatus();
}

absl::Status StreamingListDecoder::Feed(absl::string_view chunk) {
  if (!status_.ok()) return status_;
  status_ = splitter_.Feed(chunk);
  if (options_.on_head && !head_reported_ && splitter_.found_items()) {
    head_reported_ = true;
    // The envelope so far ends with "items":[] : closing the object makes
    // the metadata read on its own.
    absl::StatusOr<ObjectList> head =
        DecodeList(absl::StrCat(absl::string_view(splitter_.envelope())
                                    .substr(0, splitter_.head_size()),
                                "}"),
                   transform_);
    if (head.ok()) options_.on_head(*head);
  }
  if (status_.ok() && pool_ != nullptr) {
    // A worker found a bad item: report the first one in list order, which
    // may be in a batch still queued or being decoded.
    status_ = TakeDecoded(/*wait=*/pool_->failed());
  }
  failed_ = !status_.ok();
  return status_;
}

absl::Status StreamingListDecoder::TakeDecoded(bool wait) {
  while (std::unique_ptr<Pool::Batch> b = pool_->TakeNext(wait)) {
    // The first bad item's error: its batch's good items are not handed
    // over, as the list fails as a whole.
    if (!b->status.ok()) return b->status;
    for (ObjectPtr& obj : b->out) {
      absl::Status st = Deliver(std::move(obj));
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ObjectList> StreamingListDecoder::Finish() {
  if (finished_) {
    return absl::FailedPreconditionError("StreamingListDecoder: Finish twice");
  }
  finished_ = true;
  if (!status_.ok()) return status_;
  absl::Status st = splitter_.Finish();
  if (pool_ != nullptr) {
    // Help with (or do) what is left, then stop the workers. The first bad
    // item's error wins over the body's: it comes first.
    pool_->Flush();
    const absl::Status items = TakeDecoded(/*wait=*/true);
    pool_->StopWorkers();
    if (!items.ok()) return items;
  }
  if (!st.ok()) return st;
  // The envelope (the list without its items) is small: decoding it with
  // DecodeList validates it and reads the list metadata exactly as a whole
  // body would be read.
  absl::StatusOr<ObjectList> list =
      DecodeList(splitter_.envelope(), transform_);
  if (!list.ok()) return list.status();
  if (splitter_.found_items()) {
    if (!list->items.empty()) {
      return absl::InvalidArgumentError(
          "list: more than one top-level \"items\" member");
    }
    list->items = std::move(items_);
  }
  return list;
}

}  // namespace informer
