// How much memory this machine can give a new allocation: what a session checks its context's tables
// against before allocating them (runtime/session.cpp), so that a context too large is refused with the
// sizes rather than failing deep inside an allocation.
#pragma once

#include <cstdint>

namespace tilellm {

// MemAvailable from /proc/meminfo where the kernel reports it, else the physical memory; 0 if unknown.
uint64_t available_memory_bytes();

}  // namespace tilellm
