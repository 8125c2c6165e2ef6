// jemalloc takes jemalloc_conf.cc's options (a misspelt one is only a
// warning on stderr at start-up). Found through dlsym so that the sanitizer
// builds, which link no jemalloc, build this too and skip.
#include <dlfcn.h>
#include <sys/types.h>

#include <cstddef>

#include "gtest/gtest.h"

namespace {

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

TEST(JemallocConfTest, KeepsFreedPagesOnHugePages) {
  auto mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl == nullptr) GTEST_SKIP() << "this build links no jemalloc";
  const char* thp = nullptr;
  size_t size = sizeof(thp);
  ASSERT_EQ(mallctl("opt.thp", &thp, &size, nullptr, 0), 0);
  EXPECT_STREQ(thp, "always");
  for (const char* name : {"opt.dirty_decay_ms", "opt.muzzy_decay_ms"}) {
    ssize_t decay_ms = 0;
    size = sizeof(decay_ms);
    ASSERT_EQ(mallctl(name, &decay_ms, &size, nullptr, 0), 0) << name;
    EXPECT_EQ(decay_ms, -1) << name;
  }
}

}  // namespace
