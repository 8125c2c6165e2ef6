// jemalloc's options for every binary that links it (.bazelrc
// --custom_malloc); MALLOC_CONF in the environment still overrides them.
//
// thp:always backs jemalloc's memory with transparent huge pages where the
// kernel allows them on request (madvise mode, Debian's default). Compiling
// a large grammar allocates tens of megabytes (automaton rows, subsets,
// token-table slots) and frees them again; on a virtual machine every 4 KB
// page first touched is a costly fault, and jemalloc hands large blocks
// back to the kernel soon after they are freed, so each compile faulted
// its memory in anew: two thirds of a 60,000-state compile (MaskBench's
// slowest) went to page faults, a third with 2 MB pages. The price is
// resident memory rounded up to 2 MB blocks, which a sidecar holding
// compiled grammars can afford; set MALLOC_CONF=thp:default to opt out.
extern "C" {
// Read by jemalloc at start-up; the name is its interface.
const char* malloc_conf = "thp:always";  // NOLINT
}
