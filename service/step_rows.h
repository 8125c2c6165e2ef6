// Encoding the mask rows of one Decode step for the wire. Most rows of a
// batch repeat: sequences sharing a grammar sit in the same state (in one
// benchmark, 8 rows in 10 equal an earlier row of their step), and a
// sequence inside a long string keeps its row from step to step. So a
// sequence's first row equal to the one it was last sent goes out as
// MaskRow.same_as_previous (when its client keeps that row) or reuses its
// encoding, a row equal to an earlier row of its step becomes a reference
// to it (MaskRow.same_as), and only the other rows are encoded
// (proto/mask_rows.h), possibly in parallel.
//
// Equal rows are found two ways. A row may come with a key naming its mask
// (GrammarMatcher::NextMaskKey) and no words yet: equal keys settle it
// without filling, hashing or comparing 16 KB of words, and the encodings
// of keyed rows are kept across steps (up to a byte budget), since a
// stream's sequences keep coming back to the same grammar positions. Only
// rows with a key new to the step and to that cache are handed back to be
// filled. Rows without a key, and keyed rows once filled, are compared by
// their words.
//
// Cost: per keyed row a hash of its key (a few words) and, on a cache hit,
// a copy of the encoding; per filled row a 64-bit hash of a quarter of its
// words and, on a hash match, a memcmp; an encode (about 15 us for 5,000
// listed ids of the llama3 vocabulary) only for new rows. A RowMemory holds
// the key, or a copy of the words and the encoding, of the row last sent
// (up to about 20 KB for llama3); the cache holds up to its budget.
//
// Thread-safety: a StepRowEncoder belongs to one stream's handler thread;
// the caller may fill rows concurrently between Settle and Finish, and
// Finish may run encodes concurrently through its for_each argument.
#ifndef GRAMMARD_SERVICE_STEP_ROWS_H_
#define GRAMMARD_SERVICE_STEP_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "proto/grammard.pb.h"

namespace grammard::service {

// A sequence's first row as last sent, kept between its steps: its key
// when it had one; else its words, and its encoding when it was sent
// encoded (otherwise no encoding is set).
struct RowMemory {
  std::vector<uintptr_t> key;
  std::vector<uint32_t> words;
  grammard::v1::MaskRow encoded;
};

// A row's key (empty: none) and what keeps the objects it names alive
// (the cache holds it weakly: an entry dies with its grammar).
struct RowKey {
  absl::Span<const uintptr_t> key;
  const std::shared_ptr<const void>* owner = nullptr;
};

class StepRowEncoder {
 public:
  // Keeps the encodings of keyed rows up to about `cache_bytes` (counted
  // as their wire size); 0 keeps none.
  explicit StepRowEncoder(size_t cache_bytes);

  // Runs fn(i) for every i in [0, n), in any order, possibly concurrently.
  using ForEach =
      std::function<void(size_t n, const std::function<void(size_t)>& fn)>;

  // The next row of the step, in wire order, at `words`: ceil(vocab_size /
  // 32) words that must stay in place until Finish. With an empty `key`
  // they hold the row already; with a key (which, and its owner, must stay
  // in place too) they are written only if Settle asks for it. For a sequence's
  // first row, `memory` is where it is kept between steps (null for the
  // others), and `client_keeps_previous` says the client keeps it too. `out` is
  // written by Settle or Finish.
  void Add(const uint32_t* words, int32_t vocab_size, RowKey key,
           RowMemory* memory, bool client_keeps_previous,
           grammard::v1::MaskRow* out);

  // Settles the keyed rows that its key can; returns the indices, in Add
  // order, of the keyed rows whose words the caller must write before
  // Finish.
  const std::vector<size_t>& Settle();

  // Encodes the rows that need it, updates their memories and gets ready
  // for the next step.
  void Finish(const ForEach& for_each);

 private:
  struct Row {
    const uint32_t* words;
    int32_t vocab_size;
    absl::Span<const uintptr_t> key;
    const std::shared_ptr<const void>* owner;
    RowMemory* memory;
    bool client_keeps_previous;
    grammard::v1::MaskRow* out;
    bool settled;             // `out` is final
    bool unchanged;           // equal to memory's row (keyed rows, by key)
    uint32_t next_same_key;   // an earlier keyed row with the same key hash
    uint32_t next_same_hash;  // an earlier row with the same words hash
  };
  static constexpr uint32_t kNone = ~0u;

  // Encodings of keyed rows: two generations, the older dropped when the
  // newer fills half the budget, a hit in the older moving up (an LRU at
  // the cost of two lookups).
  struct KeyHasher {
    using is_transparent = void;
    size_t operator()(absl::Span<const uintptr_t> key) const;
  };
  struct KeyEq {
    using is_transparent = void;
    bool operator()(absl::Span<const uintptr_t> a,
                    absl::Span<const uintptr_t> b) const;
  };
  struct Cached {
    std::weak_ptr<const void> owner;
    grammard::v1::MaskRow row;
  };
  using Generation =
      absl::flat_hash_map<std::vector<uintptr_t>, Cached, KeyHasher, KeyEq>;
  const grammard::v1::MaskRow* FindCached(absl::Span<const uintptr_t> key);
  void Cache(const Row& row);

  // Every row is listed in a chain of earlier rows with the same hash (by
  // key or by words): Link puts row `index` at the head of its hash's
  // chain in `last` and returns the row it links to (kNone: the first).
  static uint32_t Link(absl::flat_hash_map<uint64_t, uint32_t>* last,
                       uint64_t hash, uint32_t index);
  // The latest earlier row along `row`'s chain (`next`) of its vocabulary
  // size that `same` accepts, or kNone.
  template <typename Same>
  uint32_t Earlier(const Row& row, uint32_t Row::*next, Same same) const;

  // Updates `row`'s memory once its `out` is final.
  static void Remember(const Row& row);

  const size_t cache_bytes_;
  Generation newer_, older_;
  size_t newer_bytes_ = 0;
  std::vector<Row> rows_;
  std::vector<size_t> to_fill_;
  absl::flat_hash_map<uint64_t, uint32_t> last_with_key_hash_;
  absl::flat_hash_map<uint64_t, uint32_t> last_with_hash_;
  std::vector<const Row*> pending_;
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_STEP_ROWS_H_
