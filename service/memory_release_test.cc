#include "service/memory_release.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace grammard::service {
namespace {

// Memory freed by the program stays with jemalloc (decay is off) until
// released, and then is gone from what it keeps.
TEST(MemoryReleaseTest, FreedMemoryIsKeptUntilReleased) {
  if (MemoryRelease::UnusedBytes() < 0) {
    GTEST_SKIP() << "this build links no jemalloc";
  }
  MemoryRelease::ReleaseNow();
  const int64_t before = MemoryRelease::UnusedBytes();
  std::vector<char*> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.push_back(static_cast<char*>(std::malloc(1 << 20)));
    std::memset(blocks.back(), 1, 1 << 20);
  }
  for (char* b : blocks) std::free(b);
  EXPECT_GE(MemoryRelease::UnusedBytes(), before + (48 << 20));
  EXPECT_GE(MemoryRelease::ReleaseNow(), 48 << 20);
  EXPECT_LT(MemoryRelease::UnusedBytes(), 8 << 20);
}

}  // namespace
}  // namespace grammard::service
