// The counting operator new/delete of tests/runtime (tests/common/alloc_counter.h), in this program too: the
// replay test counts the host allocations of replayed decode steps.
#include "../runtime/alloc_counter.cpp"
