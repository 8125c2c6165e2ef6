// LazyArray: a fixed number of default-constructed elements, made a chunk at
// a time the first time one of the chunk's elements is needed.
//
// For per-state and per-return-state tables of which an output meets a
// few: a string counted to maxLength 65535 has that many states and return
// states, and making a slot for each of them took milliseconds on a first
// mask that needed two.
//
// Cost: At() is a load and a branch once its chunk is made; making a chunk
// default-constructs kChunk elements. Memory: a pointer per chunk, plus the
// chunks made.
// Thread-safety: At() and Find() may be called from any number of threads
// (threads racing to make a chunk each make one; one is kept, the others
// dropped). Elements are handed out by reference; guarding them is the
// caller's business.
#ifndef GRAMMARD_GRAMMAR_BASE_LAZY_ARRAY_H_
#define GRAMMARD_GRAMMAR_BASE_LAZY_ARRAY_H_

#include <atomic>
#include <cstddef>
#include <memory>

namespace grammard::grammar::internal {

template <typename T, size_t kChunk = 64>
class LazyArray {
 public:
  explicit LazyArray(size_t size = 0)
      : size_(size), chunks_(std::make_unique<std::atomic<T*>[]>(NumChunks())) {
    for (size_t c = 0; c < NumChunks(); ++c) chunks_[c].store(nullptr);
  }
  LazyArray(const LazyArray&) = delete;
  LazyArray& operator=(const LazyArray&) = delete;
  ~LazyArray() {
    for (size_t c = 0; c < NumChunks(); ++c) {
      delete[] chunks_[c].load(std::memory_order_relaxed);
    }
  }

  size_t size() const { return size_; }

  // Element i (< size()), making its chunk if none was made before; `made`,
  // when given, says whether this call made it (for memory accounting).
  T& At(size_t i, bool* made = nullptr) const {
    std::atomic<T*>& chunk = chunks_[i / kChunk];
    T* elements = chunk.load(std::memory_order_acquire);
    if (made != nullptr) *made = false;
    if (elements == nullptr) {
      auto fresh = std::make_unique<T[]>(kChunk);
      if (chunk.compare_exchange_strong(elements, fresh.get(),
                                        std::memory_order_acq_rel)) {
        elements = fresh.release();
        chunks_made_.fetch_add(1, std::memory_order_relaxed);
        if (made != nullptr) *made = true;
      }
    }
    return elements[i % kChunk];
  }

  // Element i, or null while its chunk is not made (so none of its
  // elements was ever needed).
  const T* Find(size_t i) const {
    const T* elements = chunks_[i / kChunk].load(std::memory_order_acquire);
    return elements == nullptr ? nullptr : &elements[i % kChunk];
  }

  static constexpr size_t ChunkBytes() { return kChunk * sizeof(T); }
  // The chunk pointers and the chunks made so far.
  size_t MemoryBytes() const {
    return NumChunks() * sizeof(std::atomic<T*>) +
           chunks_made_.load(std::memory_order_relaxed) * ChunkBytes();
  }

 private:
  size_t NumChunks() const { return (size_ + kChunk - 1) / kChunk; }

  size_t size_;
  std::unique_ptr<std::atomic<T*>[]> chunks_;
  mutable std::atomic<size_t> chunks_made_{0};
};

}  // namespace grammard::grammar::internal

#endif  // GRAMMARD_GRAMMAR_BASE_LAZY_ARRAY_H_
