// jemalloc's options for every binary that links it (.bazelrc
// --custom_malloc); MALLOC_CONF in the environment still overrides them.
//
// Compiling a large grammar allocates tens of megabytes (automaton rows,
// subsets, token-table slots) and frees them again. On a virtual machine
// the first touch of a page is a costly fault, so the options keep that
// memory in the process:
// - thp:always backs it with transparent huge pages where the kernel allows
//   them on request (madvise mode, Debian's default): with 4 KB pages two
//   thirds of a 60,000-state compile went to page faults.
// - dirty_decay_ms / muzzy_decay_ms -1: freed pages are never handed back,
//   so the next compile reuses them. With jemalloc's default decay (and
//   its arena for blocks over 8 MB, which hands them back at once) a
//   string counted to 32767 spent 12-24 ms of its 30-55 ms compile
//   faulting 14 huge pages in anew; MaskBench (2 threads) took 55,600
//   faults, 5,600 without decay, 13% less CPU, TTFM p99 32-34 ms instead
//   of 38-45 ms.
// The price: resident memory stays at its high-water mark (MaskBench 468 MB
// instead of 216 MB), bounded by the compile pool's threads times the
// largest compile (CompileOptions::max_states). The daemon bounds it: past
// --retain_freed_mb of freed pages it hands them all back
// (service/memory_release.h). A daemon levels off there:
// the 2-minute soak (tests/load) stayed at 315 MB from its first minute on,
// where with decay it wandered between 220 and 260 MB, and it ran 46% more
// sequences (step p99 6.8 ms instead of 11.4). A sidecar whose memory
// limit is tight can set MALLOC_CONF=dirty_decay_ms:10000 (jemalloc's
// default) or thp:default.
extern "C" {
// Read by jemalloc at start-up; the name is its interface.
const char* malloc_conf =  // NOLINT
    "thp:always,dirty_decay_ms:-1,muzzy_decay_ms:-1";
}
