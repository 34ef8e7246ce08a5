// Counts every global operator new in a test program, for tests of the "nothing allocated during decode"
// contract. The replacement operators are defined once, in tests/runtime/alloc_counter.cpp; any test of that
// program reads the count before and after the code under test.
#pragma once

namespace tilellm::test {

// Allocations made through operator new (every form) since the program started.
long allocation_count();

}  // namespace tilellm::test
